#include "engine/tensor.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/accumulate_grad.h"
#include "engine/backward.h"
#include "engine/factories.h"
#include "engine/node.h"
#include "engine/view_history.h"
#include "runtime/backend/devices.h"
#include "runtime/base/error.h"
#include "runtime/base/warning.h"

namespace streamgrad {

void Tensor::throw_undefined() {
  throw Error(
      "the tensor is undefined (default-constructed, or a gradient that was never "
      "computed); check defined() first");
}

const Shape& Tensor::sizes() const { return checked().sizes; }
const Shape& Tensor::strides() const { return checked().strides; }
int64_t Tensor::dim() const { return static_cast<int64_t>(checked().sizes.size()); }
int64_t Tensor::size(int64_t d) const {
  const int64_t n = dim();
  SG_CHECK(d >= -n && d < n, ValueError, "size(", d, "): dimension out of range for ",
           describe(), " (expected in [", -n, ", ", n, "))");
  return checked().sizes[d < 0 ? d + n : d];
}
int64_t Tensor::numel() const { return numel_of(checked().sizes); }
DType Tensor::dtype() const { return checked().dtype; }
Device Tensor::device() const { return checked().stream.device(); }
Stream Tensor::stream() const { return checked().stream; }
int64_t Tensor::storage_offset() const { return checked().offset; }
bool Tensor::is_contiguous() const { return view().is_contiguous(); }
const Storage& Tensor::storage() const { return checked().storage; }
void* Tensor::data_ptr() const {
  const TensorImpl& t = checked();
  if (!t.storage.defined() || t.storage.nbytes() == 0) return nullptr;
  return static_cast<char*>(t.storage.data()) + t.offset * element_size(t.dtype);
}

kernels::View Tensor::view() const {
  const TensorImpl& t = checked();
  return kernels::View{data_ptr(), t.dtype, t.sizes, t.strides};
}

void Tensor::record_stream(const Stream& stream) const {
  const Device memory = device();
  const Device user = resolve_device(stream.device(), "record_stream");
  SG_CHECK(user == memory, DeviceError, "record_stream: the tensor ", describe(),
           " cannot be recorded on stream ", stream.str(), " of another device; copy it with ",
           "to(", user.str(), ") first");
  checked().storage.record_stream(stream);
}

std::string Tensor::describe() const {
  if (!defined()) return "undefined tensor";
  return absl::StrCat(dtype_name(dtype()), "[", absl::StrJoin(sizes(), ", "), "] on ",
                      device().str());
}

AutogradMeta& Tensor::autograd_meta() const {
  TensorImpl& t = const_cast<TensorImpl&>(checked());
  if (!t.autograd) t.autograd = std::make_unique<AutogradMeta>();
  return *t.autograd;
}

AutogradMeta* Tensor::autograd_meta_if_any() const { return checked().autograd.get(); }

bool Tensor::requires_grad() const {
  refresh_view_history(*this);
  const AutogradMeta* m = autograd_meta_if_any();
  return m != nullptr && (m->requires_grad || m->grad_fn != nullptr);
}

Tensor& Tensor::requires_grad_(bool requires_grad) {
  SG_CHECK(!requires_grad || is_floating(dtype()), ValueError,
           "requires_grad_: only floating tensors can require gradients, but this tensor is ",
           describe(), "; convert it with to(DType::kFloat32) first");
  AutogradMeta& m = autograd_meta();
  SG_CHECK(requires_grad || m.grad_fn == nullptr, ValueError,
           "requires_grad_(false) on a non-leaf tensor (", describe(),
           "); use detach() to get a tensor without history");
  m.requires_grad = requires_grad;
  return *this;
}

Tensor Tensor::grad() const {
  AutogradMeta* m = autograd_meta_if_any();
  if (m == nullptr) return Tensor();
  Tensor g;
  {
    std::lock_guard<std::mutex> lk(m->mu);
    g = m->grad;
  }
  // As the reference warns: backward() fills .grad of leaves only, so an empty .grad on a
  // tensor an op produced is almost always a read of the wrong tensor or a missing
  // retain_grad(). Once a non-leaf's .grad holds a tensor (set_grad; backward's inputs=)
  // reading it does not warn.
  const std::shared_ptr<Node> fn = m->grad_fn;
  if (!g.defined() && fn != nullptr && !m->retains_grad) {
    SG_WARN("grad(): reading .grad of ", describe(), ", which is not a leaf (", fn->name(),
            " produced it) and does not retain its gradient, so backward() leaves it undefined; "
            "call retain_grad() on it before backward() to keep its gradient, or read .grad() "
            "of the leaf tensor you meant");
  }
  return g;
}

void Tensor::set_grad(const Tensor& grad) const {
  // The tensor would own itself through its own .grad: a reference cycle that never dies.
  SG_CHECK(!grad.is_same(*this), ValueError, "set_grad: a tensor cannot be its own gradient (",
           describe(), "); pass a copy such as clone(t) or t.detach()");
  if (grad.defined()) {
    SG_CHECK(grad.sizes() == sizes() && grad.dtype() == dtype() && grad.device() == device(),
             ValueError, "set_grad: the gradient is ", grad.describe(), " but the tensor is ",
             describe(), "; they must match in shape, dtype and device");
  }
  AutogradMeta& m = autograd_meta();
  std::lock_guard<std::mutex> lk(m.mu);
  m.grad = grad;
}

void Tensor::set_data(const Tensor& data) const {
  SG_CHECK(defined() && data.defined(), ValueError, "set_data: both tensors must be defined");
  SG_CHECK(is_leaf(), ValueError, "set_data: ", describe(),
           " has a grad_fn; only leaves can have their data replaced");
  SG_CHECK(!is_same(data), ValueError, "set_data: a tensor cannot take its own data");
  SG_CHECK(!requires_grad() || is_floating(data.dtype()), ValueError, "set_data: ", describe(),
           " requires grad, so its new data ", data.describe(), " must be floating");
  TensorImpl* to = impl();
  const TensorImpl* from = data.impl();
  to->storage = from->storage;
  to->offset = from->offset;
  to->sizes = from->sizes;
  to->strides = from->strides;
  to->dtype = from->dtype;
  to->stream = from->stream;
  to->base = from->base;
  to->view_of = nullptr;  // a leaf: no view history to follow
  // Saved copies of the old data are stale now: their version check reports it.
  to->version->fetch_add(1);
  if (AutogradMeta* m = autograd_meta_if_any()) {
    std::lock_guard<std::mutex> lk(m->mu);
    if (m->grad.defined() && (m->grad.sizes() != sizes() || m->grad.dtype() != dtype() ||
                              m->grad.device() != device())) {
      m->grad = Tensor();
    }
  }
}

std::shared_ptr<Node> Tensor::grad_fn() const {
  refresh_view_history(*this);
  const AutogradMeta* m = autograd_meta_if_any();
  return m == nullptr ? nullptr : m->grad_fn;
}

uint32_t Tensor::output_nr() const {
  refresh_view_history(*this);
  const AutogradMeta* m = autograd_meta_if_any();
  return m == nullptr ? 0 : m->output_nr;
}

bool Tensor::is_leaf() const { return grad_fn() == nullptr; }

namespace {
// The hook behind retain_grad(): it holds the tensor weakly (the tensor owns its grad_fn,
// which owns the hook) and keeps the gradient without history.
TensorHook retain_grad_hook(std::weak_ptr<TensorImpl> weak) {
  return [weak](const Tensor& g) {
    if (!g.defined()) return Tensor();
    if (auto impl = weak.lock()) {
      Tensor self(impl);
      AutogradMeta& meta = self.autograd_meta();
      std::lock_guard<std::mutex> lk(meta.mu);
      meta.grad = meta.grad.defined() ? engine_add()(meta.grad, g).detach() : g.detach();
    }
    return Tensor();
  };
}
}  // namespace

void Tensor::retain_grad() const {
  SG_CHECK(requires_grad(), ValueError, "retain_grad() on a tensor that does not require grad (",
           describe(), ")");
  if (is_leaf()) return;  // leaves keep .grad anyway
  AutogradMeta& m = autograd_meta();
  if (m.retains_grad) return;  // once: a second call must not add a second hook
  m.retains_grad = true;
  m.retains_grad_hook_id = m.next_hook_id++;
  m.grad_fn->add_pre_hook(m.output_nr, m.retains_grad_hook_id, retain_grad_hook(impl_), true);
}

bool Tensor::retains_grad() const {
  const AutogradMeta* m = autograd_meta_if_any();
  return m != nullptr && m->retains_grad;
}

int Tensor::register_hook(TensorHook hook) const {
  SG_CHECK(requires_grad(), ValueError,
           "register_hook on a tensor that does not require grad (", describe(), ")");
  AutogradMeta& m = autograd_meta();
  const int id = m.next_hook_id++;
  if (m.grad_fn != nullptr) {
    m.grad_fn->add_pre_hook(m.output_nr, id, std::move(hook));
  } else {
    m.hooks.emplace_back(id, std::move(hook));
  }
  return id;
}

void Tensor::remove_hook(int id) const {
  AutogradMeta& m = autograd_meta();
  if (m.grad_fn != nullptr) {
    m.grad_fn->remove_pre_hook(m.output_nr, id);
    return;
  }
  for (auto it = m.hooks.begin(); it != m.hooks.end(); ++it) {
    if (it->first == id) {
      m.hooks.erase(it);
      return;
    }
  }
}

void Tensor::register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const {
  SG_CHECK(is_leaf() && requires_grad(), ValueError,
           "register_post_accumulate_grad_hook needs a leaf that requires grad, got ",
           describe());
  autograd_meta().post_accumulate_hooks.push_back(std::move(hook));
}

uint32_t Tensor::version() const { return checked().version->load(); }
void Tensor::bump_version() const { checked().version->fetch_add(1); }

const std::string& Tensor::name() const {
  static const std::string kEmpty;
  const AutogradMeta* m = autograd_meta_if_any();
  return m == nullptr ? kEmpty : m->name;
}

Tensor& Tensor::set_name(std::string name) {
  autograd_meta().name = std::move(name);
  return *this;
}

Tensor Tensor::detach() const {
  const TensorImpl& t = checked();
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage;
  impl->offset = t.offset;
  impl->sizes = t.sizes;
  impl->strides = t.strides;
  impl->dtype = t.dtype;
  impl->stream = t.stream;
  impl->version = t.version;  // in-place changes stay visible to saved-tensor checks
  // No base: in-place ops on a detached tensor are allowed (as in libtorch); the shared
  // version counter still reports a saved tensor modified through it.
  impl->base = nullptr;
  return Tensor(std::move(impl));
}

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph,
                      const std::vector<Tensor>& inputs) const {
  streamgrad::backward({*this}, {gradient}, retain_graph, create_graph, inputs);
}

void Tensor::set_history(std::shared_ptr<Node> grad_fn, uint32_t output_nr) const {
  AutogradMeta& m = autograd_meta();
  if (m.retains_grad && m.grad_fn != nullptr && grad_fn != nullptr) {
    // An in-place op gave this tensor a new grad_fn: .grad must keep following the tensor
    // (the reference framework moves the retains_grad hook; other hooks stay with the old
    // value's node).
    m.grad_fn->remove_pre_hook(m.output_nr, m.retains_grad_hook_id);
    grad_fn->add_pre_hook(output_nr, m.retains_grad_hook_id, retain_grad_hook(impl_), true);
  }
  m.grad_fn = std::move(grad_fn);
  m.output_nr = output_nr;
}

}  // namespace streamgrad
