// In-place ops: add_, mul_ (tensor and scalar), zero_, fill_, copy_, masked_fill_.
//
// Each validates everything before it touches memory, refuses leaves that require grad
// (check_inplace), enqueues its kernel on the current stream of the tensor's device, then
// bumps the version counter so that a backward that saved the old value reports it.
// When the tensor or the other operand requires grad, the tensor's history is rebased: it
// gets a new grad_fn whose next edges are the tensor's old history and the operand's, and
// whose canonical stream is the stream the in-place kernel ran on (S1).
//
// In-place ops on views (and on bases that have views) keep every gradient right: see
// Note [Views and in-place operations] in engine/view_history.h.
#include "engine/accumulate_grad.h"
#include "engine/stream_placement.h"
#include "engine/view_history.h"
#include "ops/op_utils.h"
#include "ops/ops.h"
#include "ops/view_history.h"
#include "runtime/memory/copy.h"

namespace streamgrad {
namespace ops_internal {

// S1: the node is stamped with the stream the kernel ran on.
void rebase_inplace(const Tensor& a, const std::shared_ptr<Node>& node, std::vector<Edge> edges) {
  node->set_next_edges(std::move(edges));
  if (!a.device().is_cpu()) node->set_stream(stream_of(a));
  const Tensor base = differentiable_base(a);
  if (base.defined()) {
    record_on_base(base, a, node);
  } else {
    set_history(a, node);
  }
  op_recorded({a});
}

}  // namespace ops_internal

namespace {

using namespace ops_internal;  // NOLINT

void rebase(const Tensor& a, const std::shared_ptr<Node>& node, std::vector<Edge> edges) {
  rebase_inplace(a, node, std::move(edges));
}

void check_broadcast_into(const Tensor& a, const Tensor& b, const char* op) {
  const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), op);
  SG_CHECK(shape == a.sizes(), ValueError, op, ": the operand ", b.describe(),
           " cannot be broadcast to the shape of the tensor modified in place ", a.describe());
}

bool shares_storage(const Tensor& a, const Tensor& b) {
  return a.storage().defined() && b.storage().defined() && a.storage().id() == b.storage().id();
}

struct AddInplaceBackward final : Node {
  AddInplaceBackward(InputInfo b, double alpha) : b_in(std::move(b)), alpha(alpha) {}
  std::string name() const override { return "Add_Backward"; }
  TensorList apply(TensorList&& grads) override {
    const Tensor& g = grads[0];
    TensorList out(2);
    if (!g.defined()) return out;
    if (needs_grad(*this, 0)) out[0] = g;
    if (needs_grad(*this, 1)) out[1] = grad_for(alpha == 1 ? g : mul(g, alpha), b_in);
    return out;
  }
  InputInfo b_in;
  double alpha;
};

// a·b with a's old value saved as a clone (it is overwritten) when b needs its gradient.
struct MulInplaceBackward final : Node {
  std::string name() const override { return "Mul_Backward"; }
  TensorList apply(TensorList&& grads) override {
    const Tensor& g = grads[0];
    TensorList out(2);
    if (!g.defined()) return out;
    if (needs_grad(*this, 0)) out[0] = mul(g, b.unpack("Mul_Backward"));
    if (needs_grad(*this, 1)) out[1] = grad_for(mul(g, a_old.unpack("Mul_Backward")), b_in);
    return out;
  }
  void release_variables() override {
    a_old.reset();
    b.reset();
  }
  SavedTensor a_old, b;
  InputInfo b_in;
};

struct ScaleInplaceBackward final : Node {
  explicit ScaleInplaceBackward(double s) : scale(s) {}
  std::string name() const override { return "Mul_Backward"; }
  TensorList apply(TensorList&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {mul(grads[0], scale)};
  }
  double scale;
};

// fill_/zero_: the old value does not matter any more.
struct FillBackward final : Node {
  explicit FillBackward(const char* n) : op_name(n) {}
  std::string name() const override { return op_name; }
  TensorList apply(TensorList&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {zeros_like(grads[0])};
  }
  const char* op_name;
};

// copy_: the old value gets no gradient, src gets g summed to its shape, in its dtype, on
// its device (S7).
struct CopyBackward final : Node {
  explicit CopyBackward(InputInfo s) : src_in(std::move(s)) {}
  std::string name() const override { return "Copy_Backward"; }
  TensorList apply(TensorList&& grads) override {
    const Tensor& g = grads[0];
    TensorList out(2);
    if (!g.defined()) return out;
    if (needs_grad(*this, 0)) out[0] = zeros_like(g);
    if (needs_grad(*this, 1)) out[1] = grad_for(g, src_in);
    return out;
  }
  InputInfo src_in;
};

// Writes `src` into `a` on another device as one ordered copy (runtime/memory/copy.h, S7): the
// source's current stream waits for the destination's, copies, and the destination's
// current stream waits for the copy. Conversion and packing happen on the source's device
// first; only a strided destination or a broadcast source needs a staging buffer on a's
// device (filled by the same kind of ordered copy, then copied locally).
void copy_across_devices(const Tensor& a, const Tensor& src) {
  // No history here: copy_ records one node for the whole copy.
  const Tensor packed = contiguous(to(src.detach(), a.dtype()));
  if (a.is_contiguous() && packed.sizes() == a.sizes()) {
    copy_bytes(a.data_ptr(), a.device(), packed.data_ptr(), packed.device(),
               static_cast<size_t>(a.numel()) * element_size(a.dtype()));
    return;
  }
  const Tensor staged = to(packed, a.device());
  kernels::copy(stream_of(a), a.view(), expand_view(staged, a.sizes()));
}

// The operand as the kernel sees it on a's device: a cpu scalar becomes a 0-dim tensor
// there (only the operand may be one: the tensor written keeps its device).
Tensor check_binary_inplace(const Tensor& a, const Tensor& b, const char* op) {
  check_defined(a, op, "the tensor modified in place");
  check_defined(b, op, "the operand");
  if (!is_cpu_scalar_for(b, a)) check_same_device(a, b, op);
  check_floating(a, op);
  // Another floating dtype is converted to a's (the result keeps a's dtype, as in the
  // reference framework); its gradient comes back in its own dtype (grad_for).
  if (!is_floating(b.dtype())) check_same_dtype(a, b, op);
  check_broadcast_into(a, b, op);
  check_inplace(a, op);
  const Tensor operand = operand_on(b, a.device());
  return operand.dtype() == a.dtype() ? operand : to(operand.detach(), a.dtype());
}

Tensor& fill_impl(Tensor& a, double value, const char* op, const char* node_name) {
  check_defined(a, op, "the tensor modified in place");
  check_inplace(a, op);
  kernels::fill(stream_of(a), a.view(), value);
  a.bump_version();
  if (any_requires_grad({a})) {
    rebase(a, std::make_shared<FillBackward>(node_name), collect_next_edges({a}));
  }
  return a;
}

// masked_fill_ after its own checks: where(mask, value, a) written into a. The node is
// where's backward with edges (mask, value, a's old history): a's old value gets the
// gradient where the mask is clear, the value the sum where it is set.
Tensor& masked_fill_impl(Tensor& a, const Tensor& mask, const Tensor& value) {
  // A value viewing a's own memory is read before the write starts.
  const Tensor operand = operand_on(shares_storage(a, value) ? clone(value.detach()) : value,
                                    a.device());
  const bool record = any_requires_grad({a, value});
  std::shared_ptr<Node> node;
  std::vector<Edge> edges;
  if (record) {
    node = where_backward(mask, value, a, "MaskedFill_Backward");
    edges = collect_next_edges({mask, value, a});
  }
  kernels::where(stream_of(a), a.view(), expand_view(mask, a.sizes()),
                 expand_view(operand, a.sizes()), a.view());
  a.bump_version();
  if (record) rebase(a, node, std::move(edges));
  return a;
}

void check_mask_inplace(const Tensor& a, const Tensor& mask) {
  check_defined(a, "masked_fill_", "the tensor modified in place");
  check_defined(mask, "masked_fill_", "the mask");
  check_bool(mask, "masked_fill_", "mask");
  check_same_device(a, mask, "masked_fill_");
  check_broadcast_into(a, mask, "masked_fill_");
}

}  // namespace

Tensor& masked_fill_(Tensor& a, const Tensor& mask, double value) {
  check_mask_inplace(a, mask);
  check_fill_value(value, a.dtype(), "masked_fill_");
  check_inplace(a, "masked_fill_");
  const Tensor v = full({}, value, TensorOptions().dtype(a.dtype()).device(a.device()));
  return masked_fill_impl(a, mask, v);
}

Tensor& masked_fill_(Tensor& a, const Tensor& mask, const Tensor& value) {
  check_mask_inplace(a, mask);
  check_defined(value, "masked_fill_", "the value");
  SG_CHECK(value.dim() == 0, ValueError, "masked_fill_: value must be a 0-dim tensor, got ",
           value.describe(), "; for a value per element use where(mask, value, a)");
  if (!is_cpu_scalar_for(value, a)) check_same_device(a, value, "masked_fill_");
  check_same_dtype(a, value, "masked_fill_");
  check_inplace(a, "masked_fill_");
  return masked_fill_impl(a, mask, value);
}

Tensor& add_(Tensor& a, const Tensor& b, double alpha) {
  const Tensor operand = check_binary_inplace(a, b, "add_");
  const bool record = any_requires_grad({a, b});
  std::vector<Edge> edges = record ? collect_next_edges({a, b}) : std::vector<Edge>{};
  kernels::axpy(stream_of(a), a.view(), a.view(), expand_view(operand, a.sizes()), alpha);
  a.bump_version();
  if (record) rebase(a, std::make_shared<AddInplaceBackward>(meta_of(b), alpha), std::move(edges));
  return a;
}

Tensor& mul_(Tensor& a, const Tensor& b) {
  const Tensor operand = check_binary_inplace(a, b, "mul_");
  const bool record = any_requires_grad({a, b});
  std::shared_ptr<MulInplaceBackward> node;
  std::vector<Edge> edges;
  if (record) {
    node = std::make_shared<MulInplaceBackward>();
    edges = collect_next_edges({a, b});
    // Both saved values must survive the write into a: a's old value is cloned (with its
    // history, for double backward), and so is b when it shares a's memory.
    if (a.requires_grad()) node->b = SavedTensor(shares_storage(a, b) ? clone(b) : b);
    if (b.requires_grad()) node->a_old = SavedTensor(clone(a));
    node->b_in = meta_of(b);
  }
  kernels::binary(stream_of(a), kernels::Binary::kMul, a.view(), a.view(),
                  expand_view(operand, a.sizes()));
  a.bump_version();
  if (record) rebase(a, node, std::move(edges));
  return a;
}

Tensor& mul_(Tensor& a, double b) {
  check_defined(a, "mul_", "the tensor modified in place");
  check_floating(a, "mul_");
  check_inplace(a, "mul_");
  kernels::unary_scalar(stream_of(a), kernels::UnaryScalar::kMul, a.view(), a.view(), b);
  a.bump_version();
  if (any_requires_grad({a})) {
    rebase(a, std::make_shared<ScaleInplaceBackward>(b), collect_next_edges({a}));
  }
  return a;
}

Tensor& zero_(Tensor& a) { return fill_impl(a, 0, "zero_", "Zero_Backward"); }

Tensor& fill_(Tensor& a, double value) { return fill_impl(a, value, "fill_", "Fill_Backward"); }

Tensor& copy_(Tensor& a, const Tensor& src) {
  check_defined(a, "copy_", "the destination");
  check_defined(src, "copy_", "the source");
  check_broadcast_into(a, src, "copy_");
  check_inplace(a, "copy_");
  const bool record = is_floating(a.dtype()) && any_requires_grad({a, src});
  std::vector<Edge> edges = record ? collect_next_edges({a, src}) : std::vector<Edge>{};
  if (src.device() == a.device()) {
    kernels::copy(stream_of(a), a.view(), expand_view(src, a.sizes()));
  } else {
    copy_across_devices(a, src);
  }
  a.bump_version();
  if (record) rebase(a, std::make_shared<CopyBackward>(meta_of(src)), std::move(edges));
  return a;
}

}  // namespace streamgrad
