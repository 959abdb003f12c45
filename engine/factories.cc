#include "engine/factories.h"

#include <atomic>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/kernels.h"
#include "runtime/backend/devices.h"
#include "runtime/base/error.h"
#include "runtime/memory/copy.h"

namespace streamgrad {
namespace {

std::atomic<uint64_t> g_seed{0x5eed5eedULL};
std::atomic<uint64_t> g_offset{0};

Device target_device(const TensorOptions& o, const char* op) {
  return resolve_device(o.device().value_or(current_device()), op);
}

Tensor finish(Tensor t, const TensorOptions& o) {
  if (o.requires_grad()) t.requires_grad_(true);
  return t;
}

TensorOptions like(const Tensor& t) { return TensorOptions().dtype(t.dtype()).device(t.device()); }

}  // namespace

int64_t numel_of(const Shape& sizes) {
  // Unsigned so that unchecked sizes wrap instead of being undefined behaviour; every
  // tensor's sizes went through checked_numel.
  uint64_t n = 1;
  for (int64_t s : sizes) n *= static_cast<uint64_t>(s);
  return static_cast<int64_t>(n);
}

int64_t checked_numel(const Shape& sizes, const char* op) {
  bool has_zero = false;
  for (int64_t s : sizes) {
    SG_CHECK(s >= 0, ValueError, op, ": negative size in [", absl::StrJoin(sizes, ", "),
             "]; sizes must be >= 0");
    has_zero = has_zero || s == 0;
  }
  // A zero size empties the tensor whatever the others are, as in PyTorch.
  if (has_zero) return 0;
  int64_t n = 1;
  for (int64_t s : sizes) {
    SG_CHECK(!__builtin_mul_overflow(n, s, &n), ValueError, op, ": shape [",
             absl::StrJoin(sizes, ", "), "] has more elements than int64 can count; "
             "use smaller sizes");
  }
  return n;
}

void check_sizes(const Shape& sizes, const char* op) { checked_numel(sizes, op); }

Tensor empty(const Shape& sizes, const TensorOptions& options) {
  const int64_t n = checked_numel(sizes, "empty");
  // PyTorch refuses such shapes too ("Storage size calculation overflowed"); a size that
  // fits but exceeds the device is the allocator's OutOfMemoryError.
  int64_t bytes = 0;
  SG_CHECK(!__builtin_mul_overflow(n, static_cast<int64_t>(element_size(options.dtype())), &bytes),
           ValueError, "empty: shape [", absl::StrJoin(sizes, ", "), "] of ",
           dtype_name(options.dtype()), " needs more bytes than int64 can count; use smaller "
           "sizes");
  SG_CHECK(!options.requires_grad() || is_floating(options.dtype()), ValueError,
           "requires_grad needs a floating dtype, got ", dtype_name(options.dtype()));
  const Device d = target_device(options, "empty");
  const Stream s = current_stream(d);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage =
      Storage::allocate(static_cast<size_t>(bytes), s);
  impl->sizes = sizes;
  impl->strides = kernels::contiguous_strides(sizes);
  impl->dtype = options.dtype();
  impl->stream = s;
  impl->version = std::make_shared<std::atomic<uint32_t>>(0);
  return finish(Tensor(std::move(impl)), options);
}

Tensor full(const Shape& sizes, double value, const TensorOptions& options) {
  Tensor t = empty(sizes, options.requires_grad(false));
  kernels::fill(t.stream(), t.view(), value);
  return finish(t, options);
}

Tensor zeros(const Shape& sizes, const TensorOptions& options) { return full(sizes, 0, options); }
Tensor ones(const Shape& sizes, const TensorOptions& options) { return full(sizes, 1, options); }

Tensor arange(double start, double end, double step, const TensorOptions& options) {
  SG_CHECK(step != 0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
           ValueError, "arange(", start, ", ", end, ", ", step,
           "): bounds must be finite and step non-zero");
  const double span = std::ceil((end - start) / step);
  // Converting a double beyond int64 is undefined behaviour: refuse it first, as PyTorch
  // does ("invalid size, possible overflow?").
  SG_CHECK(span < 0x1p63, ValueError, "arange(", start, ", ", end, ", ", step, "): ", span,
           " elements do not fit in int64; use a larger step or a smaller range");
  const int64_t n = span > 0 ? static_cast<int64_t>(span) : 0;
  Tensor t = empty({n}, options.requires_grad(false));
  kernels::arange(t.stream(), t.view(), start, step);
  return finish(t, options);
}

Tensor arange(double end, const TensorOptions& options) { return arange(0, end, 1, options); }

Tensor rand(const Shape& sizes, const TensorOptions& options) {
  Tensor t = empty(sizes, options.requires_grad(false));
  const uint64_t offset = g_offset.fetch_add(static_cast<uint64_t>(t.numel()));
  kernels::uniform(t.stream(), t.view(), 0, 1, g_seed.load(), offset);
  return finish(t, options);
}

Tensor randn(const Shape& sizes, const TensorOptions& options) {
  Tensor t = empty(sizes, options.requires_grad(false));
  const uint64_t offset = g_offset.fetch_add(static_cast<uint64_t>(2 * t.numel()));
  kernels::normal(t.stream(), t.view(), 0, 1, g_seed.load(), offset);
  return finish(t, options);
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes, const TensorOptions& options) {
  check_sizes(sizes, "from_vector");
  SG_CHECK(static_cast<int64_t>(values.size()) == numel_of(sizes), ValueError, "from_vector: ",
           values.size(), " values cannot fill shape [", absl::StrJoin(sizes, ", "), "] (",
           numel_of(sizes), " elements)");
  // Stage in the vector's own dtype, then convert on the device if another was asked for.
  Tensor staged = empty(sizes, TensorOptions().dtype(DTypeOf<T>::value).device(
                                   target_device(options, "from_vector")));
  std::vector<unsigned char> bytes(values.size() * sizeof(T));
  for (size_t i = 0; i < values.size(); ++i) {
    const T v = values[i];
    std::memcpy(bytes.data() + i * sizeof(T), &v, sizeof(T));
  }
  copy_bytes(staged.data_ptr(), staged.device(), bytes.data(), Device("cpu"), bytes.size());
  if (options.dtype() == DTypeOf<T>::value) return finish(staged, options);
  Tensor out = empty(sizes, options.requires_grad(false));
  kernels::copy(out.stream(), out.view(), staged.view());
  return finish(out, options);
}

template Tensor from_vector<float>(const std::vector<float>&, const Shape&, const TensorOptions&);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&,
                                    const TensorOptions&);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&,
                                     const TensorOptions&);
template Tensor from_vector<bool>(const std::vector<bool>&, const Shape&, const TensorOptions&);
template Tensor from_vector<Half>(const std::vector<Half>&, const Shape&, const TensorOptions&);
template Tensor from_vector<BFloat16>(const std::vector<BFloat16>&, const Shape&,
                                      const TensorOptions&);

Tensor scalar_tensor(double value, const TensorOptions& options) { return full({}, value, options); }

Tensor empty_like(const Tensor& t) { return empty(t.sizes(), like(t)); }
Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), like(t)); }
Tensor ones_like(const Tensor& t) { return ones(t.sizes(), like(t)); }
Tensor full_like(const Tensor& t, double value) { return full(t.sizes(), value, like(t)); }
Tensor rand_like(const Tensor& t) { return rand(t.sizes(), like(t)); }
Tensor randn_like(const Tensor& t) { return randn(t.sizes(), like(t)); }
Tensor new_zeros(const Tensor& t, const Shape& sizes) { return zeros(sizes, like(t)); }
Tensor new_ones(const Tensor& t, const Shape& sizes) { return ones(sizes, like(t)); }
Tensor new_full(const Tensor& t, const Shape& sizes, double value) {
  return full(sizes, value, like(t));
}

void manual_seed(uint64_t seed) { set_rng_state({seed, 0}); }

RngState rng_state() { return {g_seed.load(), g_offset.load()}; }

RngState reserve_rng_counters(uint64_t count) {
  const uint64_t seed = g_seed.load();
  return {seed, g_offset.fetch_add(count)};
}

void set_rng_state(const RngState& state) {
  g_seed.store(state.seed);
  g_offset.store(state.offset);
}

Tensor make_view(const Tensor& base, const Shape& sizes, const Shape& strides, int64_t offset) {
  const TensorImpl& b = *base.impl();
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = b.storage;
  impl->offset = offset;
  impl->sizes = sizes;
  impl->strides = strides;
  impl->dtype = b.dtype;
  impl->stream = current_stream(b.stream.device());
  impl->version = b.version;
  impl->base = b.base ? b.base : base.impl_ptr();
  return Tensor(std::move(impl));
}

}  // namespace streamgrad
