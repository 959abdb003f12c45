// The per-element math of the optimiser updates (SGD with momentum, dampening, nesterov
// and weight decay; Adam and AdamW) and of the gradient scaler's unscale-and-check
// (nn/grad_scaler.h), as SG_HOST_DEVICE functors: the cpu multi-tensor kernels
// (kernels/foreach.cc) and the cuda kernels (kernels/cuda/foreach.cu) call them, so
// that both devices agree element for element.
//
// Each functor performs exactly the steps of nn/optim.cc's per-tensor path (one kernel
// per step there), in the element type T with the same scalars rounded to T, so that the
// two paths give the same bits when the compiler contracts no a * b + c into a fused
// multiply-add (the case for this project's x86-64 builds, which enable no FMA
// instructions; kernels/cuda is compiled with -fmad=false for the same reason).
//
// Thread-safety: plain values. Failure: none; the scalars are validated by the optimisers.
#ifndef STREAMGRAD_KERNELS_FUNCTORS_OPTIM_OPS_H_
#define STREAMGRAD_KERNELS_FUNCTORS_OPTIM_OPS_H_

#include <cmath>

#include "kernels/functors/math_fns.h"
#include "runtime/base/host_device.h"

namespace streamgrad {
namespace kernels {

// PyTorch's SGD: g += wd * p; buf = first step ? g : momentum * buf + (1 - dampening) * g;
// g = nesterov ? g + momentum * buf : buf; p -= lr * g.
template <typename T>
struct SgdUpdate {
  T weight_decay;
  T momentum;
  T one_minus_dampening;
  T neg_lr;
  bool decay;         // weight_decay != 0
  bool nesterov;

  // Without momentum: the new value of p.
  SG_HOST_DEVICE T operator()(T p, T g) const {
    if (decay) g = g + weight_decay * p;
    return p + neg_lr * g;
  }
  // With momentum: updates buf and returns the new value of p. `fresh`: buf holds no
  // value yet (the parameter's first step), and takes the gradient as it is.
  SG_HOST_DEVICE T operator()(T p, T g, T& buf, bool fresh) const {
    if (decay) g = g + weight_decay * p;
    if (fresh) {
      buf = g;
    } else {
      const T kept = buf * momentum;
      buf = kept + one_minus_dampening * g;
    }
    g = nesterov ? g + momentum * buf : buf;
    return p + neg_lr * g;
  }
};

// PyTorch's Adam (L2 weight decay added to the gradient) and AdamW (decoupled: p is
// scaled by 1 - lr * wd first):
//   m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g;
//   p -= lr / bias1 * m / (sqrt(v) / sqrt(bias2) + eps)
// with bias_k = 1 - beta_k^step. The bias terms depend on the parameter's step count and
// are passed per call as inv_sqrt_bias2 = 1 / sqrt(bias2) and neg_step = -lr / bias1.
template <typename T>
struct AdamUpdate {
  T beta1;
  T one_minus_beta1;
  T beta2;
  T one_minus_beta2;
  T eps;
  T weight_decay;
  T decay_factor;     // 1 - lr * weight_decay (AdamW)
  bool decay;         // weight_decay != 0
  bool decoupled;     // AdamW

  // Updates m and v and returns the new value of p.
  SG_HOST_DEVICE T operator()(T p, T g, T& m, T& v, T inv_sqrt_bias2, T neg_step) const {
    if (decay) {
      if (decoupled) {
        p = p * decay_factor;
      } else {
        g = g + weight_decay * p;
      }
    }
    const T m_kept = m * beta1;
    m = m_kept + one_minus_beta1 * g;
    const T v_kept = v * beta2;
    const T g2 = g * g;
    v = v_kept + one_minus_beta2 * g2;
    const T scaled = math::sqrt(v) * inv_sqrt_bias2;
    const T denom = scaled + eps;
    const T ratio = m / denom;
    return p + neg_step * ratio;
  }
};

// The reference framework's _amp_foreach_non_finite_check_and_unscale_, per element:
// returns g * inv_scale and sets `found` (never clears it) when g is Inf or NaN. The
// test needs no library call, so host and device code share it and the cpu loops
// vectorise it: g - g is 0 for every finite g and NaN for Inf and NaN, and only NaN
// compares unequal to itself (this project compiles without -ffinite-math-only).
template <typename T>
struct NonFiniteCheckAndUnscale {
  T inv_scale;

  SG_HOST_DEVICE T operator()(T g, int& found) const {
    const T zero_if_finite = g - g;
    found |= zero_if_finite != zero_if_finite;
    return g * inv_scale;
  }
};

}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_FUNCTORS_OPTIM_OPS_H_
