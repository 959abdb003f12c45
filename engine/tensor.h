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
// holds what every layer needs, and declares libtorch's method spellings of those
// operations (x.sum(), x.to(device), x.view({...})), which ops/ defines: see the comment
// above the first of them.
//
//   std::cout << x;   // values laid out by dims, then "[ sim:0 float32 {2,3} ]"
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
#include <iosfwd>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/view.h"
#include "runtime/backend/stream.h"
#include "runtime/base/device.h"
#include "runtime/base/dtype.h"
#include "runtime/base/half.h"
#include "runtime/memory/storage.h"

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
  // to_vector<T> needs T to be the tensor's own type.
  template <typename T>
  std::vector<T> to_vector() const;
  // The value of a one-element tensor converted to T as libtorch's item<T>() does: any
  // dtype to float, double, Half, BFloat16, int64_t, int32_t or bool. To bool: non-zero
  // (NaN too) is true. Floating to integral truncates toward zero. A finite value outside
  // T's range, or NaN / infinity to an integral type, is a ValueError (libtorch: "cannot
  // be converted ... without overflow"); NaN and infinity pass to floating types. A
  // tensor of other than one element is a ValueError naming its shape and dtype.
  template <typename T>
  T item() const;
  std::string str() const;  // one-line printing of values; operator<< prints as libtorch
  // Notes that the memory is used on `stream` (of the tensor's device), as libtorch's
  // record_stream: it is not reused before the work queued there so far completes (S8).
  void record_stream(const Stream& stream) const;

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

  // ---- Operator methods ------------------------------------------------------------------
  // libtorch's method spellings of the operators of ops/ops.h: x.sum(1), x.to(device),
  // x.view({2, -1}), x.add_(y). As in the reference framework, whose tensor type declares
  // its operator methods while the operator library defines them, they are declared here
  // (so that they read as members of Tensor) and defined in ops/tensor_methods.cc, part of
  // //ops, each forwarding to the free function with the same name. engine/ sits below
  // ops/, so ENGINE CODE MUST NOT CALL THEM: a binary that links the engine without //ops
  // would fail to link (tests/engine/tensor_print_test links exactly that). Names,
  // argument order and defaults follow torch::Tensor; there are methods only for
  // operators streamgrad has. Differences: scalars are double (libtorch: Scalar); max/min
  // return std::pair (libtorch: std::tuple; structured bindings and std::tie take both);
  // sum, mean and softmax take no dtype; the scalar forms of add/sub take no alpha.

  // Reductions. A dim list may be one integer (x.sum(1)) or a braced list (x.sum({0, 1})).
  Tensor sum() const;
  Tensor sum(const std::vector<int64_t>& dim, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const std::vector<int64_t>& dim, bool keepdim = false) const;
  // One dim, as libtorch's IntArrayRef takes one integer. A template so that x.sum({})
  // (every dim) does not read as x.sum(0).
  template <typename I, typename = std::enable_if_t<std::is_integral<I>::value &&
                                                    !std::is_same<I, bool>::value>>
  Tensor sum(I dim, bool keepdim = false) const {
    return sum(std::vector<int64_t>{static_cast<int64_t>(dim)}, keepdim);
  }
  template <typename I, typename = std::enable_if_t<std::is_integral<I>::value &&
                                                    !std::is_same<I, bool>::value>>
  Tensor mean(I dim, bool keepdim = false) const {
    return mean(std::vector<int64_t>{static_cast<int64_t>(dim)}, keepdim);
  }
  std::pair<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;  // values, indices
  std::pair<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  Tensor var() const;
  Tensor var(const std::vector<int64_t>& dim, double correction = 1, bool keepdim = false) const;
  Tensor std() const;
  Tensor std(const std::vector<int64_t>& dim, double correction = 1, bool keepdim = false) const;
  Tensor logsumexp(const std::vector<int64_t>& dim, bool keepdim = false) const;
  Tensor cumsum(int64_t dim) const;
  Tensor all() const;  // bool, no history
  Tensor all(int64_t dim, bool keepdim = false) const;
  Tensor any() const;
  Tensor any(int64_t dim, bool keepdim = false) const;

  // Element-wise math.
  Tensor neg() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor abs() const;
  Tensor log1p() const;
  Tensor rsqrt() const;
  Tensor erf() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor clamp(std::optional<double> min, std::optional<double> max) const;
  Tensor clamp_min(double min) const;
  Tensor clamp_max(double max) const;
  Tensor pow(double exponent) const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;
  Tensor add(const Tensor& other, double alpha = 1) const;  // this + alpha * other
  Tensor add(double other) const;
  Tensor sub(const Tensor& other, double alpha = 1) const;  // this - alpha * other
  Tensor sub(double other) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(double other) const;
  Tensor div(const Tensor& other) const;
  Tensor div(double other) const;
  Tensor matmul(const Tensor& other) const;
  Tensor bmm(const Tensor& other) const;

  // Comparisons (bool tensors without history) and selection.
  Tensor eq(const Tensor& other) const;
  Tensor eq(double other) const;
  Tensor ne(const Tensor& other) const;
  Tensor ne(double other) const;
  Tensor lt(const Tensor& other) const;
  Tensor lt(double other) const;
  Tensor le(const Tensor& other) const;
  Tensor le(double other) const;
  Tensor gt(const Tensor& other) const;
  Tensor gt(double other) const;
  Tensor ge(const Tensor& other) const;
  Tensor ge(double other) const;
  Tensor where(const Tensor& condition, const Tensor& other) const;  // where(c, *this, other)
  Tensor masked_fill(const Tensor& mask, double value) const;
  Tensor masked_fill(const Tensor& mask, const Tensor& value) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;

  // Shape and views. view() without arguments is the kernels' raw view above.
  Tensor view(const Shape& size) const;
  Tensor reshape(const Shape& shape) const;
  template <typename I, typename = std::enable_if_t<std::is_integral<I>::value &&
                                                    !std::is_same<I, bool>::value>>
  Tensor view(I size) const {  // x.view(-1)
    return view(Shape{static_cast<int64_t>(size)});
  }
  template <typename I, typename = std::enable_if_t<std::is_integral<I>::value &&
                                                    !std::is_same<I, bool>::value>>
  Tensor reshape(I size) const {
    return reshape(Shape{static_cast<int64_t>(size)});
  }
  // transpose(0, 1) of a 2-D tensor; a 0-D or 1-D tensor gives a view of itself; more
  // dims are a ValueError.
  Tensor t() const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> split(const std::vector<int64_t>& split_sizes, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  Tensor repeat(const std::vector<int64_t>& repeats) const;
  Tensor expand(const Shape& size) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor contiguous() const;
  Tensor clone() const;

  // Devices and dtypes. to(device, dtype) converts the dtype first, then copies.
  Tensor to(Device device, bool non_blocking = false) const;
  Tensor to(DType dtype) const;
  Tensor to(Device device, DType dtype, bool non_blocking = false) const;

  // In place: const and returning Tensor&, as libtorch's (the handle does not change; the
  // data it refers to does).
  Tensor& add_(const Tensor& other, double alpha = 1) const;
  Tensor& mul_(const Tensor& other) const;
  Tensor& mul_(double other) const;
  Tensor& zero_() const;
  Tensor& fill_(double value) const;
  Tensor& copy_(const Tensor& src) const;
  Tensor& masked_fill_(const Tensor& mask, double value) const;
  Tensor& masked_fill_(const Tensor& mask, const Tensor& value) const;
  // ---- End of operator methods ------------------------------------------------------------

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

// Prints as libtorch's operator<< (see engine/tensor_print.cc for the layout and how it
// differs); reads the values through to_vector, so on sim it waits for the tensor's producer.
std::ostream& operator<<(std::ostream& out, const Tensor& t);

// Implementation details follow.

extern template std::vector<float> Tensor::to_vector<float>() const;
extern template std::vector<double> Tensor::to_vector<double>() const;
extern template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
extern template std::vector<bool> Tensor::to_vector<bool>() const;
extern template float Tensor::item<float>() const;
extern template double Tensor::item<double>() const;
extern template int64_t Tensor::item<int64_t>() const;
extern template bool Tensor::item<bool>() const;
extern template int32_t Tensor::item<int32_t>() const;
extern template std::vector<Half> Tensor::to_vector<Half>() const;
extern template std::vector<BFloat16> Tensor::to_vector<BFloat16>() const;
extern template Half Tensor::item<Half>() const;
extern template BFloat16 Tensor::item<BFloat16>() const;

}  // namespace streamgrad

#endif  // STREAMGRAD_ENGINE_TENSOR_H_
