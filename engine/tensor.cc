#include "engine/tensor.h"

#include <cstring>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/accumulate_grad.h"
#include "engine/backward.h"
#include "engine/factories.h"
#include "engine/node.h"
#include "engine/view_history.h"
#include "kernels/kernels.h"
#include "runtime/copy.h"
#include "runtime/devices.h"
#include "runtime/error.h"
#include "runtime/warning.h"

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

std::string Tensor::describe() const {
  if (!defined()) return "undefined tensor";
  return absl::StrCat(dtype_name(dtype()), "[", absl::StrJoin(sizes(), ", "), "] on ",
                      device().str());
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  SG_CHECK(DTypeOf<T>::value == dtype(), ValueError, "to_vector<", dtype_name(DTypeOf<T>::value),
           ">: the tensor is ", describe(), "; convert it with to(dtype) first");
  const int64_t n = numel();
  Tensor src = *this;
  if (!is_contiguous()) {
    // Gather on the device, ordered on its current stream, then copy the dense result.
    src = empty(sizes(), TensorOptions().dtype(dtype()).device(device()));
    kernels::copy(current_stream(device()), src.view(), view());
  }
  // std::vector<bool> has no data(): go through bytes.
  std::vector<unsigned char> bytes(static_cast<size_t>(n) * sizeof(T));
  copy_bytes(bytes.data(), Device("cpu"), src.data_ptr(), device(), bytes.size());
  std::vector<T> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    out[i] = v;
  }
  return out;
}

template <typename T>
T Tensor::item() const {
  SG_CHECK(numel() == 1, ValueError, "item(): the tensor ", describe(),
           " has ", numel(), " elements; item() needs exactly one");
  return to_vector<T>()[0];
}

template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;
template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template int64_t Tensor::item<int64_t>() const;
template bool Tensor::item<bool>() const;
template std::vector<Half> Tensor::to_vector<Half>() const;
template std::vector<BFloat16> Tensor::to_vector<BFloat16>() const;
template Half Tensor::item<Half>() const;
template BFloat16 Tensor::item<BFloat16>() const;

namespace {
// 16-bit values print as the float32 values they hold.
template <typename T>
T printable(T v) {
  return v;
}
float printable(Half v) { return v.to_float(); }
float printable(BFloat16 v) { return v.to_float(); }

template <typename T>
std::string format_values(const Tensor& t) {
  const std::vector<T> v = t.to_vector<T>();
  const Shape& sizes = t.sizes();
  std::ostringstream os;
  if (sizes.empty()) {
    os << printable(v[0]);
    return os.str();
  }
  // Row-major nesting with brackets; long tensors are elided in the middle of each row.
  std::vector<int64_t> index(sizes.size(), 0);
  const int64_t n = static_cast<int64_t>(v.size());
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i;
    for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
      index[d] = rem % sizes[d];
      rem /= sizes[d];
    }
    size_t opening = 0;
    for (size_t d = sizes.size(); d-- > 0 && index[d] == 0;) ++opening;
    if (i > 0) os << (opening > 0 ? ",\n " : ", ");
    os << std::string(opening, '[');
    os << printable(v[i]);
    size_t closing = 0;
    for (size_t d = sizes.size(); d-- > 0 && index[d] == sizes[d] - 1;) ++closing;
    os << std::string(closing, ']');
    if (i == 200 && n > 220) {
      os << ", ... (" << n - 201 << " more)";
      break;
    }
  }
  if (n == 0) os << "[]";
  return os.str();
}
}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  std::string values;
  switch (dtype()) {
    case DType::kFloat32:
      values = format_values<float>(*this);
      break;
    case DType::kFloat64:
      values = format_values<double>(*this);
      break;
    case DType::kInt64:
      values = format_values<int64_t>(*this);
      break;
    case DType::kBool:
      values = format_values<bool>(*this);
      break;
    case DType::kFloat16:
      values = format_values<Half>(*this);
      break;
    case DType::kBFloat16:
      values = format_values<BFloat16>(*this);
      break;
  }
  std::string extra;
  if (grad_fn()) {
    extra = absl::StrCat(", grad_fn=", grad_fn()->name());
  } else if (requires_grad()) {
    extra = ", requires_grad";
  }
  return absl::StrCat("tensor(", values, ", ", describe(), extra, ")");
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
