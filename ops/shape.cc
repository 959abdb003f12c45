// Views that move or drop dims: transpose, permute, squeeze, unsqueeze, slice, narrow.
//
// Each output shares its input's storage (make_view). Backward maps the gradient back:
// the inverse permutation, unsqueeze/squeeze, and for slice/narrow an internal op that
// places the gradient into zeros of the input's shape — itself differentiable (its
// backward slices again), so double backward works through every view.
#include <algorithm>

#include "absl/strings/str_join.h"
#include "engine/view_history.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT

struct PermuteBackward final : Node {
  PermuteBackward(std::vector<int64_t> inv, const char* n) : inverse(std::move(inv)), op_name(n) {}
  std::string name() const override { return op_name; }
  TensorList apply(TensorList&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {permute(grads[0], inverse)};
  }
  std::vector<int64_t> inverse;
  const char* op_name;
};

// Undoes a squeeze: puts back the size-1 dims `dims` (increasing).
struct SqueezeBackward final : Node {
  explicit SqueezeBackward(std::vector<int64_t> d) : dims(std::move(d)) {}
  std::string name() const override { return "SqueezeBackward"; }
  TensorList apply(TensorList&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    Tensor g = grads[0];
    for (int64_t d : dims) g = unsqueeze(g, d);
    return {g};
  }
  std::vector<int64_t> dims;
};

struct UnsqueezeBackward final : Node {
  explicit UnsqueezeBackward(int64_t d) : dim(d) {}
  std::string name() const override { return "UnsqueezeBackward"; }
  TensorList apply(TensorList&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {squeeze(grads[0], dim)};
  }
  int64_t dim;
};

// Where a slice sits in its input: dim, first index, step, length.
struct SliceSpec {
  int64_t dim = 0, start = 0, step = 1, length = 0;
};

Tensor slice_view(const Tensor& a, const SliceSpec& s) {
  Shape sizes = a.sizes(), strides = a.strides();
  const int64_t offset = a.storage_offset() + (s.length > 0 ? s.start * strides[s.dim] : 0);
  sizes[s.dim] = s.length;
  strides[s.dim] *= s.step;
  return make_view(a, sizes, strides, offset);
}

Tensor slice_impl(const Tensor& a, const SliceSpec& s, const char* backward_name);

// The gradient of a slice: zeros of `shape` with g in the slice. Differentiable: its own
// backward takes the same slice of the incoming gradient.
Tensor unslice(const Tensor& g, const Shape& shape, const SliceSpec& s);

struct SliceBackward final : Node {
  SliceBackward(Shape shape, SliceSpec s, const char* n)
      : input_shape(std::move(shape)), spec(s), op_name(n) {}
  std::string name() const override { return op_name; }
  TensorList apply(TensorList&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {unslice(grads[0], input_shape, spec)};
  }
  Shape input_shape;
  SliceSpec spec;
  const char* op_name;
};

struct UnsliceBackward final : Node {
  explicit UnsliceBackward(SliceSpec s) : spec(s) {}
  std::string name() const override { return "SliceBackwardBackward"; }
  TensorList apply(TensorList&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {slice_impl(grads[0], spec, "SliceBackward")};
  }
  SliceSpec spec;
};

Tensor unslice(const Tensor& g, const Shape& shape, const SliceSpec& s) {
  Tensor out = zeros(shape, TensorOptions().dtype(g.dtype()).device(g.device()));
  kernels::copy(stream_of(out), slice_view(out, s).view(), g.view());
  if (any_requires_grad({g})) wire(std::make_shared<UnsliceBackward>(s), {g}, {out});
  return out;
}

Tensor slice_impl(const Tensor& a, const SliceSpec& s, const char* backward_name) {
  Tensor out = slice_view(a, s);
  mark_differentiable_view(out, a);
  if (any_requires_grad({a})) {
    wire(std::make_shared<SliceBackward>(a.sizes(), s, backward_name), {a}, {out});
  }
  return out;
}

std::string dims_str(const std::vector<int64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

// The view of `a` with dims reordered by `perm`; its backward applies `inverse`.
Tensor permuted_view(const Tensor& a, const std::vector<int64_t>& perm,
                     const std::vector<int64_t>& inverse, const char* node_name) {
  const size_t rank = perm.size();
  Shape sizes(rank), strides(rank);
  for (size_t i = 0; i < rank; ++i) {
    sizes[i] = a.sizes()[perm[i]];
    strides[i] = a.strides()[perm[i]];
  }
  Tensor out = make_view(a, sizes, strides, a.storage_offset());
  mark_differentiable_view(out, a);
  if (any_requires_grad({a})) wire(std::make_shared<PermuteBackward>(inverse, node_name), {a}, {out});
  return out;
}

}  // namespace

Tensor permute(const Tensor& a, const std::vector<int64_t>& dims) {
  check_defined(a, "permute", "the input");
  const int64_t rank = a.dim();
  SG_CHECK(static_cast<int64_t>(dims.size()) == rank, ValueError, "permute: ", dims_str(dims),
           " has ", dims.size(), " dims but the input ", a.describe(), " has ", rank);
  std::vector<int64_t> perm(rank), inverse(rank, -1);
  for (int64_t i = 0; i < rank; ++i) {
    perm[i] = wrap_dim(dims[i], rank, "permute");
    SG_CHECK(inverse[perm[i]] < 0, ValueError, "permute: dimension ", dims[i], " appears twice in ",
             dims_str(dims));
    inverse[perm[i]] = i;
  }
  return permuted_view(a, perm, inverse, "PermuteBackward");
}

Tensor transpose(const Tensor& a, int64_t dim0, int64_t dim1) {
  check_defined(a, "transpose", "the input");
  const int64_t rank = a.dim();
  const int64_t d0 = wrap_dim(dim0, rank, "transpose"), d1 = wrap_dim(dim1, rank, "transpose");
  std::vector<int64_t> perm(rank);
  for (int64_t i = 0; i < rank; ++i) perm[i] = i;
  if (rank > 0) std::swap(perm[d0], perm[d1]);
  // A transposition is its own inverse.
  return permuted_view(a, perm, perm, "TransposeBackward");
}

Tensor squeeze(const Tensor& a) {
  check_defined(a, "squeeze", "the input");
  Shape sizes, strides;
  std::vector<int64_t> dropped;
  for (int64_t i = 0; i < a.dim(); ++i) {
    if (a.sizes()[i] == 1) {
      dropped.push_back(i);
    } else {
      sizes.push_back(a.sizes()[i]);
      strides.push_back(a.strides()[i]);
    }
  }
  Tensor out = make_view(a, sizes, strides, a.storage_offset());
  mark_differentiable_view(out, a);
  if (any_requires_grad({a})) wire(std::make_shared<SqueezeBackward>(dropped), {a}, {out});
  return out;
}

Tensor squeeze(const Tensor& a, int64_t dim) {
  check_defined(a, "squeeze", "the input");
  const int64_t d = wrap_dim(dim, a.dim(), "squeeze");
  Shape sizes = a.sizes(), strides = a.strides();
  std::vector<int64_t> dropped;
  if (a.dim() > 0 && sizes[d] == 1) {  // other sizes: a no-op view, as in numpy/PyTorch
    sizes.erase(sizes.begin() + d);
    strides.erase(strides.begin() + d);
    dropped.push_back(d);
  }
  Tensor out = make_view(a, sizes, strides, a.storage_offset());
  mark_differentiable_view(out, a);
  if (any_requires_grad({a})) wire(std::make_shared<SqueezeBackward>(dropped), {a}, {out});
  return out;
}

Tensor unsqueeze(const Tensor& a, int64_t dim) {
  check_defined(a, "unsqueeze", "the input");
  const int64_t rank = a.dim();
  const int64_t d = wrap_dim(dim, rank + 1, "unsqueeze");
  Shape sizes = a.sizes(), strides = a.strides();
  const int64_t stride = d < rank ? sizes[d] * strides[d] : 1;
  sizes.insert(sizes.begin() + d, 1);
  strides.insert(strides.begin() + d, stride);
  Tensor out = make_view(a, sizes, strides, a.storage_offset());
  mark_differentiable_view(out, a);
  if (any_requires_grad({a})) wire(std::make_shared<UnsqueezeBackward>(d), {a}, {out});
  return out;
}

Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end, int64_t step) {
  check_defined(a, "slice", "the input");
  SG_CHECK(a.dim() > 0, ValueError, "slice: cannot slice a 0-dim tensor (", a.describe(), ")");
  SG_CHECK(step > 0, ValueError, "slice: step must be positive, got ", step);
  const int64_t d = wrap_dim(dim, a.dim(), "slice");
  const int64_t n = a.sizes()[d];
  // Python semantics: negative bounds count from the end, then clamp to [0, n].
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::min(std::max<int64_t>(start, 0), n);
  end = std::min(std::max<int64_t>(end, 0), n);
  SliceSpec s;
  s.dim = d;
  s.start = start;
  s.step = step;
  // Not (end - start + step - 1) / step: that overflows for steps near INT64_MAX.
  s.length = end > start ? (end - start - 1) / step + 1 : 0;
  return slice_impl(a, s, "SliceBackward");
}

Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length) {
  check_defined(a, "narrow", "the input");
  SG_CHECK(a.dim() > 0, ValueError, "narrow: cannot narrow a 0-dim tensor (", a.describe(), ")");
  const int64_t d = wrap_dim(dim, a.dim(), "narrow");
  const int64_t n = a.sizes()[d];
  SG_CHECK(start >= -n && start <= n, ValueError, "narrow: start ", start,
           " is out of range for dimension ", dim, " of size ", n, " in ", a.describe());
  if (start < 0) start += n;
  // length <= n - start rather than start + length <= n, which overflows for huge lengths.
  SG_CHECK(length >= 0 && length <= n - start, ValueError, "narrow: start (", start, ") + length (",
           length, ") exceeds dimension ", dim, " of size ", n, " in ", a.describe());
  SliceSpec s;
  s.dim = d;
  s.start = start;
  s.step = 1;
  s.length = length;
  return slice_impl(a, s, "NarrowBackward");
}

}  // namespace streamgrad
