#include "engine/accumulate_grad.h"

#include <algorithm>
#include <vector>

#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "kernels/kernels.h"
#include "runtime/backend/stream.h"
#include "runtime/base/error.h"
#include "runtime/base/warning.h"

namespace streamgrad {

AccumulateGrad::AccumulateGrad(const Tensor& leaf) : variable_(leaf) {
  add_input_metadata(leaf);
  // S5: the stream of the leaf's first use in the graph (the accumulator is made then,
  // and again once the graphs holding it are gone), as in the reference framework; not
  // the stream the leaf was created or moved on, which is usually the default stream
  // while the forward that uses the leaf runs on a side stream.
  if (!leaf.device().is_cpu()) set_stream(current_stream(leaf.device()));
  // Ready accumulators run before any other ready node (the ready queue takes the highest
  // sequence number first), so that .grad and post-accumulate hooks (DDP's all-reduce
  // buckets) are ready as early as possible, as in the reference framework.
  set_sequence_nr(UINT64_MAX);
}

namespace {

// Whether `t` covers its elements exactly once with no gaps, in some order of its dims.
bool dense_non_overlapping(const Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size), size-1 dims aside
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.sizes()[d] != 1) dims.emplace_back(t.strides()[d], t.sizes()[d]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t expected = 1;
  for (const auto& [stride, size] : dims) {
    if (stride != expected) return false;
    expected *= size;
  }
  return true;
}

// The layout .grad must have (the reference framework's gradient layout contract): the
// leaf's strides when the leaf is dense, row-major otherwise.
bool has_grad_layout(const Tensor& g, const Tensor& leaf, bool leaf_dense) {
  if (leaf_dense && !leaf.is_contiguous()) return g.strides() == leaf.strides();
  return g.is_contiguous();
}

// A copy of `g` without history in the layout has_grad_layout asks for.
Tensor copy_in_grad_layout(const Tensor& g, const Tensor& leaf, bool leaf_dense) {
  if (!leaf_dense || leaf.is_contiguous()) return clone_detached(g);
  Tensor out = empty(g.sizes(), TensorOptions().dtype(g.dtype()).device(g.device()));
  out.impl()->strides = leaf.strides();  // a permutation of out's own: same storage size
  kernels::copy(current_stream(out.device()), out.view(), g.view());
  return out;
}

// Whether nothing but `g` can observe its memory: `g` is the only handle on its
// metadata and either owns its storage alone or is a view (transpose of a transposed
// product, a permute) whose base is held by nothing but `g`. Such a gradient may become
// .grad without a copy.
bool sole_owner_through_views(const Tensor& g) {
  const TensorImpl* t = g.impl();
  if (g.impl_ptr().use_count() != 1) return false;
  if (t->base == nullptr) return g.storage().use_count() == 1;
  const std::shared_ptr<TensorImpl>& base = t->base;
  const long holders = 1 + (t->view_of == base ? 1 : 0);
  return base->base == nullptr && base->view_of == nullptr && base.use_count() == holders &&
         g.storage().use_count() == 2;
}

}  // namespace

Tensor clone_detached(const Tensor& t) {
  Tensor out = empty(t.sizes(), TensorOptions().dtype(t.dtype()).device(t.device()));
  kernels::copy(current_stream(t.device()), out.view(), t.view());
  return out;
}

void AccumulateGrad::run_tensor_hooks(Tensor& g) const {
  AutogradMeta& meta = variable_.autograd_meta();
  for (const auto& [id, hook] : meta.hooks) {
    Tensor replaced = hook(g);
    if (replaced.defined() && g.defined()) {
      SG_CHECK(replaced.sizes() == g.sizes() && replaced.dtype() == g.dtype() &&
                   replaced.device() == g.device(),
               ValueError, "a hook on the gradient of leaf ", variable_.describe(),
               " returned ", replaced.describe(), "; it must match the gradient ",
               g.describe());
      g = std::move(replaced);
    } else if (replaced.defined()) {
      SG_CHECK(replaced.sizes() == variable_.sizes() && replaced.dtype() == variable_.dtype() &&
                   replaced.device() == variable_.device(),
               ValueError, "a hook on the gradient of leaf ", variable_.describe(),
               " returned ", replaced.describe(), " for an undefined gradient; it must match "
               "the leaf");
      g = std::move(replaced);
    }
  }
}

TensorList AccumulateGrad::apply(TensorList&& grads) {
  Tensor g = std::move(grads[0]);
  // Hooks see an undefined gradient too (a custom backward that returned none for this
  // leaf), as in the reference framework; .grad is then left as it is.
  run_tensor_hooks(g);
  AutogradMeta& meta = variable_.autograd_meta();
  if (!g.defined()) {
    for (const auto& hook : meta.post_accumulate_hooks) hook(variable_);
    return {};
  }
  const bool keep_history = grad_mode_enabled();  // create_graph
  {
    std::lock_guard<std::mutex> lk(meta.mu);
    if (keep_history && g.requires_grad()) {
      SG_WARN("backward() with create_graph=true wrote .grad of leaf ", variable_.describe(),
              " with history, which holds the leaf itself: a reference cycle (leaf -> .grad "
              "-> graph -> leaf) that keeps the graph alive. Prefer grad(outputs, inputs, "
              "..., create_graph=true); otherwise reset .grad (set_grad(Tensor())) after use");
    }
    if (!meta.grad.defined()) {
      if (keep_history) {
        meta.grad = g;
      } else {
        // Stolen only when it already has the layout .grad must have; a transposed or
        // strided gradient would make every later accumulation and optimiser step walk
        // .grad strided.
        const bool dense = dense_non_overlapping(variable_);
        const bool steal = sole_owner_through_views(g) && g.storage_offset() == 0 &&
                           has_grad_layout(g, variable_, dense);
        meta.grad = steal ? g.detach() : copy_in_grad_layout(g, variable_, dense);
      }
    } else if (keep_history || meta.grad.requires_grad()) {
      meta.grad = engine_add()(meta.grad, g);
    } else {
      accumulate_into(meta.grad, g, current_stream(meta.grad.device()));
    }
  }
  for (const auto& hook : meta.post_accumulate_hooks) hook(variable_);
  return {};
}

std::shared_ptr<Node> grad_accumulator(const Tensor& leaf) {
  AutogradMeta& meta = leaf.autograd_meta();
  std::lock_guard<std::mutex> lk(meta.mu);
  std::shared_ptr<Node> node = meta.grad_accumulator.lock();
  if (!node) {
    node = std::make_shared<AccumulateGrad>(leaf);
    meta.grad_accumulator = node;
  }
  return node;
}

}  // namespace streamgrad
