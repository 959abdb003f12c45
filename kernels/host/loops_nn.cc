// The loops of the neural-network kernels (max pooling, batch, layer and RMS
// normalisation) of one instruction-set level (see loops.h for the flags and the rules
// this file keeps).
//
// The 2x2 max-pool row is here rather than in pool.cc because it needs the level: its
// stride-2 loads vectorise with AVX2 and AVX-512 permutes but not at the baseline level.
// The batch-norm sums use 16 double lanes folded as sum_block folds them, so every level
// gives the same bits.
#include "kernels/host/lanes.h"
#include "kernels/host/loops.h"
#include "kernels/functors/norm_ops.h"
#include "kernels/functors/optim_ops.h"

#if defined(SG_CPU_LEVEL_AVX512) && defined(__AVX512F__)
#include <immintrin.h>
#define SG_POOL_AVX512 1
#endif

#ifndef SG_CPU_LEVEL
#error "compile this file through a loops_<level> target, which defines SG_CPU_LEVEL"
#endif

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace SG_CPU_LEVEL {
namespace {

using lanes::kLanes;

// Tap v, numbered `code` in its window, replaces the winner so far when it is larger or
// the first NaN; ties keep the earlier tap.
template <typename T, typename I>
SG_INLINE void offer(T v, I code, T& best, I& at) {
  const bool take = (v > best) || (v != v && best == best);
  best = take ? v : best;
  at = take ? code : at;
}

// The code is as wide as T (int32 for float) so that values and codes fill vectors of
// the same lane count; the index is built from it once per output.
template <typename T, typename I>
void pool_row_2x2(const T* __restrict top, const T* __restrict bottom, int64_t ow,
                  T* __restrict values, int64_t* __restrict indices, int64_t first,
                  int64_t width) {
  for (int64_t j = 0; j < ow; ++j) {
    T best = top[2 * j];
    I at = 0;
    offer(top[2 * j + 1], I(1), best, at);
    offer(bottom[2 * j], I(2), best, at);
    offer(bottom[2 * j + 1], I(3), best, at);
    values[j] = best;
    indices[j] = first + 2 * j + (at & 1) + (at >> 1) * width;
  }
}

// Element i goes to lane i % 16, as in sum_block (lanes.h).
template <typename T>
double centred_squares_lanes(const T* p, int64_t n, T mean) {
  lanes::Lanes l;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    lanes::Double8 d0, d1;
    lanes::load_centred(d0, p + i, mean);
    lanes::load_centred(d1, p + i + 8, mean);
    l.add_products(d0, d0, d1, d1);
  }
  return lanes::finish(l, n - i, [&](int j) {
    const double d = static_cast<double>(p[i + j] - mean);
    return d * d;
  });
}

template <typename T>
void grad_sums_lanes(const T* g, const T* x, int64_t n, T mean, double* sum_g, double* sum_gc) {
  lanes::Lanes lg, lgc;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    lanes::Double8 g0, g1, c0, c1;
    lanes::load(g0, g + i);
    lanes::load(g1, g + i + 8);
    lanes::load_centred(c0, x + i, mean);
    lanes::load_centred(c1, x + i + 8, mean);
    lg.add(g0, g1);
    lgc.add_products(g0, c0, g1, c1);
  }
  *sum_g += lanes::finish(lg, n - i, [&](int j) { return static_cast<double>(g[i + j]); });
  *sum_gc += lanes::finish(lgc, n - i, [&](int j) {
    return static_cast<double>(g[i + j]) * static_cast<double>(x[i + j] - mean);
  });
}

template <typename T>
void apply_row(T* __restrict out, const T* __restrict in, int64_t n, const double* c) {
  const BatchNormApply<T> f{static_cast<T>(c[0]), static_cast<T>(c[1]), static_cast<T>(c[2]),
                            static_cast<T>(c[3])};
  for (int64_t i = 0; i < n; ++i) out[i] = f(in[i]);
}

template <typename T>
void input_grad_row(T* __restrict out, const T* __restrict g, const T* __restrict x, int64_t n,
                    const double* c) {
  const BatchNormInputGrad<T> f{static_cast<T>(c[0]), static_cast<T>(c[1]),
                                static_cast<T>(c[2]), static_cast<T>(c[3]),
                                static_cast<T>(c[4])};
  for (int64_t i = 0; i < n; ++i) out[i] = f(g[i], x[i]);
}

template <typename T, bool kWeight, bool kBias>
void layer_norm_row(T* __restrict out, const T* __restrict in, const T* __restrict weight,
                    const T* __restrict bias, int64_t n, T mean, T rstd) {
  const LayerNormApply<T> f{mean, rstd};
  for (int64_t i = 0; i < n; ++i) {
    T y = f(in[i]);
    if (kWeight) y = y * weight[i];
    if (kBias) y = y + bias[i];
    out[i] = y;
  }
}

template <typename T>
void layer_norm_row_any(T* out, const T* in, const T* weight, const T* bias, int64_t n,
                        double mean, double rstd) {
  const T m = static_cast<T>(mean), r = static_cast<T>(rstd);
  if (weight != nullptr && bias != nullptr) {
    layer_norm_row<T, true, true>(out, in, weight, bias, n, m, r);
  } else if (weight != nullptr) {
    layer_norm_row<T, true, false>(out, in, weight, bias, n, m, r);
  } else if (bias != nullptr) {
    layer_norm_row<T, false, true>(out, in, weight, bias, n, m, r);
  } else {
    layer_norm_row<T, false, false>(out, in, weight, bias, n, m, r);
  }
}

template <typename T>
void layer_norm_grad_row(T* __restrict out, const T* __restrict gw, const T* __restrict x,
                         int64_t n, const double* c) {
  const LayerNormInputGrad<T> f{static_cast<T>(c[0]), static_cast<T>(c[1]),
                                static_cast<T>(c[2]), static_cast<T>(c[3])};
  for (int64_t i = 0; i < n; ++i) out[i] = f(gw[i], x[i]);
}

// layer_norm_param_block, 16 columns at a time: each column's two sums stay in registers
// over the block's rows and are stored once, where a row at a time loaded and stored both
// for every row. Each column adds its rows in row order, from +0, as that loop did, so
// the bits are the same.
template <typename T, bool kWeight, bool kBias>
void param_block(double* __restrict acc_w, double* __restrict acc_b, const T* g, const T* x,
                 const T* mean, const T* rstd, int64_t rows, int64_t n) {
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    lanes::Lanes aw, ab;
    for (int64_t r = 0; r < rows; ++r) {
      const T* gr = g + r * n + j;
      lanes::Double8 g0, g1;
      lanes::load(g0, gr);
      lanes::load(g1, gr + 8);
      if (kWeight) {
        const T* xr = x + r * n + j;
        const T m = mean != nullptr ? mean[r] : T(0);
        lanes::Double8 f0, f1;
        lanes::load_normalised(f0, xr, m, rstd[r]);
        lanes::load_normalised(f1, xr + 8, m, rstd[r]);
        aw.add_products(g0, f0, g1, f1);
      }
      if (kBias) ab.add(g0, g1);
    }
    if (kWeight) aw.store(acc_w + j);
    if (kBias) ab.store(acc_b + j);
  }
  for (; j < n; ++j) {
    double sw = 0, sb = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const T gv = g[r * n + j];
      if (kWeight) {
        const T m = mean != nullptr ? mean[r] : T(0);
        const LayerNormApply<T> f{m, rstd[r]};
        sw += static_cast<double>(gv) * static_cast<double>(f(x[r * n + j]));
      }
      if (kBias) sb += static_cast<double>(gv);
    }
    if (kWeight) acc_w[j] = sw;
    if (kBias) acc_b[j] = sb;
  }
}

template <typename T>
void param_block_any(double* acc_w, double* acc_b, const void* g, const void* x,
                     const void* mean, const void* rstd, int64_t rows, int64_t n) {
  if (acc_w == nullptr && acc_b == nullptr) return;
  const auto block = acc_w == nullptr   ? param_block<T, false, true>
                     : acc_b == nullptr ? param_block<T, true, false>
                                        : param_block<T, true, true>;
  block(acc_w, acc_b, static_cast<const T*>(g), static_cast<const T*>(x),
        static_cast<const T*>(mean), static_cast<const T*>(rstd), rows, n);
}

// gw = g * w written, then grad_sums_lanes over it (in L1 by then).
template <typename T>
void scaled_grad_sums_typed(void* gw, const void* g, const void* w, const void* x, int64_t n,
                            double mean, double* sum_gw, double* sum_gwc) {
  T* __restrict out = static_cast<T*>(gw);
  const T* __restrict gp = static_cast<const T*>(g);
  const T* __restrict wp = static_cast<const T*>(w);
  for (int64_t i = 0; i < n; ++i) out[i] = gp[i] * wp[i];
  grad_sums_lanes(out, static_cast<const T*>(x), n, static_cast<T>(mean), sum_gw, sum_gwc);
}

#if defined(SG_POOL_AVX512)
// The float32 row in explicit AVX-512: pooling rows are short (14 and 7 outputs in the
// tools/train cnn), shorter than the vectoriser's 16-lane loop, whose scalar remainder
// branches on the data. Here every 16 outputs, remainder included, are masked vector
// code: even and odd columns split by permutes, the same offers in the same order.
SG_INLINE void offer16(__m512 v, int code, __m512& best, __m512i& at) {
  const __mmask16 take = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) |
                         (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) &
                          _mm512_cmp_ps_mask(best, best, _CMP_ORD_Q));
  best = _mm512_mask_mov_ps(best, take, v);
  at = _mm512_mask_mov_epi32(at, take, _mm512_set1_epi32(code));
}

// The 2n floats at p (n <= 16) as their even and odd elements.
SG_INLINE void split_pairs(const float* p, int64_t n, __m512& even, __m512& odd) {
  const int64_t lo = n >= 8 ? 16 : 2 * n, hi = n > 8 ? 2 * n - 16 : 0;
  const __m512 a = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << lo) - 1), p);
  const __m512 b = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << hi) - 1), p + 16);
  const __m512i evens = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odds = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  even = _mm512_permutex2var_ps(a, evens, b);
  odd = _mm512_permutex2var_ps(a, odds, b);
}

// first + 2 * (j + lane) + (code & 1) + (code >> 1) * width for 8 lanes of codes.
SG_INLINE __m512i flat_index8(__m256i code, int64_t base) {
  const __m512i c = _mm512_cvtepi32_epi64(code);
  const __m512i lane2 = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0);
  return _mm512_add_epi64(_mm512_add_epi64(_mm512_set1_epi64(base), lane2),
                          _mm512_and_si512(c, _mm512_set1_epi64(1)));
}

void pool_row_2x2_avx512(const float* top, const float* bottom, int64_t ow, float* values,
                         int64_t* indices, int64_t first, int64_t width) {
  for (int64_t j = 0; j < ow; j += 16) {
    const int64_t n = ow - j < 16 ? ow - j : 16;
    __m512 tl, tr, bl, br;
    split_pairs(top + 2 * j, n, tl, tr);
    split_pairs(bottom + 2 * j, n, bl, br);
    __m512 best = tl;
    __m512i at = _mm512_setzero_si512();
    offer16(tr, 1, best, at);
    offer16(bl, 2, best, at);
    offer16(br, 3, best, at);
    const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
    _mm512_mask_storeu_ps(values + j, m, best);
    // The bottom row's codes (2, 3) add a row of width.
    const __mmask16 low = _mm512_cmplt_epi32_mask(at, _mm512_set1_epi32(2));
    for (int half = 0; half < 2; ++half) {
      const __m256i code = half == 0 ? _mm512_castsi512_si256(at)
                                     : _mm512_extracti64x4_epi64(at, 1);
      const __mmask8 bottom_row = static_cast<__mmask8>(~(low >> (8 * half)));
      __m512i idx = flat_index8(code, first + 2 * (j + 8 * half));
      idx = _mm512_mask_add_epi64(idx, bottom_row, idx, _mm512_set1_epi64(width));
      const int64_t left = n - 8 * half;
      if (left <= 0) break;
      const __mmask8 store = static_cast<__mmask8>(left >= 8 ? 0xff : (1u << left) - 1);
      _mm512_mask_storeu_epi64(indices + j + 8 * half, store, idx);
    }
  }
}
#endif

void max_pool_2x2(DType dt, const void* top, const void* bottom, int64_t ow, void* values,
                  int64_t* indices, int64_t first, int64_t width) {
#if defined(SG_POOL_AVX512)
  if (dt == DType::kFloat32) {
    pool_row_2x2_avx512(static_cast<const float*>(top), static_cast<const float*>(bottom), ow,
                        static_cast<float*>(values), indices, first, width);
    return;
  }
#endif
  if (dt == DType::kFloat32) {
    pool_row_2x2<float, int32_t>(static_cast<const float*>(top),
                                 static_cast<const float*>(bottom), ow,
                                 static_cast<float*>(values), indices, first, width);
  } else {
    pool_row_2x2<double, int64_t>(static_cast<const double*>(top),
                                  static_cast<const double*>(bottom), ow,
                                  static_cast<double*>(values), indices, first, width);
  }
}

double centred_squares(DType dt, const void* p, int64_t n, double mean) {
  if (dt == DType::kFloat32) {
    return centred_squares_lanes(static_cast<const float*>(p), n, static_cast<float>(mean));
  }
  return centred_squares_lanes(static_cast<const double*>(p), n, mean);
}

void grad_sums(DType dt, const void* g, const void* x, int64_t n, double mean, double* sum_g,
               double* sum_gc) {
  if (dt == DType::kFloat32) {
    grad_sums_lanes(static_cast<const float*>(g), static_cast<const float*>(x), n,
                    static_cast<float>(mean), sum_g, sum_gc);
  } else {
    grad_sums_lanes(static_cast<const double*>(g), static_cast<const double*>(x), n, mean,
                    sum_g, sum_gc);
  }
}

void batch_norm_apply(DType dt, void* out, const void* in, int64_t n, const double* c) {
  if (dt == DType::kFloat32) {
    apply_row(static_cast<float*>(out), static_cast<const float*>(in), n, c);
  } else {
    apply_row(static_cast<double*>(out), static_cast<const double*>(in), n, c);
  }
}

void batch_norm_input_grad(DType dt, void* out, const void* g, const void* x, int64_t n,
                           const double* c) {
  if (dt == DType::kFloat32) {
    input_grad_row(static_cast<float*>(out), static_cast<const float*>(g),
                   static_cast<const float*>(x), n, c);
  } else {
    input_grad_row(static_cast<double*>(out), static_cast<const double*>(g),
                   static_cast<const double*>(x), n, c);
  }
}

void layer_norm_apply(DType dt, void* out, const void* in, const void* weight,
                      const void* bias, int64_t n, double mean, double rstd) {
  if (dt == DType::kFloat32) {
    layer_norm_row_any(static_cast<float*>(out), static_cast<const float*>(in),
                       static_cast<const float*>(weight), static_cast<const float*>(bias), n,
                       mean, rstd);
  } else {
    layer_norm_row_any(static_cast<double*>(out), static_cast<const double*>(in),
                       static_cast<const double*>(weight), static_cast<const double*>(bias), n,
                       mean, rstd);
  }
}

void layer_norm_input_grad(DType dt, void* out, const void* gw, const void* x, int64_t n,
                           const double* c) {
  if (dt == DType::kFloat32) {
    layer_norm_grad_row(static_cast<float*>(out), static_cast<const float*>(gw),
                        static_cast<const float*>(x), n, c);
  } else {
    layer_norm_grad_row(static_cast<double*>(out), static_cast<const double*>(gw),
                        static_cast<const double*>(x), n, c);
  }
}

void layer_norm_param_block(DType dt, double* acc_w, double* acc_b, const void* g,
                            const void* x, const void* mean, const void* rstd, int64_t rows,
                            int64_t n) {
  if (dt == DType::kFloat32) {
    param_block_any<float>(acc_w, acc_b, g, x, mean, rstd, rows, n);
  } else {
    param_block_any<double>(acc_w, acc_b, g, x, mean, rstd, rows, n);
  }
}

void scaled_grad_sums(DType dt, void* gw, const void* g, const void* weight, const void* x,
                      int64_t n, double mean, double* sum_gw, double* sum_gwc) {
  if (dt == DType::kFloat32) {
    scaled_grad_sums_typed<float>(gw, g, weight, x, n, mean, sum_gw, sum_gwc);
  } else {
    scaled_grad_sums_typed<double>(gw, g, weight, x, n, mean, sum_gw, sum_gwc);
  }
}

// The flags made constants, so that each loop has no branch and vectorises.
template <typename T, bool kDecay, bool kDecoupled>
void adam_loop(AdamUpdate<T> f, T* __restrict p, const T* __restrict g, T* __restrict m,
               T* __restrict v, int64_t n, T inv, T step) {
  f.decay = kDecay;
  f.decoupled = kDecoupled;
  for (int64_t i = 0; i < n; ++i) p[i] = f(p[i], g[i], m[i], v[i], inv, step);
}

template <typename T>
void adam_typed(const AdamUpdate<T>& f, T* p, const T* g, T* m, T* v, int64_t n, T inv,
                T step) {
  if (!f.decay) {
    adam_loop<T, false, false>(f, p, g, m, v, n, inv, step);
  } else if (f.decoupled) {
    adam_loop<T, true, true>(f, p, g, m, v, n, inv, step);
  } else {
    adam_loop<T, true, false>(f, p, g, m, v, n, inv, step);
  }
}

void adam_row(DType dt, const void* op, void* p, const void* g, void* m, void* v, int64_t n,
              double inv_sqrt_bias2, double neg_step) {
  if (dt == DType::kFloat32) {
    adam_typed(*static_cast<const AdamUpdate<float>*>(op), static_cast<float*>(p),
               static_cast<const float*>(g), static_cast<float*>(m), static_cast<float*>(v), n,
               static_cast<float>(inv_sqrt_bias2), static_cast<float>(neg_step));
  } else {
    adam_typed(*static_cast<const AdamUpdate<double>*>(op), static_cast<double*>(p),
               static_cast<const double*>(g), static_cast<double*>(m), static_cast<double*>(v),
               n, inv_sqrt_bias2, neg_step);
  }
}

}  // namespace

extern const NnLoops kNnLoops = {
    max_pool_2x2,          centred_squares,       grad_sums,
    batch_norm_apply,      batch_norm_input_grad, layer_norm_apply,
    layer_norm_input_grad, layer_norm_param_block, scaled_grad_sums,
    adam_row,
};

}  // namespace SG_CPU_LEVEL
}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad
