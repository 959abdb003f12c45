// compare, compare_scalar and where on the host: strided loops around the functors of
// kernels/functors/select_ops.h, with the op and dtypes chosen outside the element loop.
#include <cstdint>

#include "kernels/functors/select_ops.h"
#include "kernels/host/host_kernels.h"

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace {

// out[i] = op(a[i], b[i]) with a bool out and inputs of type T.
template <typename T, typename Op>
void compare_loop(const Layout<3>& l, void* out, const void* a, const void* b, Op op) {
  uint8_t* o0 = static_cast<uint8_t*>(out);
  const T* a0 = static_cast<const T*>(a);
  const T* b0 = static_cast<const T*>(b);
  for_each_row(l, [&](const int64_t* off, int64_t n, const int64_t* step) {
    uint8_t* o = o0 + off[0];
    const T* x = a0 + off[1];
    const T* y = b0 + off[2];
    for (int64_t i = 0; i < n; ++i) {
      o[i * step[0]] = op(compare_value(x[i * step[1]]), compare_value(y[i * step[2]]));
    }
  });
}

// out[i] = op(in[i], s) for a scalar s of type S.
template <typename T, typename S, typename Op>
void compare_scalar_loop(const Layout<2>& l, void* out, const void* in, S s, Op op) {
  uint8_t* o0 = static_cast<uint8_t*>(out);
  const T* x0 = static_cast<const T*>(in);
  for_each_row(l, [&](const int64_t* off, int64_t n, const int64_t* step) {
    uint8_t* o = o0 + off[0];
    const T* x = x0 + off[1];
    if (step[0] == 1 && step[1] == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = op(compare_value(x[i]), s);
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * step[0]] = op(compare_value(x[i * step[1]]), s);
    }
  });
}

template <typename T>
void where_loop(const Layout<4>& l, void* out, const void* condition, const void* a,
                const void* b) {
  T* o0 = static_cast<T*>(out);
  const uint8_t* c0 = static_cast<const uint8_t*>(condition);
  const T* a0 = static_cast<const T*>(a);
  const T* b0 = static_cast<const T*>(b);
  const SelectOp select;
  for_each_row(l, [&](const int64_t* off, int64_t n, const int64_t* step) {
    T* o = o0 + off[0];
    const uint8_t* c = c0 + off[1];
    const T* x = a0 + off[2];
    const T* y = b0 + off[3];
    for (int64_t i = 0; i < n; ++i) {
      o[i * step[0]] = select(c[i * step[1]], x[i * step[2]], y[i * step[3]]);
    }
  });
}

}  // namespace

void compare(const Stream& stream, const LaunchSpec& spec, Compare op, DType dt,
             const Layout<3>& layout, void* o, const void* pa, const void* pb) {
  dispatch::enqueue(
      stream, spec,
      [op, o, pa, pb, dt](const Layout<3>& l) {
        dispatch_any(dt, [&](auto t) {
          with_compare(op, [&](auto f) { compare_loop<decltype(t)>(l, o, pa, pb, f); });
        });
      },
      layout);
}

void compare_scalar(const Stream& stream, const LaunchSpec& spec, Compare op, DType dt,
                    const Layout<2>& layout, void* o, const void* x, double scalar) {
  dispatch::enqueue(
      stream, spec,
      [op, o, x, dt, scalar](const Layout<2>& l) {
        dispatch_any(dt, [&](auto t) {
          using T = decltype(t);
          with_compare(op, [&](auto f) {
            with_compare_scalar<T>(scalar,
                                   [&](auto sv) { compare_scalar_loop<T>(l, o, x, sv, f); });
          });
        });
      },
      layout);
}

void where(const Stream& stream, const LaunchSpec& spec, DType dt, const Layout<4>& layout,
           void* o, const void* pc, const void* pa, const void* pb) {
  dispatch::enqueue(
      stream, spec,
      [o, pc, pa, pb, dt](const Layout<4>& l) {
        dispatch_all(dt, [&](auto t) { where_loop<decltype(t)>(l, o, pc, pa, pb); });
      },
      layout);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad
