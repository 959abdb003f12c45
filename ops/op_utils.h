// Helpers every operator uses: input checks with the errors ARCHITECTURE.md §8 asks for,
// broadcasting, output allocation on the current stream, and wiring of backward nodes.
// Internal to ops/.
//
// Thread-safety: pure functions. Failure: ValueError / DeviceError naming `op`.
#ifndef STREAMGRAD_OPS_OP_UTILS_H_
#define STREAMGRAD_OPS_OP_UTILS_H_

#include <memory>
#include <string>
#include <vector>

#include "engine/factories.h"
#include "engine/node.h"
#include "kernels/kernels.h"
#include "runtime/backend/devices.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace ops_internal {

void check_defined(const Tensor& t, const char* op, const char* what);
// Same device for all; DeviceError naming both devices otherwise.
void check_same_device(const Tensor& a, const Tensor& b, const char* op);
// Whether `s` acts as a scalar beside `other`: a 0-dim cpu tensor combined with a tensor on
// another device (PyTorch's "cpu scalar" rule for element-wise ops).
bool is_cpu_scalar_for(const Tensor& s, const Tensor& other);
// check_same_device, except that either operand may be a cpu scalar for the other; the
// error names both devices and says that only 0-dim cpu tensors mix with other devices.
void check_binary_devices(const Tensor& a, const Tensor& b, const char* op);
// Where an element-wise op on a and b runs: the device that is not a cpu scalar's.
Device binary_device(const Tensor& a, const Tensor& b);
// `t` as an operand on `device`: itself, or for a cpu scalar its value, read on the host
// (cpu memory: no device sync) and filled into a 0-dim tensor on `device`'s current
// stream (int64 and bool scalars are copied instead, so that no value is rounded). No
// history: the op's node keeps t's edge, and grad_for brings t's gradient back to cpu.
Tensor operand_on(const Tensor& t, Device device);
// Floating dtype, and the same for both.
void check_floating(const Tensor& a, const char* op);
void check_same_dtype(const Tensor& a, const Tensor& b, const char* op);
// The reference framework's type promotion for two floating operands of an element-wise
// op: whether their dtypes differ (both floating), and the dtype both are converted to:
// promote_floating's, except that a 0-dim tensor beside a dimensioned one takes the
// latter's dtype (float32 x plus a float64 scalar tensor stays float32).
bool needs_promotion(const Tensor& a, const Tensor& b);
DType promoted_dtype(const Tensor& a, const Tensor& b);
// A bool tensor: the condition or mask (`what`) of `op`.
void check_bool(const Tensor& t, const char* op, const char* what);
// `value` is stored in a `dtype` tensor without changing it (masked_fill's value): int64
// needs an integer in range, bool 0 or 1, float32 no finite overflow (inf and NaN pass).
void check_fill_value(double value, DType dtype, const char* op);
// Normalises a possibly negative dim for a tensor of rank `rank`.
int64_t wrap_dim(int64_t dim, int64_t rank, const char* op);

// Which of `a`'s dims a reduction over `dims` (all when empty) removes. A 0-dim tensor
// accepts dim 0 and -1 and has nothing to reduce (PyTorch: its result is 0-dim); a dim
// named twice is a ValueError.
std::vector<bool> reduced_dims(const Tensor& a, const std::vector<int64_t>& dims, const char* op);

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// `t` as a kernel view of `shape` (stride 0 on broadcast dims).
kernels::View expand_view(const Tensor& t, const Shape& shape);
// The gradient of a broadcast: sums `g` down to `shape` (differentiable).
Tensor sum_to(const Tensor& g, const Shape& shape);
// What a backward node remembers of a forward input: its shape, dtype and device. (The
// engine's InputMeta, made default-constructible so that nodes can be filled in after
// they are created.)
struct InputInfo {
  Shape sizes;
  DType dtype = DType::kFloat32;
  Device device = Device(DeviceType::kCpu);
};
InputInfo meta_of(const Tensor& t);
// The gradient for `input` from `g`, the gradient of an output the input was broadcast,
// converted or moved into: summed to its shape, then converted to its dtype and copied
// to its device (S7) — in that order, so only the input's size crosses devices.
// Differentiable; each step is skipped when it changes nothing.
Tensor grad_for(const Tensor& g, const InputInfo& input);

// A fresh output on the current stream of `like`'s device.
Tensor new_output(const Shape& sizes, DType dtype, Device device);
inline Stream stream_of(const Tensor& t) { return current_stream(t.device()); }
// A contiguous tensor `t` seen by a kernel as `shape` (same number of elements): e.g. a
// reduction's output allocated without keepdim, handed to the kernel in keepdim form. Ops
// return `t` itself rather than a make_view of a hidden keepdim tensor, so that views of
// their result keep `t` as base (check_inplace looks at the base).
kernels::View contiguous_view_as(const Tensor& t, const Shape& shape);

// The gather / scatter family (gather.cc, scatter_reduce.cc): validates t and an int64
// index of t's rank that is no larger than t on every dim but `dim` (and src, when given:
// t's device and dtype, index's rank, at least index's size on every dim), naming `op`;
// returns the normalised dim.
int64_t check_indexed(const char* op, const Tensor& t, int64_t dim, const Tensor& index,
                      const Tensor* src);
// The part of `src` that an index of `sizes` covers: its leading corner (a view, whose
// gradient is zero outside the corner, as src's elements there are never read).
Tensor covered(const Tensor& src, const Shape& sizes);

// Whether backward input `i` of `node` needs a gradient.
inline bool needs_grad(const Node& node, size_t i) { return node.next_edge(i).valid(); }

// The element-wise kernel `op` of a floating input into a new tensor of its shape (the
// forward of exp, tanh, gelu, ...); checks name the op the user called, `name`.
Tensor unary_forward(kernels::Unary op, const Tensor& a, const char* name);
// The element-wise kernel `op` of two tensors of one shape, dtype and device (a backward's
// fused formula, e.g. tanh_backward(g, y)), into a new tensor; no checks, no history.
Tensor binary_kernel(kernels::Binary op, const Tensor& a, const Tensor& b);

// Makes `node` the backward of `outputs`, with one next edge per input. Call only when
// any_requires_grad(inputs): build the node inside that check so that ops without
// history allocate nothing.
void wire(const std::shared_ptr<Node>& node, absl::Span<const Tensor> inputs,
          absl::Span<const Tensor> outputs);

// Records the backward of a product out = a (*) b (mul, matmul): each input's gradient
// needs the other input, so each is saved only when the other requires grad. NodeT has
// SavedTensor members a, b and InputInfo members a_in, b_in. Returns the node (null when
// nothing requires grad), for ops that record more about their inputs.
template <typename NodeT>
std::shared_ptr<NodeT> record_product(const Tensor& a, const Tensor& b, const Tensor& out) {
  if (!any_requires_grad({a, b})) return nullptr;
  auto node = std::make_shared<NodeT>();
  if (b.requires_grad()) node->a = SavedTensor(a);
  if (a.requires_grad()) node->b = SavedTensor(b);
  node->a_in = meta_of(a);
  node->b_in = meta_of(b);
  wire(node, {a, b}, {out});
  return node;
}

// The backward of out = where(condition, input, other) (where.cc), shared with
// masked_fill / masked_fill_ (where(mask, value, input)): saves the condition and the
// operands' InputInfo; its next edges are wired in the order (condition, input, other).
std::shared_ptr<Node> where_backward(const Tensor& condition, const Tensor& input,
                                     const Tensor& other, const char* name);

// In-place ops: refuses a leaf that requires grad (outside NoGradGuard) and a view of such a
// tensor, then bumps the version once the kernel is enqueued.
void check_inplace(const Tensor& a, const char* op);

}  // namespace ops_internal
}  // namespace streamgrad

#endif  // STREAMGRAD_OPS_OP_UTILS_H_
