// The per-channel math of batch normalisation (kernels/nn_kernels.h: batch_norm_forward,
// batch_norm_backward) and the per-row math of layer and RMS normalisation
// (layer_norm_forward, rms_norm_forward and their backwards) as SG_HOST_DEVICE functors:
// the cpu loops (kernels/host/loops_nn.cc) and the cuda kernels (kernels/cuda/nn.cu) call
// the same ones, so both devices agree element for element.
//
// Thread-safety: stateless values. Failure: none.
#ifndef STREAMGRAD_KERNELS_FUNCTORS_NORM_OPS_H_
#define STREAMGRAD_KERNELS_FUNCTORS_NORM_OPS_H_

#include <cmath>

#include "runtime/base/host_device.h"

namespace streamgrad {
namespace kernels {

// y = (x - mean) * invstd * weight + bias for one channel.
template <typename T>
struct BatchNormApply {
  T mean, invstd, weight, bias;
  SG_HOST_DEVICE T operator()(T x) const { return (x - mean) * invstd * weight + bias; }
};

// dx for one channel of m values, from the channel's sums of g and of g * (x - mean):
// dx = weight * invstd * (g - sum_g / m - (x - mean) * invstd^2 * sum_gc / m).
template <typename T>
struct BatchNormInputGrad {
  T mean, invstd, weight, mean_g, proj;  // proj = sum_gc * invstd^2 / m
  SG_HOST_DEVICE T operator()(T g, T x) const {
    return weight * invstd * (g - mean_g - (x - mean) * proj);
  }
};

template <typename T>
SG_HOST_DEVICE inline T batch_norm_invstd(T var, double eps) {
  return T(1) / std::sqrt(var + static_cast<T>(eps));
}

// A running statistic moved toward the batch's (nn_kernels.h, RunningStats): `factor`
// n / (n - 1) for the variance, 1 for the mean; in double, so every device rounds the same
// value once.
SG_HOST_DEVICE inline double running_moved(double running, double batch, double momentum,
                                           double factor) {
  return (1 - momentum) * running + momentum * factor * batch;
}

// One row of layer normalisation before its weight and bias: (x - mean) * rstd. RMS
// normalisation is the same with mean 0 (x - 0 is x exactly, so no separate functor).
template <typename T>
struct LayerNormApply {
  T mean, rstd;
  SG_HOST_DEVICE T operator()(T x) const { return (x - mean) * rstd; }
};

// dx for one row of n values, from gw = g * weight (g without a weight) and the row's sums
// of gw and of gw * (x - mean):
// dx = rstd * (gw - sum_gw / n - (x - mean) * rstd^2 * sum_gwc / n).
// RMS normalisation: mean = 0 and mean_gw = 0 (its output is not centred).
template <typename T>
struct LayerNormInputGrad {
  T mean, rstd, mean_gw, proj;  // proj = sum_gwc / n * rstd^2
  SG_HOST_DEVICE T operator()(T gw, T x) const {
    return rstd * (gw - mean_gw - (x - mean) * proj);
  }
};

// 1 / sqrt(var + eps) from a row's variance (RMS: mean square), in double on every device;
// the kernels round it once to the dtype they save it in.
SG_HOST_DEVICE inline double layer_norm_rstd(double var, double eps) {
  return 1.0 / std::sqrt(var + eps);
}

}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_FUNCTORS_NORM_OPS_H_
