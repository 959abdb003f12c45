// Sliding-window geometry shared by the convolution and pooling kernels: the parameters of
// a 2-D window (kernel, stride, padding, dilation), the output size they give, and the
// per-element index math, written as __host__ __device__ functions so that a CUDA kernel
// can use exactly what the CPU kernels (and their tests) use.
//
// Thread-safety: values and pure functions. Failure: none here; ops validate parameters
// (window_output_size returns <= 0 for windows that do not fit).
#ifndef STREAMGRAD_KERNELS_WINDOW_H_
#define STREAMGRAD_KERNELS_WINDOW_H_

#include <cstdint>

#include "runtime/base/host_device.h"

namespace streamgrad {
namespace kernels {

struct Window2d {
  int64_t kernel[2] = {1, 1};
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  int64_t dilation[2] = {1, 1};
};

// Output positions along one dim (floor, or ceil as pooling's ceil_mode: the last
// window must still start inside the input or its left padding). Rounding up can give a
// position where rounding down gives none: a window longer than the padded input still
// has one output in ceil mode (as in the reference framework), hence the division that
// rounds toward -infinity rather than an early exit on a negative span.
SG_HOST_DEVICE inline int64_t window_output_size(int64_t in, int64_t kernel, int64_t stride,
                                                 int64_t padding, int64_t dilation,
                                                 bool ceil_mode = false) {
  const int64_t span =
      in + 2 * padding - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  const int64_t steps = span >= 0 ? span / stride : -((-span + stride - 1) / stride);
  int64_t out = steps + 1;
  if (ceil_mode && out > 0 && (out - 1) * stride >= in + padding) --out;
  return out > 0 ? out : 0;
}

// The input coordinate that kernel tap `k` of output position `o` reads (may lie in
// the padding: outside [0, in)).
SG_HOST_DEVICE inline int64_t window_input_index(int64_t o, int64_t k, int64_t stride,
                                                 int64_t padding, int64_t dilation) {
  return o * stride - padding + k * dilation;
}

}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_WINDOW_H_
