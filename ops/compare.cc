// Comparisons: eq, ne, lt, le, gt, ge with a tensor or a scalar, as PyTorch's. The result
// is a fresh bool tensor with no history: a comparison has no gradient, and its typical
// use — the condition of where, the mask of masked_fill — needs none.
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT: the helpers every op uses
using kernels::Compare;

Tensor compare_forward(Compare op, const Tensor& a, const Tensor& b, const char* name) {
  if (needs_promotion(a, b)) {
    const DType t = promoted_dtype(a, b);
    return compare_forward(op, to(a.detach(), t), to(b.detach(), t), name);
  }
  check_defined(a, name, "the first input");
  check_defined(b, name, "the second input");
  check_binary_devices(a, b, name);
  check_same_dtype(a, b, name);
  const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), name);
  const Device d = binary_device(a, b);
  const Tensor ak = operand_on(a, d);
  const Tensor bk = operand_on(b, d);
  Tensor out = new_output(shape, DType::kBool, d);
  kernels::compare(stream_of(out), op, out.view(), expand_view(ak, shape), expand_view(bk, shape));
  return out;
}

Tensor compare_scalar_forward(Compare op, const Tensor& a, double b, const char* name) {
  check_defined(a, name, "the input");
  Tensor out = new_output(a.sizes(), DType::kBool, a.device());
  kernels::compare_scalar(stream_of(out), op, out.view(), a.view(), b);
  return out;
}

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare_forward(Compare::kEq, a, b, "eq"); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare_forward(Compare::kNe, a, b, "ne"); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare_forward(Compare::kLt, a, b, "lt"); }
Tensor le(const Tensor& a, const Tensor& b) { return compare_forward(Compare::kLe, a, b, "le"); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare_forward(Compare::kGt, a, b, "gt"); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare_forward(Compare::kGe, a, b, "ge"); }

Tensor eq(const Tensor& a, double b) { return compare_scalar_forward(Compare::kEq, a, b, "eq"); }
Tensor ne(const Tensor& a, double b) { return compare_scalar_forward(Compare::kNe, a, b, "ne"); }
Tensor lt(const Tensor& a, double b) { return compare_scalar_forward(Compare::kLt, a, b, "lt"); }
Tensor le(const Tensor& a, double b) { return compare_scalar_forward(Compare::kLe, a, b, "le"); }
Tensor gt(const Tensor& a, double b) { return compare_scalar_forward(Compare::kGt, a, b, "gt"); }
Tensor ge(const Tensor& a, double b) { return compare_scalar_forward(Compare::kGe, a, b, "ge"); }

}  // namespace streamgrad
