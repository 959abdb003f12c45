// gather, scatter_add and scatter along a dim: gather and scatter_add are each other's
// backward, scatter's backward is a scatter and a gather, so all are differentiable to
// any order. They carry nll_loss's pick of the target class and max
// pooling's routing of gradients back to the arg-max positions.
#include "ops/autocast_policy.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT

struct GatherBackward final : Node {
  std::string name() const override { return "GatherBackward"; }
  TensorList apply(TensorList&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    const Tensor zero = zeros(input.sizes, TensorOptions().dtype(grads[0].dtype()).device(grads[0].device()));
    return {scatter_add(zero, dim, index.unpack("GatherBackward"), grads[0])};
  }
  void release_variables() override { index.reset(); }
  SavedTensor index;
  InputInfo input;
  int64_t dim = 0;
};

struct ScatterAddBackward final : Node {
  std::string name() const override { return "ScatterAddBackward"; }
  TensorList apply(TensorList&& grads) override {
    const Tensor& g = grads[0];
    if (!g.defined()) return {Tensor(), Tensor()};
    TensorList out(2);
    if (needs_grad(*this, 0)) out[0] = g;
    if (needs_grad(*this, 1)) out[1] = gather(g, dim, index.unpack("ScatterAddBackward"));
    return out;
  }
  void release_variables() override { index.reset(); }
  SavedTensor index;
  int64_t dim = 0;
};

// scatter's: self's gradient is g with the scattered positions zeroed, src's g gathered
// there (the reference's formulas; with duplicate indices src's gradient reaches every
// duplicate, not only the one whose value was kept, as in the reference).
struct ScatterBackward final : Node {
  std::string name() const override { return "ScatterBackward"; }
  TensorList apply(TensorList&& grads) override {
    const Tensor& g = grads[0];
    if (!g.defined()) return {Tensor(), Tensor()};
    const Tensor idx = index.unpack("ScatterBackward");
    TensorList out(2);
    if (needs_grad(*this, 0)) out[0] = scatter(g, dim, idx, 0.0);
    if (needs_grad(*this, 1)) out[1] = gather(g, dim, idx);
    return out;
  }
  void release_variables() override { index.reset(); }
  SavedTensor index;
  int64_t dim = 0;
};

}  // namespace

Tensor gather(const Tensor& input, int64_t dim, const Tensor& index) {
  const int64_t d = check_indexed("gather", input, dim, index, nullptr);
  Tensor out = new_output(index.sizes(), input.dtype(), input.device());
  kernels::gather(stream_of(out), out.view(), input.view(), d, index.view());
  if (any_requires_grad({input})) {
    auto node = std::make_shared<GatherBackward>();
    node->index = SavedTensor(index);
    node->input = meta_of(input);
    node->dim = d;
    wire(node, {input}, {out});
  }
  return out;
}

Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  SG_AUTOCAST(kPromote, scatter_add, self, dim, index, src);
  const int64_t d = check_indexed("scatter_add", self, dim, index, &src);
  check_floating(self, "scatter_add");
  if (src.sizes() != index.sizes()) {
    return scatter_add(self, dim, index, covered(src, index.sizes()));
  }
  Tensor out = new_output(self.sizes(), self.dtype(), self.device());
  const Stream s = stream_of(out);
  kernels::copy(s, out.view(), self.view());
  kernels::scatter_add(s, out.view(), d, index.view(), src.view());
  if (any_requires_grad({self, src})) {
    auto node = std::make_shared<ScatterAddBackward>();
    node->index = SavedTensor(index);
    node->dim = d;
    wire(node, {self, src}, {out});
  }
  return out;
}

Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  SG_AUTOCAST(kPromote, scatter, self, dim, index, src);
  const int64_t d = check_indexed("scatter", self, dim, index, &src);
  check_floating(self, "scatter");
  if (src.sizes() != index.sizes()) return scatter(self, dim, index, covered(src, index.sizes()));
  Tensor out = new_output(self.sizes(), self.dtype(), self.device());
  const Stream s = stream_of(out);
  kernels::copy(s, out.view(), self.view());
  kernels::scatter(s, out.view(), d, index.view(), src.view());
  if (any_requires_grad({self, src})) {
    auto node = std::make_shared<ScatterBackward>();
    node->index = SavedTensor(index);
    node->dim = d;
    wire(node, {self, src}, {out});
  }
  return out;
}

Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, double value) {
  check_defined(self, "scatter", "the input");
  check_defined(index, "scatter", "index");
  const Tensor src =
      full(index.sizes(), value, TensorOptions().dtype(self.dtype()).device(self.device()));
  return scatter(self, dim, index, src);
}

}  // namespace streamgrad
