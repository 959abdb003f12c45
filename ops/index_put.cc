// index_put_ / index_put, as the reference's Tensor.index_put_: advanced indexing of
// self's leading dims by int64 index tensors (broadcast together) and bool masks (each
// standing for its nonzero() coordinates), written with values or added to.
//
// One kernel does the write: the index tensors are flattened on the device into one int64
// position per indexed element (kernels::index_linear, after kernels::check_index_range
// has checked every index against its dim), and self, seen as [N, rest...] with its
// leading dims merged, is written with index_copy (assign) or index_add (accumulate)
// along dim 0. A self whose leading dims do not merge is written through a contiguous
// copy.
//
// Backward, with the flattened positions saved: self's gradient is g (accumulate) or g
// with the written positions zeroed (index_put of a zero, itself differentiable the same
// way); values' gradient is g read at the positions (index_select, whose backward is
// index_add) summed to values' shape. Both are ops with history: any order.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ops/op_utils.h"
#include "ops/ops.h"
#include "ops/view_history.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT

std::string describe_shape(const Shape& s) { return "[" + absl::StrJoin(s, ", ") + "]"; }

// The indices as int64 tensors, one per leading dim of self: a bool mask over dims
// d..d+m-1 becomes the m coordinate tensors of its set elements (read on the host: the
// number of set elements decides the shapes, so a mask on sim or cuda waits for its
// stream, as the reference's nonzero does).
std::vector<Tensor> int64_indices(const Tensor& self, const std::vector<Tensor>& indices,
                                  const char* op) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < indices.size(); ++i) {
    const Tensor& t = indices[i];
    SG_CHECK(t.defined(), ValueError, op, ": index ", i, " is undefined; pass an int64 or bool "
             "tensor for every leading dim indexed");
    check_same_device(self, t, op);
    const int64_t d = static_cast<int64_t>(out.size());
    if (t.dtype() == DType::kInt64) {
      out.push_back(t);
      continue;
    }
    SG_CHECK(t.dtype() == DType::kBool, ValueError, op, ": index ", i, " ", t.describe(),
             " must be int64 (positions) or bool (a mask)");
    SG_CHECK(t.dim() > 0, ValueError, op, ": index ", i, " is a 0-dim bool mask, which is not "
             "supported; use masked_fill_ or a mask of self's leading dims");
    bool fits = d + t.dim() <= self.dim();
    for (int64_t j = 0; fits && j < t.dim(); ++j) fits = t.size(j) == self.size(d + j);
    SG_CHECK(fits, IndexError, op, ": the bool mask ", t.describe(), " (index ", i,
             ") must have the sizes of dims ", d, "..", d + t.dim() - 1, " of self ",
             self.describe());
    const std::vector<int64_t> bits = to(to(t, DType::kInt64), Device("cpu")).to_vector<int64_t>();
    std::vector<std::vector<int64_t>> coords(t.dim());
    for (int64_t e = 0; e < static_cast<int64_t>(bits.size()); ++e) {
      if (bits[e] == 0) continue;
      int64_t rest = e;
      for (int64_t j = t.dim() - 1; j >= 0; --j) {
        coords[j].push_back(rest % t.size(j));
        rest /= t.size(j);
      }
    }
    const TensorOptions o = TensorOptions().dtype(DType::kInt64).device(self.device());
    for (const std::vector<int64_t>& c : coords) {
      out.push_back(from_vector<int64_t>(c, {static_cast<int64_t>(c.size())}, o));
    }
  }
  return out;
}

// self's leading `k` dims merged into one of `n` positions, or false when their strides
// do not allow it.
bool merged_view(const Tensor& self, int64_t k, int64_t n, kernels::View* v) {
  *v = self.view();
  for (int64_t i = 0; i + 1 < k; ++i) {
    if (self.size(i) != 1 && self.strides()[i] != self.strides()[i + 1] * self.size(i + 1)) {
      return false;
    }
  }
  v->sizes.assign(1, n);
  v->strides.assign(1, self.strides()[k - 1]);
  v->sizes.insert(v->sizes.end(), self.sizes().begin() + k, self.sizes().end());
  v->strides.insert(v->strides.end(), self.strides().begin() + k, self.strides().end());
  return true;
}

struct IndexPutBackward final : Node {
  std::string name() const override { return "IndexPutBackward"; }
  TensorList apply(TensorList&& grads) override {
    const Tensor& g = grads[0];
    TensorList out(2);
    if (!g.defined()) return out;
    const Tensor pos = linear.unpack("IndexPutBackward");
    Shape flat{n};
    flat.insert(flat.end(), g.sizes().begin() + k, g.sizes().end());
    const Tensor g_flat = reshape(g, flat);
    if (needs_grad(*this, 0)) {
      if (accumulate) {
        out[0] = g;
      } else {
        const Tensor zero = zeros({}, TensorOptions().dtype(g.dtype()).device(g.device()));
        out[0] = reshape(index_put(g_flat, {pos}, zero), g.sizes());
      }
    }
    if (needs_grad(*this, 1)) {
      Shape indexed = pos.sizes();
      indexed.insert(indexed.end(), g.sizes().begin() + k, g.sizes().end());
      const Tensor picked = index_select(g_flat, 0, reshape(pos, {pos.numel()}));
      out[1] = grad_for(reshape(picked, indexed), values_in);
    }
    return out;
  }
  void release_variables() override { linear.reset(); }
  SavedTensor linear;  // int64, the broadcast index shape: positions among self's first n
  int64_t k = 0, n = 0;
  bool accumulate = false;
  InputInfo values_in;
};

Tensor& index_put_impl(Tensor& self, const std::vector<Tensor>& indices, const Tensor& values,
                       bool accumulate, const char* op) {
  check_defined(self, op, "self");
  check_defined(values, op, "values");
  SG_CHECK(!indices.empty(), ValueError, op, ": needs at least one index tensor; to write "
           "every element use copy_ or fill_");
  check_floating(self, op);
  check_same_device(self, values, op);
  check_same_dtype(self, values, op);
  const std::vector<Tensor> idx = int64_indices(self, indices, op);
  const int64_t k = static_cast<int64_t>(idx.size());
  SG_CHECK(k <= self.dim(), IndexError, op, ": too many indices for self ", self.describe(),
           ": ", k, " index tensors (bool masks count one per dim) for ", self.dim(), " dims");
  Shape b = idx[0].sizes();
  for (int64_t i = 1; i < k; ++i) b = broadcast_shapes(b, idx[i].sizes(), op);
  Shape indexed = b;
  indexed.insert(indexed.end(), self.sizes().begin() + k, self.sizes().end());
  bool fits = values.dim() <= static_cast<int64_t>(indexed.size());
  for (int64_t j = 1; fits && j <= values.dim(); ++j) {
    const int64_t v = values.size(values.dim() - j);
    fits = v == 1 || v == indexed[indexed.size() - j];
  }
  SG_CHECK(fits, ValueError, op, ": values ", values.describe(),
           " cannot be broadcast to the indexed shape ", describe_shape(indexed),
           " (the indices' broadcast shape ", describe_shape(b), ", then self's dims from ", k,
           ")");
  check_inplace(self, op);
  const Stream stream = stream_of(self);
  int64_t n = 1;
  for (int64_t i = 0; i < k; ++i) n *= self.size(i);
  for (int64_t i = 0; i < k; ++i) {
    const int64_t size = self.size(i);
    kernels::check_index_range(
        stream, idx[i].view(), -size, size,
        absl::StrCat(op, ": the index for dim ", i, " of self ", self.describe(),
                     " must lie in -", size, "..", size - 1, " (negative counts from the end)"));
  }
  // Positions among the n rows of self's merged leading dims.
  Tensor linear = new_output(b, DType::kInt64, self.device());
  int64_t stride = n;
  for (int64_t i = 0; i < k; ++i) {
    stride /= self.size(i);
    kernels::index_linear(stream, linear.view(), expand_view(idx[i], b), self.size(i), stride,
                          i > 0);
  }
  const bool record = any_requires_grad({self, values});
  std::vector<Edge> edges = record ? collect_next_edges({self, values}) : std::vector<Edge>{};
  const int64_t rows = numel_of(b);
  if (numel_of(indexed) > 0) {
    // values, broadcast and packed: read before self is written even if it views self.
    const Tensor src = new_output(indexed, self.dtype(), self.device());
    kernels::copy(stream, src.view(), expand_view(values, indexed));
    Shape src_flat{rows};
    src_flat.insert(src_flat.end(), self.sizes().begin() + k, self.sizes().end());
    const kernels::View src_view = contiguous_view_as(src, src_flat);
    const kernels::View pos_view = contiguous_view_as(linear, {rows});
    kernels::View target;
    Tensor staged;
    if (!merged_view(self, k, n, &target)) {
      staged = clone(self.detach());
      merged_view(staged, k, n, &target);
    }
    if (accumulate) {
      kernels::index_add(stream, target, 0, pos_view, src_view);
    } else {
      kernels::index_copy(stream, target, 0, pos_view, src_view);
    }
    if (staged.defined()) kernels::copy(stream, self.view(), staged.view());
  }
  self.bump_version();
  if (record) {
    auto node = std::make_shared<IndexPutBackward>();
    node->linear = SavedTensor(linear);
    node->k = k;
    node->n = n;
    node->accumulate = accumulate;
    node->values_in = meta_of(values);
    rebase_inplace(self, node, std::move(edges));
  }
  return self;
}

}  // namespace

Tensor& index_put_(Tensor& self, const std::vector<Tensor>& indices, const Tensor& values,
                   bool accumulate) {
  return index_put_impl(self, indices, values, accumulate, "index_put_");
}

Tensor index_put(const Tensor& self, const std::vector<Tensor>& indices, const Tensor& values,
                 bool accumulate) {
  check_defined(self, "index_put", "self");
  Tensor out = clone(self);
  return index_put_impl(out, indices, values, accumulate, "index_put");
}

}  // namespace streamgrad
