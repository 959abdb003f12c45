// Tensor factories. Each allocates on the requested device (default: the thread's current
// device) and fills on that device's current stream, which becomes the tensor's stamp.
//
//   Tensor a = zeros({2, 3});                                        // float32, current device
//   Tensor b = randn({4}, TensorOptions().device("sim:1").dtype(DType::kFloat64));
//   Tensor c = from_vector<float>({1, 2, 3, 4}, {2, 2});
//   Tensor d = ones_like(b);                                         // same dtype and device
//   manual_seed(42);                                                 // rand/randn reproducible
//
// Thread-safety: all factories are thread-safe; the random generator advances atomically.
// Failure: ValueError for negative sizes, element or byte counts beyond int64, a
// from_vector size mismatch, requires_grad on a non-floating dtype; DeviceError for absent
// devices; OutOfMemoryError for a representable size the device cannot hold.
#ifndef STREAMGRAD_ENGINE_FACTORIES_H_
#define STREAMGRAD_ENGINE_FACTORIES_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/tensor.h"

namespace streamgrad {

class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions dtype(DType d) const {
    TensorOptions o = *this;
    o.dtype_ = d;
    return o;
  }
  TensorOptions device(Device d) const {
    TensorOptions o = *this;
    o.device_ = d;
    return o;
  }
  TensorOptions requires_grad(bool r) const {
    TensorOptions o = *this;
    o.requires_grad_ = r;
    return o;
  }
  DType dtype() const { return dtype_; }
  const std::optional<Device>& device() const { return device_; }
  bool requires_grad() const { return requires_grad_; }

 private:
  DType dtype_ = DType::kFloat32;
  std::optional<Device> device_;
  bool requires_grad_ = false;
};

Tensor empty(const Shape& sizes, const TensorOptions& options = {});
Tensor zeros(const Shape& sizes, const TensorOptions& options = {});
Tensor ones(const Shape& sizes, const TensorOptions& options = {});
Tensor full(const Shape& sizes, double value, const TensorOptions& options = {});
// [start, end) in steps of `step` (float32 unless options say otherwise).
Tensor arange(double start, double end, double step = 1, const TensorOptions& options = {});
// 0, 1, ..., up to but excluding end (empty for end <= 0).
Tensor arange(double end, const TensorOptions& options = {});
Tensor rand(const Shape& sizes, const TensorOptions& options = {});   // uniform [0, 1)
Tensor randn(const Shape& sizes, const TensorOptions& options = {});  // standard normal
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes,
                   const TensorOptions& options = TensorOptions().dtype(DTypeOf<T>::value));
template <typename T>
Tensor from_vector(const std::vector<T>& values) {
  return from_vector<T>(values, {static_cast<int64_t>(values.size())});
}
// A 0-dim tensor.
Tensor scalar_tensor(double value, const TensorOptions& options = {});

// Same dtype and device as `t` (and never requires grad).
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
Tensor rand_like(const Tensor& t);
Tensor randn_like(const Tensor& t);
// New tensors of another shape with `t`'s dtype and device.
Tensor new_zeros(const Tensor& t, const Shape& sizes);
Tensor new_ones(const Tensor& t, const Shape& sizes);
Tensor new_full(const Tensor& t, const Shape& sizes, double value);

void manual_seed(uint64_t seed);
// The generator's state, as the reference framework's get_rng_state/set_rng_state: a
// checkpoint that stores it resumes with the same random numbers (dropout masks) as an
// uninterrupted run.
struct RngState {
  uint64_t seed = 0;
  uint64_t offset = 0;  // counter values drawn since the seed was set
};
RngState rng_state();
// Internal, for ops whose kernels draw from the generator themselves (multinomial):
// reserves `count` counters, returning the state they start at (one atomic step, so
// concurrent callers never share counters).
RngState reserve_rng_counters(uint64_t count);
void set_rng_state(const RngState& state);

// Internal: a tensor viewing `impl`'s storage with other sizes/strides/offset (shares the
// version counter; no autograd history).
Tensor make_view(const Tensor& base, const Shape& sizes, const Shape& strides, int64_t offset);
// The product of `sizes`, unchecked (sizes of an existing tensor).
int64_t numel_of(const Shape& sizes);
// The product of `sizes`; ValueError naming `op` for a negative size or a count beyond
// int64 (any zero size makes it 0, whatever the others are).
int64_t checked_numel(const Shape& sizes, const char* op);
// checked_numel for its errors alone.
void check_sizes(const Shape& sizes, const char* op);

}  // namespace streamgrad

#endif  // STREAMGRAD_ENGINE_FACTORIES_H_
