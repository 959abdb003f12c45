// Host reads of a tensor: to_vector<T> (T the tensor's own type) and item<T> (converted
// as libtorch's item<T>: see engine/tensor.h). Both are blocking copies ordered on the
// current stream of the tensor's device; a non-contiguous tensor is gathered on its device
// first.
//
// Thread-safety: as any read of the tensor. Failure: ValueError for a dtype that is not T
// (to_vector), a tensor of more than one element or a value out of T's range (item).
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "engine/factories.h"
#include "engine/tensor.h"
#include "kernels/kernels.h"
#include "runtime/backend/devices.h"
#include "runtime/base/error.h"
#include "runtime/memory/copy.h"

namespace streamgrad {

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

namespace {
// The one value of a tensor as libtorch's Scalar holds it: a double for floating dtypes,
// an int64 for int64, a bool for bool.
struct ScalarValue {
  enum Kind { kFloating, kIntegral, kBool } kind;
  double d = 0;
  int64_t i = 0;
  bool b = false;
};

ScalarValue read_scalar(const Tensor& t) {
  ScalarValue v{ScalarValue::kFloating};
  switch (t.dtype()) {
    case DType::kFloat32:
      v.d = t.to_vector<float>()[0];
      break;
    case DType::kFloat64:
      v.d = t.to_vector<double>()[0];
      break;
    case DType::kFloat16:
      v.d = t.to_vector<Half>()[0].to_float();
      break;
    case DType::kBFloat16:
      v.d = t.to_vector<BFloat16>()[0].to_float();
      break;
    case DType::kInt64:
      v.kind = ScalarValue::kIntegral;
      v.i = t.to_vector<int64_t>()[0];
      break;
    case DType::kBool:
      v.kind = ScalarValue::kBool;
      v.b = t.to_vector<bool>()[0];
      break;
  }
  return v;
}

// What item<T> converts to: its name in messages, its finite range, and the conversion.
template <typename T>
struct ItemTarget {
  static constexpr bool kFloating = std::is_floating_point<T>::value;
  static double lowest() { return static_cast<double>(std::numeric_limits<T>::lowest()); }
  // For integral T, the first value past the top (2^63 for int64_t: exact in a double).
  static double past_max() { return -lowest(); }
  static T from_double(double d) { return static_cast<T>(d); }
  static T from_int(int64_t i) { return static_cast<T>(i); }
};
template <>
struct ItemTarget<Half> {
  static constexpr bool kFloating = true;
  static double lowest() { return -65504.0; }
  static Half from_double(double d) { return Half::from_float(static_cast<float>(d)); }
  static Half from_int(int64_t i) { return from_double(static_cast<double>(i)); }
};
template <>
struct ItemTarget<BFloat16> {
  static constexpr bool kFloating = true;
  static double lowest() { return -3.3895313892515355e38; }
  static BFloat16 from_double(double d) { return BFloat16::from_float(static_cast<float>(d)); }
  static BFloat16 from_int(int64_t i) { return from_double(static_cast<double>(i)); }
};

template <typename T>
const char* item_type_name();
template <> const char* item_type_name<float>() { return "float"; }
template <> const char* item_type_name<double>() { return "double"; }
template <> const char* item_type_name<int64_t>() { return "int64_t"; }
template <> const char* item_type_name<int32_t>() { return "int32_t"; }
template <> const char* item_type_name<bool>() { return "bool"; }
template <> const char* item_type_name<Half>() { return "Half"; }
template <> const char* item_type_name<BFloat16>() { return "BFloat16"; }

// As libtorch's checked conversion of a Scalar: anything goes to bool (non-zero is true);
// NaN and infinity go to floating types; else the value must lie in T's range.
template <typename T>
bool fits(double d) {
  using Target = ItemTarget<T>;
  if constexpr (std::is_same<T, bool>::value) {
    return true;
  } else if constexpr (Target::kFloating) {
    return !std::isfinite(d) || (d >= Target::lowest() && d <= -Target::lowest());
  } else {
    return d >= Target::lowest() && d < Target::past_max();  // false for NaN
  }
}

template <typename T>
bool fits_int(int64_t i) {
  if constexpr (std::is_same<T, bool>::value || std::is_same<T, int64_t>::value) {
    return true;
  } else {
    return fits<T>(static_cast<double>(i));
  }
}
}  // namespace

template <typename T>
T Tensor::item() const {
  SG_CHECK(numel() == 1, ValueError, "item(): the tensor ", describe(),
           " has ", numel(), " elements; item() needs exactly one");
  const ScalarValue v = read_scalar(*this);
  using Target = ItemTarget<T>;
  switch (v.kind) {
    case ScalarValue::kBool:
      return Target::from_int(v.b ? 1 : 0);
    case ScalarValue::kIntegral:
      SG_CHECK(fits_int<T>(v.i), ValueError, "item<", item_type_name<T>(), ">(): the value ",
               v.i, " of ", describe(), " cannot be converted to ", item_type_name<T>(),
               " without overflow; read it as int64_t or double");
      return Target::from_int(v.i);
    case ScalarValue::kFloating:
      break;
  }
  SG_CHECK(fits<T>(v.d), ValueError, "item<", item_type_name<T>(), ">(): the value ", v.d,
           " of ", describe(), " cannot be converted to ", item_type_name<T>(),
           " without overflow; read it as double");
  return Target::from_double(v.d);  // to bool: d != 0, so NaN is true as in libtorch
}

template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;
template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template int64_t Tensor::item<int64_t>() const;
template bool Tensor::item<bool>() const;
template int32_t Tensor::item<int32_t>() const;
template std::vector<Half> Tensor::to_vector<Half>() const;
template std::vector<BFloat16> Tensor::to_vector<BFloat16>() const;
template Half Tensor::item<Half>() const;
template BFloat16 Tensor::item<BFloat16>() const;

}  // namespace streamgrad
