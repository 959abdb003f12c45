// The argument records that the front door passes to a kernel's implementations (host
// loops and cuda kernels alike), after it has checked the views: plain values that a
// launch captures by value.
//
// Thread-safety: plain values. Failure: none (the front door validates first).
#ifndef STREAMGRAD_KERNELS_DISPATCH_KERNEL_ARGS_H_
#define STREAMGRAD_KERNELS_DISPATCH_KERNEL_ARGS_H_

#include <cstdint>
#include <string>

#include "kernels/dispatch/strided.h"
#include "kernels/op_codes.h"

namespace streamgrad {
namespace kernels {

// An index kernel's arguments: `walk` over operands (out or target, other, index); the
// indexed element is at index[off2] * step from the target's offset (read: in; accumulate:
// out). Every index in `index_layout` (over `index`) must be in [0, limit) along dim `dim`
// of the indexed view, or a ValueError names the first bad one and nothing is written.
struct IndexArgs {
  const char* name;
  cpu::Layout<3> walk;
  void* out;
  const void* other;
  const int64_t* index;
  int64_t step;
  cpu::Layout<1> index_layout;
  int64_t dim, limit;
  // Accumulating kernels only: how src meets out (scatter_add adds, scatter assigns,
  // scatter_reduce multiplies or keeps the max / min), and whether out's own value takes
  // part: when false, every indexed position first gets the combine's identity (0, 1,
  // -inf, +inf), so that only src reaches it.
  IndexCombine combine = IndexCombine::kAdd;
  bool include_self = true;
};

// check_index_range's message for the first bad index (the same from every device).
inline std::string index_range_message(const std::string& context, int64_t low, int64_t limit,
                                       int64_t position, int64_t value) {
  return context + "; element " + std::to_string(position) + " (row-major) is " +
         std::to_string(value) + ", out of range " + std::to_string(low) + ".." +
         std::to_string(limit - 1);
}

// index_linear's step for one element (the same on every device): `so_far` plus the
// wrapped index times stride. An index outside [-size, size), or a position already
// marked bad, gives kBadPosition, which stays negative through later steps, so that the
// index kernels refuse it even where the range check's error surfaces later (sim).
constexpr int64_t kBadPosition = -(int64_t{1} << 62);
#if defined(__CUDACC__)
__host__ __device__
#endif
inline int64_t linear_step(int64_t so_far, int64_t index, int64_t size, int64_t stride) {
  if (so_far < 0 || index < -size || index >= size) return kBadPosition;
  return so_far + (index < 0 ? index + size : index) * stride;
}

// One input of cat or stack and the slice of out it fills (layout operand 0: out's slice,
// operand 1: the input); out and the inputs share one dtype.
struct JoinPiece {
  cpu::Layout<2> layout;
  void* out;
  const void* in;
};

// One parameter of a multi-tensor optimiser call (kernels/foreach.h), as the kernels see
// it: its operands' merged layout and data.
struct SgdItem {
  cpu::Layout<3> layout;  // param, grad, momentum buffer (the param's strides when unused)
  void* param;
  const void* grad;
  void* buf;  // null without momentum
  bool fresh;
};
struct AdamItem {
  cpu::Layout<4> layout;  // param, grad, exp_avg, exp_avg_sq
  void* param;
  const void* grad;
  void* m;
  void* v;
  double inv_sqrt_bias2;
  double neg_step;
  bool fresh;
};
// One non-empty grad of non_finite_check_and_unscale (kernels/foreach.h).
struct UnscaleItem {
  cpu::Layout<1> layout;
  void* grad;
};

// sort and topk along one dim (kernels.h): `walk` runs over the slices (operands values,
// indices, in; the sorted dim at size 1), each slice n elements of `in` `in_step` apart,
// of which the first k in sort order land `values_step` / `indices_step` apart.
struct SortArgs {
  cpu::Layout<3> walk;
  int64_t n, k;
  int64_t in_step, values_step, indices_step;
  bool descending;
};

// multinomial sampling with replacement: `rows` rows of `categories` weights
// (`row_stride` / `category_stride` apart in `probs`), `samples` draws per row into a
// contiguous int64 [rows, samples] out; draw s of row r uses counter offset + r * samples + s.
struct MultinomialArgs {
  int64_t rows, categories, samples;
  int64_t row_stride, category_stride;
  uint64_t seed, offset;
};

// The kernels of kernels/nn_kernels.h, on checked (contiguous) views. ImageShape: images
// [batch, channels, height, width] with oh x ow window positions (max pooling: channels is
// the plane count P, batch unused).
struct ImageShape {
  int64_t batch, channels, height, width, oh, ow;
};
struct NcsShape {
  int64_t n, c, s;
};
// batch_norm's running statistics [C], moved in the forward's launch (nn_kernels.h):
// none where mean is null.
struct RunningUpdate {
  void* mean = nullptr;
  void* var = nullptr;
  double momentum = 0;
};
// Row normalisation (layer_norm, rms_norm) of m rows of n contiguous values, each row on
// its own; rms: no centring (the mean is 0 and not saved).
struct NormRows {
  int64_t m, n;
  bool rms;
};

// Scaled dot-product attention over bh independent heads: q [bh, tq, d], k [bh, tk, d],
// v [bh, tk, dv], all contiguous; causal: query i sees keys j <= i only; the additive
// mask, when given, is [tq, tk] for every head (mask_batched false) or [bh, tq, tk].
struct AttentionShape {
  int64_t bh, tq, tk, d, dv;
  bool causal;
  double scale;
  bool mask_batched;
};

// Convolution through a library (cuDNN on cuda, oneDNN on the host). kForward: a = out, b = in, c = weight; kBackwardInput:
// a = grad_in, b = grad_out, c = weight; kBackwardWeight: a = grad_weight, b = grad_out,
// c = in.
enum class ConvPass { kForward, kBackwardInput, kBackwardWeight };
struct ConvShape {
  int64_t n, c, h, w, o, kh, kw, oh, ow, groups;
};

}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_DISPATCH_KERNEL_ARGS_H_
