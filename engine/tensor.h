// Tensor: a handle to a strided view of a Storage, with dtype, device, a version counter
// and autograd metadata.
//
//   Tensor x = randn({3, 4}, {.device = "sim:0"}).requires_grad_();
//   Tensor y = sum(mul(x, x));      // ops/ops.h
//   y.backward();
//   std::vector<float> g = x.grad().to_vector<float>();
//
// Copying a Tensor copies the handle: both refer to the same data and autograd state
// (like libtorch). Views (reshape, transpose, slice...) share storage and the version
// counter with their base. The stream a tensor was produced on (its stamp, S1) is
// recorded at creation. Differentiable operations are free functions in ops/; this class
// holds what every layer needs.
//
// Thread-safety: a Tensor may be read from several threads; mutating the same tensor
// (requires_grad_, set_grad, hooks, in-place ops) from several threads needs external
// synchronisation, except .grad accumulation by the engine, which is locked.
// Failure: accessors on an undefined tensor throw Error; bad arguments throw ValueError /
// DeviceError naming the shapes, dtypes and devices involved.
#ifndef STREAMGRAD_ENGINE_TENSOR_H_
#define STREAMGRAD_ENGINE_TENSOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/half.h"
#include "kernels/view.h"
#include "runtime/device.h"
#include "runtime/dtype.h"
#include "runtime/storage.h"
#include "runtime/stream.h"

namespace streamgrad {

class Node;
class Tensor;
struct AutogradMeta;

using Shape = std::vector<int64_t>;
using TensorHook = std::function<Tensor(const Tensor&)>;

// The data part of a tensor. Created by factories and ops; users hold Tensors.
struct TensorImpl {
  Storage storage;
  int64_t offset = 0;  // in elements
  Shape sizes;
  Shape strides;  // in elements
  DType dtype = DType::kFloat32;
  Stream stream = Stream::default_for(Device("cpu"));  // S1: where it was produced
  std::shared_ptr<std::atomic<uint32_t>> version;  // shared with views
  // A view's base tensor (for in-place checks); null for tensors that own their data.
  std::shared_ptr<TensorImpl> base;
  // Differentiable views (the results of the view ops of ops/ops.h): the tensor whose
  // gradient this view's gradient flows into, and the version its grad_fn was made at.
  // See Note [Views and in-place operations] in engine/view_history.h.
  std::shared_ptr<TensorImpl> view_of;
  std::atomic<uint32_t> view_version{0};
  std::unique_ptr<AutogradMeta> autograd;  // created on first autograd use
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

  // Shape and placement.
  const Shape& sizes() const;
  const Shape& strides() const;
  int64_t size(int64_t dim) const;  // negative dims count from the end
  int64_t dim() const;
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  Stream stream() const;
  int64_t storage_offset() const;
  bool is_contiguous() const;
  const Storage& storage() const;
  void* data_ptr() const;
  kernels::View view() const;
  // "float32[2, 3] on sim:0"
  std::string describe() const;

  // Host access: blocking reads ordered on the current stream of the tensor's device.
  template <typename T>
  std::vector<T> to_vector() const;
  template <typename T>
  T item() const;
  std::string str() const;  // readable printing of values

  // Autograd.
  bool requires_grad() const;
  // Only floating tensors can require grad; non-leaf tensors cannot be switched off.
  Tensor& requires_grad_(bool requires_grad = true);
  Tensor grad() const;
  void set_grad(const Tensor& grad) const;
  // Makes this tensor (and every handle to it) refer to `data`'s storage, shape, dtype and
  // stream, keeping its autograd state (requires_grad, hooks); a .grad that no longer
  // matches is dropped. For leaves only, as libtorch's set_data: what Module::to() uses to
  // move parameters without invalidating handles held elsewhere (optimisers).
  void set_data(const Tensor& data) const;
  std::shared_ptr<Node> grad_fn() const;
  uint32_t output_nr() const;
  bool is_leaf() const;
  // Keeps .grad for a non-leaf tensor too.
  void retain_grad() const;
  bool retains_grad() const;
  // A hook sees the gradient w.r.t. this tensor and may return a replacement (same
  // shape, dtype and device) or an undefined Tensor to keep it. Returns an id for
  // remove_hook.
  int register_hook(TensorHook hook) const;
  void remove_hook(int id) const;
  // Runs after .grad of this leaf was accumulated (S5: on the accumulation stream).
  void register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const;
  uint32_t version() const;
  void bump_version() const;
  const std::string& name() const;
  Tensor& set_name(std::string name);
  // Same data and version counter, no autograd history.
  Tensor detach() const;

  // See engine/backward.h.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false,
                bool create_graph = false, const std::vector<Tensor>& inputs = {}) const;

  // Internal: engine and ops use these to wire graphs.
  AutogradMeta& autograd_meta() const;  // creates it if needed
  AutogradMeta* autograd_meta_if_any() const;
  void set_history(std::shared_ptr<Node> grad_fn, uint32_t output_nr) const;

 private:
  // Inline: every accessor goes through it, and only the throw needs the out-of-line part.
  const TensorImpl& checked() const {
    if (impl_ == nullptr) throw_undefined();
    return *impl_;
  }
  [[noreturn]] static void throw_undefined();
  std::shared_ptr<TensorImpl> impl_;
};

struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;
  std::weak_ptr<Node> grad_accumulator;  // the AccumulateGrad of a leaf, while it lives
  uint32_t output_nr = 0;
  bool retains_grad = false;
  int retains_grad_hook_id = -1;  // its pre hook on grad_fn; follows grad_fn (in-place ops)
  std::vector<std::pair<int, TensorHook>> hooks;
  int next_hook_id = 0;
  std::vector<std::function<void(const Tensor&)>> post_accumulate_hooks;
  std::string name;
  std::mutex mu;  // guards grad and grad_accumulator against concurrent backward
};

// Implementation details follow.

extern template std::vector<float> Tensor::to_vector<float>() const;
extern template std::vector<double> Tensor::to_vector<double>() const;
extern template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
extern template std::vector<bool> Tensor::to_vector<bool>() const;
extern template float Tensor::item<float>() const;
extern template double Tensor::item<double>() const;
extern template int64_t Tensor::item<int64_t>() const;
extern template bool Tensor::item<bool>() const;
extern template std::vector<Half> Tensor::to_vector<Half>() const;
extern template std::vector<BFloat16> Tensor::to_vector<BFloat16>() const;
extern template Half Tensor::item<Half>() const;
extern template BFloat16 Tensor::item<BFloat16>() const;

}  // namespace streamgrad

#endif  // STREAMGRAD_ENGINE_TENSOR_H_
