// tril and triu, as the reference's: the lower / upper triangle of the last two dims
// (every leading index alike), with the diagonal shifted by `diagonal` (positive: above
// the main diagonal, negative: below). Elements outside are set to zero whatever they
// held (a NaN outside the triangle becomes 0).
//
// Both are where(mask, x, 0) with a [rows, cols] bool mask built on the host and copied to
// x's device: where's backward applies that same mask to the gradient and is itself made
// of where, so both are differentiable to any order, for every dtype where accepts.
#include <vector>

#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT: the helpers every op uses

Tensor triangle(const Tensor& x, int64_t diagonal, bool lower, const char* op) {
  check_defined(x, op, "the input");
  SG_CHECK(x.dim() >= 2, ValueError, op, ": input ", x.describe(),
           " must have at least 2 dimensions (the triangle is taken over the last two); "
           "unsqueeze a vector first");
  const int64_t rows = x.size(-2);
  const int64_t cols = x.size(-1);
  std::vector<bool> keep(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      keep[static_cast<size_t>(i * cols + j)] = lower ? j - i <= diagonal : j - i >= diagonal;
    }
  }
  const Tensor mask =
      from_vector<bool>(keep, {rows, cols}, TensorOptions().dtype(DType::kBool).device(x.device()));
  const Tensor zero = zeros({}, TensorOptions().dtype(x.dtype()).device(x.device()));
  return where(mask, x, zero);
}

}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, true, "tril"); }
Tensor triu(const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, false, "triu"); }

}  // namespace streamgrad
