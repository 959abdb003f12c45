// DType: the element types of tensors, with their sizes and names.
//
// float32 and float64 are differentiable, and so are the 16-bit float16 (IEEE binary16)
// and bfloat16 of mixed precision (runtime/base/half.h holds their C++ types and conversions);
// int64 (indices) and bool (masks) are not. The enum's values are stable (files and
// traces store them): new dtypes are appended.
// Also: the int64 range checks shared by kernels and ops (in_int64_range, is_int64_value).
// Thread-safety: plain values. Failure: dtype_from_name throws ValueError.
#ifndef STREAMGRAD_RUNTIME_BASE_DTYPE_H_
#define STREAMGRAD_RUNTIME_BASE_DTYPE_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

namespace streamgrad {

enum class DType : int8_t {
  kFloat32 = 0,
  kFloat64 = 1,
  kInt64 = 2,
  kBool = 3,
  kFloat16 = 4,
  kBFloat16 = 5,
};
// libtorch's spellings of the 16-bit types.
constexpr DType kHalf = DType::kFloat16;
constexpr DType kBFloat16 = DType::kBFloat16;

inline constexpr size_t element_size(DType t) {
  return t == DType::kFloat32                                 ? 4
         : t == DType::kFloat64 || t == DType::kInt64        ? 8
         : t == DType::kFloat16 || t == DType::kBFloat16     ? 2
                                                              : 1;
}
// float16 and bfloat16: stored in 16 bits, computed in float32 (kernels.h).
inline constexpr bool is_reduced_floating(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16;
}
inline constexpr bool is_floating(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || is_reduced_floating(t);
}
// The reference framework's promotion of two floating dtypes: the wider one, with float16
// and bfloat16 meeting in float32 (neither holds the other).
inline constexpr DType promote_floating(DType a, DType b) {
  return a == b                                         ? a
         : a == DType::kFloat64 || b == DType::kFloat64 ? DType::kFloat64
         : a == DType::kFloat32 || b == DType::kFloat32 ? DType::kFloat32
         : is_reduced_floating(a) && is_reduced_floating(b) ? DType::kFloat32
         : is_reduced_floating(a) ? a
                                  : b;
}
const char* dtype_name(DType t);

// 2^63 as a double: the first value above int64's range (-2^63 is its lowest value).
constexpr double kInt64Bound = 9223372036854775808.0;
// Whether `v` truncated toward zero is an int64 (NaN and infinities are not).
inline bool in_int64_range(double v) { return v >= -kInt64Bound && v < kInt64Bound; }
// Whether `v` is an integer that int64 holds exactly: what an int64 fill or an int64
// comparison with a double scalar needs so that nothing is rounded.
inline bool is_int64_value(double v) { return in_int64_range(v) && std::floor(v) == v; }
DType dtype_from_name(const std::string& name);
// Throws InternalError: a kernel's dtype dispatch met a dtype it does not compute in. Out
// of line, so that the per-level loops (kernels/host/loops.h) define no copy of it.
[[noreturn]] void unexpected_dtype(const char* where, DType t);
inline std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

// The C++ type of each dtype, for kernels and item<T>().
template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kFloat32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kFloat64;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kInt64;
};
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::kBool;
};

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_BASE_DTYPE_H_
