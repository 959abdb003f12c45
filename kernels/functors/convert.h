// Internal to the kernels: the element conversion of copy and fill (kernels.h), one
// always-inlined function used by every level's loops, by the transposing copy and by the
// cuda copy kernel (kernels/cuda), so that every device converts alike.
//
// Every conversion is defined: bool is a byte and becomes 0/1; to bool is x != 0; floating
// to int64 truncates toward zero, saturates at the int64 range and maps NaN to 0 (C++
// leaves those undefined, and a kernel must not be). float16 and bfloat16 go through
// float32 both ways: from them exactly, to them rounded once from a float32 value (from
// float64 or int64 that float32 is itself rounded first, as the reference framework's
// Half(double) does).
// Thread-safety: a pure function. Failure: none.
#ifndef STREAMGRAD_KERNELS_FUNCTORS_CONVERT_H_
#define STREAMGRAD_KERNELS_FUNCTORS_CONVERT_H_

#include <stdint.h>

#include <type_traits>

#include "runtime/base/dtype.h"
#include "runtime/base/half.h"
#include "runtime/base/host_device.h"

namespace streamgrad {
namespace kernels {
namespace cpu {

// INT64_MIN/MAX rather than std::numeric_limits: a non-optimised build would emit the
// latter's functions once per level (see SG_INLINE).
template <typename T>
struct IsReduced {
  static constexpr bool value = std::is_same<T, Half>::value || std::is_same<T, BFloat16>::value;
};

// What an element of storage type S computes in: float for float16 and bfloat16, S
// otherwise. A kernel that loads and stores 16-bit elements itself with convert's
// conversions and computes in this type gives the bits the widening rule would
// (kernels/widen.h: copies to float32, the float32 kernel, one rounding) in one launch
// (cuda's element-wise and batch norm kernels, the host's batch norm).
template <typename S>
struct ComputeIn {
  using type = typename std::conditional<IsReduced<S>::value, float, S>::type;
};

template <typename To, typename From>
SG_HOST_DEVICE SG_INLINE To convert(From v) {
  if constexpr (IsReduced<From>::value) {
    if constexpr (std::is_same<To, From>::value) {
      return v;
    } else {
      return convert<To>(v.to_float());
    }
  } else if constexpr (IsReduced<To>::value) {
    return To::from_float(convert<float>(v));
  } else if constexpr (std::is_same<To, uint8_t>::value) {
    return v != From(0) ? 1 : 0;
  } else if constexpr (std::is_same<From, uint8_t>::value) {
    return v != 0 ? To(1) : To(0);
  } else if constexpr (std::is_same<To, int64_t>::value &&
                       std::is_floating_point<From>::value) {
    if (!(v == v)) return 0;
    if (v >= From(kInt64Bound)) return INT64_MAX;
    if (v < -From(kInt64Bound)) return INT64_MIN;
    return static_cast<int64_t>(v);
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_FUNCTORS_CONVERT_H_
