// The per-element math of the comparison and selection kernels (compare, compare_scalar,
// where in kernels.h), as SG_HOST_DEVICE functors: the cpu loops in kernels/select.cc
// and the cuda kernels (kernels/cuda) call them, with_compare and with_compare_scalar
// choosing functor and scalar type for both, so that both devices agree element for
// element.
//
// bool elements are bytes; any non-zero byte is true (bool_value), so a mask written by
// any kernel compares and selects the same way.
// Thread-safety: stateless values. Failure: none.
#ifndef STREAMGRAD_KERNELS_FUNCTORS_SELECT_OPS_H_
#define STREAMGRAD_KERNELS_FUNCTORS_SELECT_OPS_H_

#include <cstdint>
#include <type_traits>

#include "kernels/op_codes.h"
#include "runtime/base/dtype.h"
#include "runtime/base/host_device.h"

namespace streamgrad {
namespace kernels {

// How a comparison reads an element: bool bytes become 0 or 1, other types are as stored.
template <typename T>
SG_HOST_DEVICE inline T compare_value(T v) {
  return v;
}
SG_HOST_DEVICE inline uint8_t compare_value(uint8_t v) { return v != 0 ? 1 : 0; }

// Comparisons return 1 or 0 (a bool byte). NaN compares false under every one but Ne, as
// IEEE 754 and PyTorch have it. Mixed operand types (an int64 element against a double
// scalar) compare after the usual arithmetic conversions.
struct EqOp {
  template <typename A, typename B>
  SG_HOST_DEVICE uint8_t operator()(A a, B b) const { return a == b ? 1 : 0; }
};
struct NeOp {
  template <typename A, typename B>
  SG_HOST_DEVICE uint8_t operator()(A a, B b) const { return a != b ? 1 : 0; }
};
struct LtOp {
  template <typename A, typename B>
  SG_HOST_DEVICE uint8_t operator()(A a, B b) const { return a < b ? 1 : 0; }
};
struct LeOp {
  template <typename A, typename B>
  SG_HOST_DEVICE uint8_t operator()(A a, B b) const { return a <= b ? 1 : 0; }
};
struct GtOp {
  template <typename A, typename B>
  SG_HOST_DEVICE uint8_t operator()(A a, B b) const { return a > b ? 1 : 0; }
};
struct GeOp {
  template <typename A, typename B>
  SG_HOST_DEVICE uint8_t operator()(A a, B b) const { return a >= b ? 1 : 0; }
};

// where(condition, a, b): a where the condition byte is non-zero, else b. Only the chosen
// value is read into the result, so a NaN or inf in the other operand never reaches it.
struct SelectOp {
  template <typename T>
  SG_HOST_DEVICE T operator()(uint8_t condition, T a, T b) const {
    return condition != 0 ? a : b;
  }
};

// Host code, run once per launch: fn(functor) with the functor of `op`.
template <typename Fn>
inline void with_compare(Compare op, Fn&& fn) {
  switch (op) {
    case Compare::kEq: return fn(EqOp{});
    case Compare::kNe: return fn(NeOp{});
    case Compare::kLt: return fn(LtOp{});
    case Compare::kLe: return fn(LeOp{});
    case Compare::kGt: return fn(GtOp{});
    case Compare::kGe: return fn(GeOp{});
  }
}

// Host code: fn(s) with compare_scalar's scalar in the type elements of type T compare
// against. Floating elements: the scalar rounded to T (as a float32 tensor op in PyTorch).
// int64 and bool: an integral scalar as int64 (no rounding of large elements); a
// fractional one as double, which is below 2^52 in magnitude, so converting the elements
// cannot move one across it: exact either way.
template <typename T, typename Fn>
inline void with_compare_scalar(double scalar, Fn&& fn) {
  if constexpr (std::is_floating_point<T>::value) {
    fn(static_cast<T>(scalar));
  } else if (is_int64_value(scalar)) {
    fn(static_cast<int64_t>(scalar));
  } else {
    fn(scalar);
  }
}

}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_FUNCTORS_SELECT_OPS_H_
