// The operator methods Tensor declares (engine/tensor.h, "Operator methods"): each one
// forwards to the free function of ops/ops.h with the same name, so a method and its free
// function give the same values, history and errors. They are defined here, in //ops,
// rather than in engine/tensor.cc, because the operators live above the engine: the
// engine declares the spellings, the operator library provides them, as in libtorch.
//
// Thread-safety and failure: those of the free functions (ops/ops.h); t() adds a
// ValueError for a tensor of more than 2 dims.
#include "engine/tensor.h"
#include "ops/ops.h"
#include "runtime/base/error.h"

namespace streamgrad {

Tensor Tensor::sum() const { return streamgrad::sum(*this); }
Tensor Tensor::sum(const std::vector<int64_t>& dim, bool keepdim) const {
  return streamgrad::sum(*this, dim, keepdim);
}
Tensor Tensor::mean() const { return streamgrad::mean(*this); }
Tensor Tensor::mean(const std::vector<int64_t>& dim, bool keepdim) const {
  return streamgrad::mean(*this, dim, keepdim);
}
std::pair<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const {
  return streamgrad::max(*this, dim, keepdim);
}
std::pair<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const {
  return streamgrad::min(*this, dim, keepdim);
}
Tensor Tensor::argmax(int64_t dim, bool keepdim) const {
  return streamgrad::argmax(*this, dim, keepdim);
}
Tensor Tensor::softmax(int64_t dim) const { return streamgrad::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return streamgrad::log_softmax(*this, dim); }
Tensor Tensor::var() const { return streamgrad::var(*this); }
Tensor Tensor::var(const std::vector<int64_t>& dim, double correction, bool keepdim) const {
  return streamgrad::var(*this, dim, correction, keepdim);
}
Tensor Tensor::std() const { return streamgrad::std(*this); }
Tensor Tensor::std(const std::vector<int64_t>& dim, double correction, bool keepdim) const {
  return streamgrad::std(*this, dim, correction, keepdim);
}
Tensor Tensor::logsumexp(const std::vector<int64_t>& dim, bool keepdim) const {
  return streamgrad::logsumexp(*this, dim, keepdim);
}
Tensor Tensor::cumsum(int64_t dim) const { return streamgrad::cumsum(*this, dim); }
Tensor Tensor::all() const { return streamgrad::all(*this); }
Tensor Tensor::all(int64_t dim, bool keepdim) const { return streamgrad::all(*this, dim, keepdim); }
Tensor Tensor::any() const { return streamgrad::any(*this); }
Tensor Tensor::any(int64_t dim, bool keepdim) const { return streamgrad::any(*this, dim, keepdim); }

Tensor Tensor::neg() const { return streamgrad::neg(*this); }
Tensor Tensor::exp() const { return streamgrad::exp(*this); }
Tensor Tensor::log() const { return streamgrad::log(*this); }
Tensor Tensor::sqrt() const { return streamgrad::sqrt(*this); }
Tensor Tensor::tanh() const { return streamgrad::tanh(*this); }
Tensor Tensor::sigmoid() const { return streamgrad::sigmoid(*this); }
Tensor Tensor::relu() const { return streamgrad::relu(*this); }
Tensor Tensor::abs() const { return streamgrad::abs(*this); }
Tensor Tensor::log1p() const { return streamgrad::log1p(*this); }
Tensor Tensor::rsqrt() const { return streamgrad::rsqrt(*this); }
Tensor Tensor::erf() const { return streamgrad::erf(*this); }
Tensor Tensor::sin() const { return streamgrad::sin(*this); }
Tensor Tensor::cos() const { return streamgrad::cos(*this); }
Tensor Tensor::clamp(std::optional<double> min, std::optional<double> max) const {
  return streamgrad::clamp(*this, min, max);
}
Tensor Tensor::clamp_min(double min) const { return streamgrad::clamp_min(*this, min); }
Tensor Tensor::clamp_max(double max) const { return streamgrad::clamp_max(*this, max); }
Tensor Tensor::pow(double exponent) const { return streamgrad::pow(*this, exponent); }
Tensor Tensor::maximum(const Tensor& other) const { return streamgrad::maximum(*this, other); }
Tensor Tensor::minimum(const Tensor& other) const { return streamgrad::minimum(*this, other); }
Tensor Tensor::tril(int64_t diagonal) const { return streamgrad::tril(*this, diagonal); }
Tensor Tensor::triu(int64_t diagonal) const { return streamgrad::triu(*this, diagonal); }
Tensor Tensor::add(const Tensor& other, double alpha) const {
  return streamgrad::add(*this, other, alpha);
}
Tensor Tensor::add(double other) const { return streamgrad::add(*this, other); }
Tensor Tensor::sub(const Tensor& other, double alpha) const {
  return streamgrad::sub(*this, other, alpha);
}
Tensor Tensor::sub(double other) const { return streamgrad::sub(*this, other); }
Tensor Tensor::mul(const Tensor& other) const { return streamgrad::mul(*this, other); }
Tensor Tensor::mul(double other) const { return streamgrad::mul(*this, other); }
Tensor Tensor::div(const Tensor& other) const { return streamgrad::div(*this, other); }
Tensor Tensor::div(double other) const { return streamgrad::div(*this, other); }
Tensor Tensor::matmul(const Tensor& other) const { return streamgrad::matmul(*this, other); }
Tensor Tensor::bmm(const Tensor& other) const { return streamgrad::bmm(*this, other); }

Tensor Tensor::eq(const Tensor& other) const { return streamgrad::eq(*this, other); }
Tensor Tensor::eq(double other) const { return streamgrad::eq(*this, other); }
Tensor Tensor::ne(const Tensor& other) const { return streamgrad::ne(*this, other); }
Tensor Tensor::ne(double other) const { return streamgrad::ne(*this, other); }
Tensor Tensor::lt(const Tensor& other) const { return streamgrad::lt(*this, other); }
Tensor Tensor::lt(double other) const { return streamgrad::lt(*this, other); }
Tensor Tensor::le(const Tensor& other) const { return streamgrad::le(*this, other); }
Tensor Tensor::le(double other) const { return streamgrad::le(*this, other); }
Tensor Tensor::gt(const Tensor& other) const { return streamgrad::gt(*this, other); }
Tensor Tensor::gt(double other) const { return streamgrad::gt(*this, other); }
Tensor Tensor::ge(const Tensor& other) const { return streamgrad::ge(*this, other); }
Tensor Tensor::ge(double other) const { return streamgrad::ge(*this, other); }
Tensor Tensor::where(const Tensor& condition, const Tensor& other) const {
  return streamgrad::where(condition, *this, other);
}
Tensor Tensor::masked_fill(const Tensor& mask, double value) const {
  return streamgrad::masked_fill(*this, mask, value);
}
Tensor Tensor::masked_fill(const Tensor& mask, const Tensor& value) const {
  return streamgrad::masked_fill(*this, mask, value);
}
Tensor Tensor::gather(int64_t dim, const Tensor& index) const {
  return streamgrad::gather(*this, dim, index);
}
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  return streamgrad::scatter_add(*this, dim, index, src);
}
Tensor Tensor::index_select(int64_t dim, const Tensor& index) const {
  return streamgrad::index_select(*this, dim, index);
}

Tensor Tensor::view(const Shape& size) const { return streamgrad::view(*this, size); }
Tensor Tensor::reshape(const Shape& shape) const { return streamgrad::reshape(*this, shape); }
Tensor Tensor::t() const {
  SG_CHECK(defined(), ValueError, "t(): the tensor is undefined");
  SG_CHECK(dim() <= 2, ValueError, "t(): expects a tensor with at most 2 dimensions, but got ",
           describe(), "; use transpose(dim0, dim1) or permute(dims)");
  // As libtorch: a 0-D or 1-D tensor is its own transpose, still returned as a view.
  return streamgrad::transpose(*this, 0, dim() < 2 ? 0 : 1);
}
Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  return streamgrad::transpose(*this, dim0, dim1);
}
Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  return streamgrad::permute(*this, dims);
}
Tensor Tensor::unsqueeze(int64_t dim) const { return streamgrad::unsqueeze(*this, dim); }
Tensor Tensor::squeeze() const { return streamgrad::squeeze(*this); }
Tensor Tensor::squeeze(int64_t dim) const { return streamgrad::squeeze(*this, dim); }
Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  return streamgrad::narrow(*this, dim, start, length);
}
Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  return streamgrad::slice(*this, dim, start, end, step);
}
std::vector<Tensor> Tensor::split(int64_t split_size, int64_t dim) const {
  return streamgrad::split(*this, split_size, dim);
}
std::vector<Tensor> Tensor::split(const std::vector<int64_t>& split_sizes, int64_t dim) const {
  return streamgrad::split(*this, split_sizes, dim);
}
std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim) const {
  return streamgrad::chunk(*this, chunks, dim);
}
Tensor Tensor::repeat(const std::vector<int64_t>& repeats) const {
  return streamgrad::repeat(*this, repeats);
}
Tensor Tensor::expand(const Shape& size) const { return streamgrad::expand(*this, size); }
Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  return streamgrad::flatten(*this, start_dim, end_dim);
}
Tensor Tensor::contiguous() const { return streamgrad::contiguous(*this); }
Tensor Tensor::clone() const { return streamgrad::clone(*this); }

Tensor Tensor::to(Device device, bool non_blocking) const {
  return streamgrad::to(*this, device, non_blocking);
}
Tensor Tensor::to(DType dtype) const { return streamgrad::to(*this, dtype); }
Tensor Tensor::to(Device device, DType dtype, bool non_blocking) const {
  return streamgrad::to(streamgrad::to(*this, dtype), device, non_blocking);
}

// The free in-place functions take Tensor& and return it; they change the data the handle
// refers to, never the handle, so handing them *this is safe for a const method (libtorch
// does the same).
Tensor& Tensor::add_(const Tensor& other, double alpha) const {
  return streamgrad::add_(const_cast<Tensor&>(*this), other, alpha);
}
Tensor& Tensor::mul_(const Tensor& other) const {
  return streamgrad::mul_(const_cast<Tensor&>(*this), other);
}
Tensor& Tensor::mul_(double other) const {
  return streamgrad::mul_(const_cast<Tensor&>(*this), other);
}
Tensor& Tensor::zero_() const { return streamgrad::zero_(const_cast<Tensor&>(*this)); }
Tensor& Tensor::fill_(double value) const {
  return streamgrad::fill_(const_cast<Tensor&>(*this), value);
}
Tensor& Tensor::copy_(const Tensor& src) const {
  return streamgrad::copy_(const_cast<Tensor&>(*this), src);
}
Tensor& Tensor::masked_fill_(const Tensor& mask, double value) const {
  return streamgrad::masked_fill_(const_cast<Tensor&>(*this), mask, value);
}
Tensor& Tensor::masked_fill_(const Tensor& mask, const Tensor& value) const {
  return streamgrad::masked_fill_(const_cast<Tensor&>(*this), mask, value);
}

}  // namespace streamgrad
