#include "ops/view_history.h"

#include <algorithm>

#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace ops_internal {
namespace {

// Where a tensor's elements sit in its storage.
struct Geometry {
  Shape sizes;
  Shape strides;
  int64_t offset = 0;

  static Geometry of(const Tensor& t) { return {t.sizes(), t.strides(), t.storage_offset()}; }
  bool empty() const { return numel_of(sizes) == 0; }
  int64_t lowest() const {
    int64_t o = offset;
    for (size_t i = 0; i < sizes.size(); ++i) o += std::min<int64_t>(0, (sizes[i] - 1) * strides[i]);
    return o;
  }
  int64_t highest() const {
    int64_t o = offset;
    for (size_t i = 0; i < sizes.size(); ++i) o += std::max<int64_t>(0, (sizes[i] - 1) * strides[i]);
    return o;
  }
  // This geometry as a kernel view into `buffer`, whose element 0 sits at storage offset `lo`.
  kernels::View in(const Tensor& buffer, int64_t lo) const {
    char* p = static_cast<char*>(buffer.data_ptr()) + (offset - lo) * element_size(buffer.dtype());
    return kernels::View{p, buffer.dtype(), sizes, strides};
  }
};

// A zeroed scratch buffer covering every storage element that `a` or `b` reaches, and the
// storage offset of its first element.
std::pair<Tensor, int64_t> scratch(const Geometry& a, const Geometry& b, const Tensor& like) {
  const int64_t lo = std::min(a.lowest(), b.lowest());
  const int64_t hi = std::max(a.highest(), b.highest());
  Tensor buf = zeros({hi - lo + 1}, TensorOptions().dtype(like.dtype()).device(like.device()));
  return {buf, lo};
}

Tensor restride(const Tensor& src, const Geometry& from, const Geometry& to);
Tensor scatter_into(const Tensor& g, const Tensor& src, const Geometry& base, const Geometry& view);

// restride is linear and, with both geometries free of overlap, its adjoint is itself
// with the geometries swapped.
struct RestrideBackward final : Node {
  RestrideBackward(Geometry f, Geometry t) : from(std::move(f)), to(std::move(t)) {}
  std::string name() const override { return "AsStridedBackward"; }
  TensorList apply(TensorList&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {restride(grads[0], to, from)};
  }
  Geometry from, to;
};

// The elements of `src`, laid out in storage as `from` says, read back as `to` says;
// places `to` reaches and `from` does not read as zero. A fresh contiguous tensor.
Tensor restride(const Tensor& src, const Geometry& from, const Geometry& to) {
  Tensor out = new_output(to.sizes, src.dtype(), src.device());
  if (!to.empty()) {
    auto [buf, lo] = scratch(from, to, src);
    const Stream s = stream_of(src);
    if (!from.empty()) kernels::copy(s, from.in(buf, lo), src.view());
    kernels::copy(s, out.view(), to.in(buf, lo));
  }
  if (any_requires_grad({src})) wire(std::make_shared<RestrideBackward>(from, to), {src}, {out});
  return out;
}

struct ScatterIntoBackward final : Node {
  ScatterIntoBackward(Geometry b, Geometry v) : base(std::move(b)), view(std::move(v)) {}
  std::string name() const override { return "CopySlicesBackward"; }
  TensorList apply(TensorList&& grads) override {
    const Tensor& g = grads[0];
    TensorList out(2);
    if (!g.defined()) return out;
    if (needs_grad(*this, 0)) out[0] = scatter_into(g, Tensor(), base, view);
    if (needs_grad(*this, 1)) out[1] = restride(g, base, view);
    return out;
  }
  Geometry base, view;
};

// `g` (laid out as `base`) with the part that `view` covers replaced by `src` (zeros when
// src is undefined). A fresh contiguous tensor of base's shape.
Tensor scatter_into(const Tensor& g, const Tensor& src, const Geometry& base,
                    const Geometry& view) {
  Tensor out = new_output(base.sizes, g.dtype(), g.device());
  if (!base.empty()) {
    auto [buf, lo] = scratch(base, view, g);
    const Stream s = stream_of(g);
    kernels::copy(s, base.in(buf, lo), g.view());
    if (!view.empty()) {
      const kernels::View part = view.in(buf, lo);
      if (src.defined()) {
        kernels::copy(s, part, src.view());
      } else {
        kernels::fill(s, part, 0);
      }
    }
    kernels::copy(s, out.view(), base.in(buf, lo));
  }
  if (any_requires_grad({g, src})) {
    wire(std::make_shared<ScatterIntoBackward>(base, view), {g, src}, {out});
  }
  return out;
}

// A view's gradient placed into zeros of its base's shape. Dims the view repeats (stride
// 0, from expand) are summed first: each of their elements is the same base element.
struct AsStridedBackward final : Node {
  AsStridedBackward(Geometry b, Geometry v) : base(std::move(b)), view(std::move(v)) {}
  std::string name() const override { return "AsStridedBackward"; }
  TensorList apply(TensorList&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    Tensor g = grads[0];
    Geometry v = view;
    std::vector<int64_t> repeated;
    for (size_t i = 0; i < v.sizes.size(); ++i) {
      if (v.strides[i] == 0 && v.sizes[i] > 1) repeated.push_back(static_cast<int64_t>(i));
    }
    if (!repeated.empty()) {
      g = sum(g, repeated, /*keepdim=*/true);
      for (int64_t d : repeated) v.sizes[d] = 1;
    }
    return {restride(g, v, base)};
  }
  Geometry base, view;
};

// The base's gradient from its new history: the in-place op's node sees the view's part
// and its result for the view goes back into that part; the rest passes unchanged.
struct CopySlices final : Node {
  CopySlices(Geometry b, Geometry v, std::shared_ptr<Node> f)
      : base(std::move(b)), view(std::move(v)), fn(std::move(f)) {}
  std::string name() const override { return "CopySlices"; }
  TensorList apply(TensorList&& grads) override {
    TensorList out(num_outputs());
    const Tensor& g = grads[0];
    if (!g.defined()) return out;
    TensorList res;
    {
      std::lock_guard<std::mutex> lk(fn->mutex());
      res = fn->apply({restride(g, base, view)});
    }
    if (needs_grad(*this, 0)) out[0] = scatter_into(g, res.empty() ? Tensor() : res[0], base, view);
    for (size_t i = 1; i < out.size() && i < res.size(); ++i) out[i] = std::move(res[i]);
    return out;
  }
  void release_variables() override { fn->release_variables(); }
  Geometry base, view;
  std::shared_ptr<Node> fn;
};

}  // namespace

std::shared_ptr<Node> view_backward(const Tensor& view, const Tensor& base) {
  return std::make_shared<AsStridedBackward>(Geometry::of(base), Geometry::of(view));
}

void record_on_base(const Tensor& base, const Tensor& view, const std::shared_ptr<Node>& fn) {
  auto node = std::make_shared<CopySlices>(Geometry::of(base), Geometry::of(view), fn);
  std::vector<Edge> edges = fn->next_edges();
  edges[0] = gradient_edge(base);
  node->set_next_edges(std::move(edges));
  if (!view.device().is_cpu()) node->set_stream(stream_of(view));
  set_history(base, node);
  // The view replays from the base's new history now: a history read between the write
  // and this call (the op's own requires_grad check) may already have replayed it from
  // the old one.
  auto replay = view_backward(view, base);
  replay->set_next_edges({Edge{node, 0}});
  set_history(view, replay);
  view.impl()->view_version.store(view.version(), std::memory_order_release);
}

}  // namespace ops_internal
}  // namespace streamgrad
