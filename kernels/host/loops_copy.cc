// The fill and copy loops of one instruction-set level (see loops.h): contiguous rows in
// loops the compiler vectorises (a same-dtype copy is memcpy, which the C library already
// dispatches by CPU), strided rows element by element.
#include <string.h>

#include "kernels/functors/convert.h"
#include "kernels/host/loops.h"

#ifndef SG_CPU_LEVEL
#error "compile this file through a loops_<level> target, which defines SG_CPU_LEVEL"
#endif

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace SG_CPU_LEVEL {
namespace {

template <typename T>
void fill_rows(const Layout<1>& l, T* o0, T value, int64_t begin, int64_t end) {
  for_each_row_range(l, begin, end, [&](const int64_t* off, int64_t n, const int64_t* step) {
    T* o = o0 + off[0];
    if (step[0] == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = value;
    } else {
      const int64_t so = step[0];
      for (int64_t i = 0; i < n; ++i) o[i * so] = value;
    }
  });
}

template <typename To, typename From>
void convert_row(To* __restrict o, const From* __restrict x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = convert<To>(x[i]);
}

template <typename To, typename From>
void copy_rows(const Layout<2>& l, void* out, const void* in, int64_t begin, int64_t end) {
  To* const o0 = static_cast<To*>(out);
  const From* const x0 = static_cast<const From*>(in);
  for_each_row_range(l, begin, end, [&](const int64_t* off, int64_t n, const int64_t* step) {
    To* o = o0 + off[0];
    const From* x = x0 + off[1];
    if (step[0] == 1 && step[1] == 1) {
      const uintptr_t po = reinterpret_cast<uintptr_t>(o), px = reinterpret_cast<uintptr_t>(x);
      if constexpr (std::is_same<To, From>::value) {
        // A copy onto itself has nothing to do.
        if (po == px) return;
      }
      const bool disjoint = po + static_cast<uintptr_t>(n) * sizeof(To) <= px ||
                            px + static_cast<uintptr_t>(n) * sizeof(From) <= po;
      if (disjoint) {
        if constexpr (std::is_same<To, From>::value) {
          memcpy(o, x, static_cast<size_t>(n) * sizeof(To));
        } else {
          convert_row(o, x, n);
        }
        return;
      }
      // Other overlap is undefined in kernels.h: element by element, in order.
    }
    const int64_t so = step[0], sx = step[1];
    for (int64_t i = 0; i < n; ++i) o[i * so] = convert<To>(x[i * sx]);
  });
}

}  // namespace

void fill(DType dt, const Layout<1>& l, void* out, double value, int64_t begin, int64_t end) {
  dispatch_all(dt, [&](auto t) {
    using T = decltype(t);
    fill_rows<T>(l, static_cast<T*>(out), convert<T>(value), begin, end);
  });
}

void copy(DType to, DType from, const Layout<2>& l, void* out, const void* in, int64_t begin,
          int64_t end) {
  dispatch_all(to, [&](auto t) {
    dispatch_all(from, [&](auto f) {
      copy_rows<decltype(t), decltype(f)>(l, out, in, begin, end);
    });
  });
}

}  // namespace SG_CPU_LEVEL
}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad
