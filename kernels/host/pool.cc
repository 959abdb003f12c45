// max_pool2d and max_pool2d_backward on the host (kernels/nn_kernels.h).
//
// The forward picks each window's winner without a branch (which tap wins depends on the
// data, so a branch would be mispredicted half the time). The 2x2 stride-2 window, most
// networks' pooling, has its own loop (loops_nn.cc): four loads per output, no tap
// bookkeeping, vector code at the AVX2 and AVX-512 levels.
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/host/host_kernels.h"
#include "kernels/host/loops.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace {

// The taps of output position o's window along dim d that fall inside [0, in): the range
// [first_tap, end_tap), so that the inner loops need no bounds checks.
int64_t first_tap(int64_t o, const Window2d& w, int d) {
  int64_t k = 0;
  while (k < w.kernel[d] &&
         window_input_index(o, k, w.stride[d], w.padding[d], w.dilation[d]) < 0) {
    ++k;
  }
  return k;
}
int64_t end_tap(int64_t o, const Window2d& w, int d, int64_t in) {
  int64_t k = w.kernel[d];
  while (k > 0 && window_input_index(o, k - 1, w.stride[d], w.padding[d], w.dilation[d]) >= in) {
    --k;
  }
  return k;
}

// take ? a : b through bit masks, so that the compiler emits no branch for it.
template <typename T>
T select(bool take, T a, T b) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  Bits x, y;
  std::memcpy(&x, &a, sizeof(T));
  std::memcpy(&y, &b, sizeof(T));
  const Bits mask = static_cast<Bits>(0) - static_cast<Bits>(take);
  const Bits r = (x & mask) | (y & ~mask);
  T out;
  std::memcpy(&out, &r, sizeof(T));
  return out;
}

struct PoolShape {
  int64_t planes, h, w, oh, ow;
};

// Every window 2x2, stride 2, inside the image: a row of outputs at a time from the
// level's vector loop.
template <typename T>
void max_pool_2x2(const NnLoops& nl, DType dt, const PoolShape& s, const T* img, T* val,
                  int64_t* idx) {
  for (int64_t p = 0; p < s.planes; ++p) {
    const T* plane = img + p * s.h * s.w;
    for (int64_t oi = 0; oi < s.oh; ++oi) {
      const int64_t r0 = 2 * oi * s.w;
      const int64_t o = (p * s.oh + oi) * s.ow;
      nl.max_pool_2x2(dt, plane + r0, plane + r0 + s.w, s.ow, val + o, idx + o, r0, s.w);
    }
  }
}

// Any window: each output row's and column's taps inside the image are found once.
template <typename T>
void max_pool_any(const PoolShape& s, const Window2d& w, const T* img, T* val, int64_t* idx) {
  std::vector<int64_t> row_taps(2 * s.oh), col_taps(2 * s.ow);
  for (int64_t oi = 0; oi < s.oh; ++oi) {
    row_taps[2 * oi] = first_tap(oi, w, 0);
    row_taps[2 * oi + 1] = end_tap(oi, w, 0, s.h);
  }
  for (int64_t oj = 0; oj < s.ow; ++oj) {
    col_taps[2 * oj] = first_tap(oj, w, 1);
    col_taps[2 * oj + 1] = end_tap(oj, w, 1, s.w);
  }
  const int64_t dr = w.dilation[0] * s.w, dc = w.dilation[1];
  for (int64_t p = 0; p < s.planes; ++p) {
    const T* plane = img + p * s.h * s.w;
    for (int64_t oi = 0; oi < s.oh; ++oi) {
      const int64_t ki0 = row_taps[2 * oi], ki1 = row_taps[2 * oi + 1];
      const int64_t row0 =
          window_input_index(oi, ki0, w.stride[0], w.padding[0], w.dilation[0]) * s.w;
      for (int64_t oj = 0; oj < s.ow; ++oj) {
        const int64_t kj0 = col_taps[2 * oj], kj1 = col_taps[2 * oj + 1];
        const int64_t col0 = window_input_index(oj, kj0, w.stride[1], w.padding[1], w.dilation[1]);
        T best = -std::numeric_limits<T>::infinity();
        int64_t at = -1;
        for (int64_t ki = ki0, r = row0; ki < ki1; ++ki, r += dr) {
          for (int64_t kj = kj0, i = r + col0; kj < kj1; ++kj, i += dc) {
            const T v = plane[i];
            // The first tap, a larger one, or the first NaN.
            const bool take = (at < 0) | (v > best) | ((v != v) & (best == best));
            const int64_t mask = -static_cast<int64_t>(take);
            at = (i & mask) | (at & ~mask);
            best = select(take, v, best);
          }
        }
        const int64_t o = (p * s.oh + oi) * s.ow + oj;
        val[o] = best;
        idx[o] = at;
      }
    }
  }
}

bool is_2x2_inside(const PoolShape& s, const Window2d& w) {
  for (int d = 0; d < 2; ++d) {
    if (w.kernel[d] != 2 || w.stride[d] != 2 || w.padding[d] != 0 || w.dilation[d] != 1) {
      return false;
    }
  }
  return 2 * s.oh <= s.h && 2 * s.ow <= s.w;  // ceil_mode's last window may stick out
}

}  // namespace

void max_pool2d(const Stream& stream, const LaunchSpec& spec, DType dt, const ImageShape& cs,
                const Window2d& w, void* vo, int64_t* io, const void* x) {
  const PoolShape s{cs.channels, cs.height, cs.width, cs.oh, cs.ow};
  const bool fast = is_2x2_inside(s, w);
  dispatch::enqueue(stream, spec, [s, w, fast, nl = &nn_loops(), vo, io, x, dt] {
    dispatch_floating(dt, [&](auto t) {
      using T = decltype(t);
      T* val = static_cast<T*>(vo);
      int64_t* idx = static_cast<int64_t*>(io);
      const T* img = static_cast<const T*>(x);
      if (fast) {
        max_pool_2x2(*nl, dt, s, img, val, idx);
      } else {
        max_pool_any(s, w, img, val, idx);
      }
    });
  });
}

void max_pool2d_backward(const Stream& stream, const LaunchSpec& spec, DType dt,
                         const ImageShape& cs, const Window2d&, void* gi, const void* go,
                         const int64_t* ix) {
  const char* name = "max_pool2d_backward";
  const int64_t planes = cs.channels, area = cs.height * cs.width;
  const int64_t per_plane = cs.oh * cs.ow;
  dispatch::enqueue(stream, spec, [=] {
    const int64_t* idx = ix;
    // Every index is checked before anything is written: a bad one (the indices were
    // changed behind the autograd's back) must not write outside the plane.
    int64_t bad = 0;
    for (int64_t i = 0; i < planes * per_plane; ++i) {
      bad |= static_cast<int64_t>(idx[i] < 0) | static_cast<int64_t>(idx[i] >= area);
    }
    if (bad != 0) {
      for (int64_t i = 0; i < planes * per_plane; ++i) {
        SG_CHECK(idx[i] >= 0 && idx[i] < area, ValueError, name, ": index ", idx[i],
                 " (element ", i, " of indices) is outside its plane of ", area,
                 " positions; were the indices modified after the forward?");
      }
    }
    dispatch_floating(dt, [&](auto t) {
      using T = decltype(t);
      T* gin = static_cast<T*>(gi);
      const T* g = static_cast<const T*>(go);
      std::memset(gin, 0, sizeof(T) * planes * area);
      // One thread in a fixed order: overlapping windows sum deterministically.
      for (int64_t p = 0; p < planes; ++p) {
        T* plane = gin + p * area;
        const int64_t* ip = idx + p * per_plane;
        const T* gp = g + p * per_plane;
        for (int64_t o = 0; o < per_plane; ++o) plane[ip[o]] += gp[o];
      }
    });
  });
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad
