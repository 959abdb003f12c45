#include "ops/op_utils.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/grad_mode.h"
#include "engine/stream_placement.h"
#include "engine/view_history.h"
#include "ops/ops.h"

namespace streamgrad {
namespace ops_internal {

void check_defined(const Tensor& t, const char* op, const char* what) {
  SG_CHECK(t.defined(), ValueError, op, ": ", what, " is an undefined tensor");
}

void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  if (a.device() == b.device()) return;
  throw DeviceError(absl::StrCat(op, ": expected all tensors on one device, but got ",
                                 a.describe(), " and ", b.describe(), "; move one with to(",
                                 "tensor, \"", a.device().str(), "\")"));
}

bool is_cpu_scalar_for(const Tensor& s, const Tensor& other) {
  return s.dim() == 0 && s.device().is_cpu() && !other.device().is_cpu();
}

void check_binary_devices(const Tensor& a, const Tensor& b, const char* op) {
  if (a.device() == b.device() || is_cpu_scalar_for(a, b) || is_cpu_scalar_for(b, a)) return;
  throw DeviceError(absl::StrCat(op, ": expected all tensors on one device, but got ",
                                 a.describe(), " and ", b.describe(),
                                 " (only a 0-dim cpu tensor acts as a scalar beside another "
                                 "device); move one with to(tensor, \"", a.device().str(),
                                 "\")"));
}

Device binary_device(const Tensor& a, const Tensor& b) {
  return is_cpu_scalar_for(a, b) ? b.device() : a.device();
}

Tensor operand_on(const Tensor& t, Device device) {
  if (t.device() == device) return t;
  SG_INTERNAL_CHECK(t.dim() == 0 && t.device().is_cpu(), "operand_on: ", t.describe(),
                    " is not a cpu scalar");
  if (t.dtype() != DType::kFloat32 && t.dtype() != DType::kFloat64) {
    return to(t.detach(), device);
  }
  const double value = t.dtype() == DType::kFloat32 ? t.item<float>() : t.item<double>();
  return full({}, value, TensorOptions().dtype(t.dtype()).device(device));
}

void check_floating(const Tensor& a, const char* op) {
  SG_CHECK(is_floating(a.dtype()), ValueError, op, ": expected a floating tensor (float32, float64, float16 or "
           "bfloat16), got ", a.describe(), "; convert it with to(tensor, DType::kFloat32)");
}

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  SG_CHECK(a.dtype() == b.dtype(), ValueError, op, ": dtypes differ: ", a.describe(), " and ",
           b.describe(), "; convert one with to(tensor, dtype)");
}

bool needs_promotion(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.dtype() != b.dtype() && is_floating(a.dtype()) &&
         is_floating(b.dtype());
}

DType promoted_dtype(const Tensor& a, const Tensor& b) {
  if (a.dim() == 0 && b.dim() > 0) return b.dtype();
  if (b.dim() == 0 && a.dim() > 0) return a.dtype();
  return promote_floating(a.dtype(), b.dtype());
}

void check_bool(const Tensor& t, const char* op, const char* what) {
  SG_CHECK(t.dtype() == DType::kBool, ValueError, op, ": expected a bool ", what, ", got ",
           t.describe(), "; make one with a comparison such as gt(x, 0.0), or convert with "
           "to(tensor, DType::kBool)");
}

void check_fill_value(double value, DType dtype, const char* op) {
  switch (dtype) {
    case DType::kInt64:
      SG_CHECK(is_int64_value(value), ValueError, op, ": value ", value,
               " cannot be stored in an int64 tensor without rounding; pass an integer, or "
               "convert the tensor with to(tensor, DType::kFloat64)");
      return;
    case DType::kBool:
      SG_CHECK(value == 0 || value == 1, ValueError, op, ": value ", value,
               " cannot be stored in a bool tensor; pass 0 (false) or 1 (true)");
      return;
    case DType::kFloat32:
      SG_CHECK(!std::isfinite(value) || std::abs(value) <= std::numeric_limits<float>::max(),
               ValueError, op, ": value ", value, " overflows float32; pass a smaller "
               "value (or infinity), or convert the tensor with to(tensor, DType::kFloat64)");
      return;
    case DType::kFloat64:
      return;
    case DType::kFloat16:
    case DType::kBFloat16: {
      // The value as the tensor will hold it: through float32, as the kernels convert.
      const float f = static_cast<float>(value);
      const float held = dtype == DType::kFloat16 ? Half::from_float(f).to_float()
                                                  : BFloat16::from_float(f).to_float();
      SG_CHECK(!std::isfinite(value) || std::isfinite(held), ValueError, op, ": value ", value,
               " overflows ", dtype_name(dtype), "; pass a smaller value (or infinity), or "
               "convert the tensor with to(tensor, DType::kFloat32)");
      return;
    }
  }
}

int64_t wrap_dim(int64_t dim, int64_t rank, const char* op) {
  const int64_t r = rank == 0 ? 1 : rank;
  SG_CHECK(dim >= -r && dim < r, ValueError, op, ": dimension ", dim,
           " is out of range for a tensor of rank ", rank, " (expected in [", -r, ", ", r - 1,
           "])");
  return dim < 0 ? dim + r : dim;
}

std::vector<bool> reduced_dims(const Tensor& a, const std::vector<int64_t>& dims, const char* op) {
  std::vector<bool> reduced(a.dim(), dims.empty());
  // Sized for the wrapped dim: a 0-dim tensor has one nameable dim but nothing to reduce.
  std::vector<bool> seen(std::max<int64_t>(a.dim(), 1), false);
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, a.dim(), op);
    SG_CHECK(!seen[w], ValueError, op, ": dimension ", d, " appears twice in [",
             absl::StrJoin(dims, ", "), "]");
    seen[w] = true;
    if (a.dim() > 0) reduced[w] = true;
  }
  return reduced;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    SG_CHECK(da == db || da == 1 || db == 1, ValueError, op, ": shapes [", absl::StrJoin(a, ", "),
             "] and [", absl::StrJoin(b, ", "), "] cannot be broadcast together (dimension ", i,
             ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

kernels::View expand_view(const Tensor& t, const Shape& shape) {
  kernels::View v = t.view();
  const size_t lead = shape.size() - v.sizes.size();
  Shape strides(shape.size(), 0);
  for (size_t i = 0; i < v.sizes.size(); ++i) {
    strides[lead + i] = v.sizes[i] == 1 && shape[lead + i] != 1 ? 0 : v.strides[i];
  }
  v.sizes = shape;
  v.strides = std::move(strides);
  return v;
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.sizes() == shape) return g;
  const Shape& gs = g.sizes();
  const size_t lead = gs.size() - shape.size();
  std::vector<int64_t> dims;
  for (size_t i = 0; i < gs.size(); ++i) {
    if (i < lead || (shape[i - lead] == 1 && gs[i] != 1)) dims.push_back(static_cast<int64_t>(i));
  }
  Tensor r = sum(g, dims, /*keepdim=*/true);
  return reshape(r, shape);
}

InputInfo meta_of(const Tensor& t) { return InputInfo{t.sizes(), t.dtype(), t.device()}; }

Tensor grad_for(const Tensor& g, const InputInfo& input) {
  Tensor r = sum_to(g, input.sizes);
  if (r.dtype() != input.dtype) r = to(r, input.dtype);
  if (r.device() != input.device) r = to(r, input.device);
  return r;
}

Tensor new_output(const Shape& sizes, DType dtype, Device device) {
  return empty(sizes, TensorOptions().dtype(dtype).device(device));
}

kernels::View contiguous_view_as(const Tensor& t, const Shape& shape) {
  SG_INTERNAL_CHECK(t.is_contiguous() && numel_of(shape) == t.numel(), "viewing ",
                    t.describe(), " as [", absl::StrJoin(shape, ", "), "]");
  kernels::View v = t.view();
  v.sizes = shape;
  v.strides = kernels::contiguous_strides(shape);
  return v;
}

void wire(const std::shared_ptr<Node>& node, absl::Span<const Tensor> inputs,
          absl::Span<const Tensor> outputs) {
  node->set_next_edges(collect_next_edges(inputs));
  for (const Tensor& out : outputs) set_history(out, node);
  op_recorded(outputs);  // the stream-consistency check moves to the next stream here
}

void check_inplace(const Tensor& a, const char* op) {
  if (!grad_mode_enabled()) return;
  SG_CHECK(!(a.is_leaf() && a.requires_grad()), Error, op, ": a leaf tensor that requires grad (",
           a.describe(), ") cannot be modified in place; do it under NoGradGuard, or on a "
           "clone");
  const Tensor base = differentiable_base(a);
  SG_CHECK(!base.defined() || !(base.is_leaf() && base.requires_grad()), Error, op, ": ",
           a.describe(), " is a view of a leaf tensor that requires grad (", base.describe(),
           "), so it cannot be modified in place; do it under NoGradGuard, or on a clone");
  for (int64_t d = 0; d < a.dim(); ++d) {
    SG_CHECK(a.strides()[d] != 0 || a.sizes()[d] <= 1, ValueError, op, ": ", a.describe(),
             " has dimension ", d, " expanded (stride 0), so more than one of its elements "
             "refers to the same memory; clone() it before modifying it in place");
  }
}

Tensor unary_forward(kernels::Unary op, const Tensor& a, const char* name) {
  check_defined(a, name, "the input");
  check_floating(a, name);
  Tensor out = new_output(a.sizes(), a.dtype(), a.device());
  kernels::unary(stream_of(out), op, out.view(), a.view());
  return out;
}

Tensor binary_kernel(kernels::Binary op, const Tensor& a, const Tensor& b) {
  Tensor out = new_output(a.sizes(), a.dtype(), a.device());
  kernels::binary(stream_of(out), op, out.view(), a.view(), b.view());
  return out;
}

int64_t check_indexed(const char* op, const Tensor& t, int64_t dim, const Tensor& index,
                      const Tensor* src) {
  check_defined(t, op, "the input");
  check_defined(index, op, "index");
  check_same_device(t, index, op);
  SG_CHECK(index.dtype() == DType::kInt64, ValueError, op, ": index must be int64, got ",
           index.describe());
  SG_CHECK(index.dim() == t.dim(), ValueError, op, ": index ", index.describe(),
           " must have the rank of the input ", t.describe());
  const int64_t d = wrap_dim(dim, t.dim(), op);
  for (int64_t i = 0; i < t.dim(); ++i) {
    SG_CHECK(i == d || index.size(i) <= t.size(i), ValueError, op, ": index ",
             index.describe(), " is larger than the input ", t.describe(), " on dim ", i);
  }
  if (src != nullptr) {
    check_defined(*src, op, "src");
    check_same_device(t, *src, op);
    check_same_dtype(t, *src, op);
    bool covers = src->dim() == index.dim();
    for (int64_t i = 0; covers && i < index.dim(); ++i) covers = index.size(i) <= src->size(i);
    SG_CHECK(covers, ValueError, op, ": src ", src->describe(), " must have index's rank and be ",
             "at least as large as index ", index.describe(), " on every dim (only the part "
             "of src that index covers is read)");
  }
  return d;
}

Tensor covered(const Tensor& src, const Shape& sizes) {
  Tensor part = src;
  for (int64_t i = 0; i < src.dim(); ++i) {
    if (part.size(i) != sizes[i]) part = narrow(part, i, 0, sizes[i]);
  }
  return part;
}

}  // namespace ops_internal
}  // namespace streamgrad
