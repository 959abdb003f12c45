// adaptive_avg_pool2d, as the reference's: output cell (i, j) of an [oh, ow] grid averages
// input rows floor(i H / oh) .. ceil((i + 1) H / oh) - 1 and the columns found alike from
// W / ow (windows may overlap and differ in size).
//
// A composite: the average is separable, out = A_h x A_w^T with A_h [oh, H] holding
// 1 / (window height) on each row's window and zero elsewhere (A_w likewise), so two
// matmuls of small host-built matrices give it, O(H W (oh + ow)) work per plane, each
// product one gemm over all planes (rather than a batch of one tiny gemm per plane).
// The gradient and its gradient come from matmul's (the op is linear, its backward the
// transpose: A_h^T g A_w). Each cell is scaled by the window's height and width in turn,
// rather than the reference's one division of the sum, so results agree within rounding.
// float16 and bfloat16 inputs are averaged in float32 and rounded once (the widening
// rule of the kernels).
#include <array>
#include <vector>

#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT: the helpers every op uses

// [out, in]: row i averages in's cells floor(i in / out) .. ceil((i + 1) in / out) - 1.
Tensor window_matrix(int64_t out, int64_t in, DType dtype, Device device) {
  std::vector<double> a(static_cast<size_t>(out * in), 0.0);
  for (int64_t i = 0; i < out; ++i) {
    const int64_t start = i * in / out;
    const int64_t end = ((i + 1) * in + out - 1) / out;
    for (int64_t h = start; h < end; ++h) {
      a[static_cast<size_t>(i * in + h)] = 1.0 / static_cast<double>(end - start);
    }
  }
  return from_vector<double>(a, {out, in}, TensorOptions().dtype(dtype).device(device));
}

}  // namespace

Tensor adaptive_avg_pool2d(const Tensor& input, std::array<int64_t, 2> output_size) {
  const char* op = "adaptive_avg_pool2d";
  check_defined(input, op, "the input");
  check_floating(input, op);
  SG_CHECK(input.dim() == 3 || input.dim() == 4, ValueError, op, ": input ",
           input.describe(), " must be [N, C, H, W] or unbatched [C, H, W]");
  for (int64_t d = 1; d < input.dim(); ++d) {
    SG_CHECK(input.size(d) > 0, ValueError, op, ": input ", input.describe(),
             " has an empty dim ", d, "; only the batch dim may be empty");
  }
  SG_CHECK(output_size[0] >= 0 && output_size[1] >= 0, ValueError, op, ": output_size {",
           output_size[0], ", ", output_size[1], "} must not be negative");
  const DType compute = is_reduced_floating(input.dtype()) ? DType::kFloat32 : input.dtype();
  const Tensor x = compute == input.dtype() ? input : to(input, compute);
  const Tensor ah = window_matrix(output_size[0], input.size(-2), compute, input.device());
  const Tensor aw = window_matrix(output_size[1], input.size(-1), compute, input.device());
  // Both products fold every plane into the rows of one gemm: columns first ([..., H, ow]),
  // then rows on the transposed result ([..., ow, oh]), transposed back.
  const Tensor cols = matmul(x, transpose(aw, 0, 1));
  const Tensor rows = matmul(transpose(cols, -1, -2), transpose(ah, 0, 1));
  const Tensor out = contiguous(transpose(rows, -1, -2));
  return compute == input.dtype() ? out : to(out, input.dtype());
}

}  // namespace streamgrad
