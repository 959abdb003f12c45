// Every differentiable operator of streamgrad. Each forward validates its inputs,
// allocates its outputs on the current stream of their device (the outputs' stamp, S1),
// launches kernels there, and — when grad mode is on and an input requires grad — records
// a backward node that saves only what its backward needs. Backward formulas are written
// with these same ops, so they are differentiable again (create_graph).
//
//   Tensor y = relu(matmul(x, w) + b);
//   Tensor loss = mean(y * y);
//
// Broadcasting follows numpy: trailing dimensions are matched, size-1 dimensions stretch.
// Views (transpose, permute, reshape of contiguous data, expand, squeeze, unsqueeze,
// slice, narrow) share storage with their input; the in-place ops (add_, mul_, zero_,
// copy_, fill_) bump the version counter so that a tensor saved for backward and modified
// afterwards is reported by the backward that needs it.
//
// Thread-safety: ops may be called from any thread on distinct or shared inputs; in-place
// ops on a shared tensor need external synchronisation.
// Failure: ValueError naming the op, the shapes and dtypes involved (mismatched or
// non-broadcastable shapes, non-floating inputs to differentiable math, bad dims);
// DeviceError naming both devices when inputs live on different devices, except that a
// 0-dim cpu tensor beside a tensor on another device acts as a scalar in add, sub, mul,
// div, add_ and mul_ (its value is read on the host when the op is called; its gradient
// comes back as a 0-dim cpu tensor), as in PyTorch; Error for
// in-place ops on a leaf that requires grad (outside NoGradGuard).
#ifndef STREAMGRAD_OPS_OPS_H_
#define STREAMGRAD_OPS_OPS_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace streamgrad {

// Arithmetic (tensor and scalar forms); `alpha` scales b.
Tensor add(const Tensor& a, const Tensor& b, double alpha = 1);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, const Tensor& b, double alpha = 1);
Tensor sub(const Tensor& a, double b);
Tensor sub(double a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, double b);
Tensor div(double a, const Tensor& b);
Tensor neg(const Tensor& a);

// Element-wise math.
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor pow(const Tensor& a, double exponent);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor relu(const Tensor& a);
Tensor abs(const Tensor& a);

// Reductions. Negative dims count from the end; an empty `dims` reduces over all.
Tensor sum(const Tensor& a);
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& a);
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim = false);
// Values and int64 indices along `dim` (ties: the first index).
std::pair<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim = false);

// 2-D [M,K]x[K,N], batched [B,M,K]x[B,K,N] (a 2-D operand broadcasts over the batch).
Tensor matmul(const Tensor& a, const Tensor& b);

// Convolution, pooling and normalisation (conv.cc, pool.cc, batch_norm.cc).
// (reserved: training issue)

// Shape and views.
Tensor transpose(const Tensor& a, int64_t dim0, int64_t dim1);
Tensor permute(const Tensor& a, const std::vector<int64_t>& dims);
// reshape: a view when the input is contiguous, else a copy; view: always a view (error
// when impossible); one size may be -1.
Tensor reshape(const Tensor& a, const Shape& sizes);
Tensor view(const Tensor& a, const Shape& sizes);
Tensor expand(const Tensor& a, const Shape& sizes);
Tensor squeeze(const Tensor& a);
Tensor squeeze(const Tensor& a, int64_t dim);
Tensor unsqueeze(const Tensor& a, int64_t dim);
Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);
Tensor clone(const Tensor& a);
Tensor contiguous(const Tensor& a);

// Devices and dtypes. to(device) is a copy ordered against both devices' current streams
// (runtime/copy.h); its backward copies the gradient back (S7).
Tensor to(const Tensor& a, Device device, bool non_blocking = false);
Tensor to(const Tensor& a, DType dtype);

// In place: return `a`. copy_ from another device is one copy ordered against both
// devices' current streams, like to(device); its gradient goes back to src's device.
Tensor& add_(Tensor& a, const Tensor& b, double alpha = 1);
Tensor& mul_(Tensor& a, const Tensor& b);
Tensor& mul_(Tensor& a, double b);
Tensor& zero_(Tensor& a);
Tensor& fill_(Tensor& a, double value);
Tensor& copy_(Tensor& a, const Tensor& src);

// Linear layers, activations, losses, dropout, masks and comparisons.
// (reserved: training issue)

// Operators.
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return add(b, a); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
inline Tensor operator-(double a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return div(a, b); }
inline Tensor operator/(double a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }

}  // namespace streamgrad

#endif  // STREAMGRAD_OPS_OPS_H_
