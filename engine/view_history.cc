#include "engine/view_history.h"

#include <mutex>

#include "engine/node.h"

namespace streamgrad {

void mark_differentiable_view(const Tensor& view, const Tensor& input) {
  TensorImpl* v = view.impl();
  const TensorImpl* in = input.impl();
  v->view_of = in->view_of ? in->view_of : input.impl_ptr();
  v->view_version.store(v->version->load());
}

Tensor differentiable_base(const Tensor& t) {
  if (!t.defined() || t.impl()->view_of == nullptr) return Tensor();
  return Tensor(t.impl()->view_of);
}

void refresh_view_history(const Tensor& t) {
  TensorImpl* impl = t.impl();
  if (impl == nullptr || impl->view_of == nullptr) return;
  const uint32_t now = impl->version->load();
  if (impl->view_version.load(std::memory_order_acquire) == now) return;
  AutogradMeta& meta = t.autograd_meta();
  std::lock_guard<std::mutex> lk(meta.mu);
  if (impl->view_version.load(std::memory_order_acquire) == now) return;
  const Tensor base(impl->view_of);
  const Edge edge = gradient_edge(base);
  if (edge.valid()) {
    std::shared_ptr<Node> node = engine_ops().view_backward(t, base);
    node->set_next_edges({edge});
    set_history(t, node);
  }
  impl->view_version.store(now, std::memory_order_release);
}

}  // namespace streamgrad
