// The per-channel math of batch normalisation (kernels/nn_kernels.h: batch_norm_forward,
// batch_norm_backward) as SG_HOST_DEVICE functors: the cpu loops (kernels/host/loops_nn.cc)
// and the cuda kernels (kernels/cuda/nn.cu) call the same ones, so both devices agree
// element for element.
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

}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_FUNCTORS_NORM_OPS_H_
