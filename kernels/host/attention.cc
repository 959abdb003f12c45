// attention_forward / attention_backward on the host (kernels/nn_kernels.h): each head by
// one thread, its products through gemm (single-threaded inside a parallel chunk), its
// softmax rows in between. The [Tq, Tk] scores and probabilities live in one scratch
// buffer per thread for the duration of a head, never beyond the launch: what backward
// keeps is out and the rows' log-sum-exp, O(T).
//
// Forward, per head: S = q k^T (gemm), s_ij = S_ij * scale + mask_ij (-inf where causal
// hides j > i), m_i = max_j s_ij, l_i = sum_j exp(s_ij - m_i), P = exp(s - m) / l,
// out = P v (gemm), lse_i = m_i + log l_i.
// Backward, per head: P = exp(s - lse) from S recomputed, grad_v = P^T g, dP = g v^T,
// D_i = sum_c g_ic out_ic, dS = P (dP - D) scale, grad_q = dS k, grad_k = dS^T q.
// exp runs through the level's vector loops (kernels/host/loops.h), so its bits are the
// element-wise kernel's. Under the causal rule a row's per-element work stops at its
// diagonal: the keys after it hold exactly 0 in P (exp(-inf) is 0, and adding 0 to a sum
// changes nothing), which the rows set directly instead of computing.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/dispatch/strided.h"
#include "kernels/host/gemm.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/loops.h"
#include "kernels/host/parallel.h"

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace {

template <typename T>
struct Ptrs {
  const T *q, *k, *v, *mask;
};

// x[i] = exp(x[i]) for i < n, through the level's element-wise loop.
template <typename T>
void exp_row(const Loops& lp, DType dt, T* x, int64_t n) {
  static const int64_t kOne = 1;
  const Layout<2> l = make_layout<2>({n}, {&kOne, &kOne});
  lp.unary(Unary::kExp, dt, l, x, x, 0, n);
}

// S (tq x tk, row-major) = scale * q k^T + mask, -inf where the causal rule hides a key.
template <typename T>
void scores(const AttentionShape& s, const Ptrs<T>& p, int64_t h, T* S) {
  const T* q = p.q + h * s.tq * s.d;
  const T* k = p.k + h * s.tk * s.d;
  gemm<T>(false, true, static_cast<int>(s.tq), static_cast<int>(s.tk), static_cast<int>(s.d), q,
          static_cast<int>(s.d), k, static_cast<int>(s.d), T(0), S, static_cast<int>(s.tk));
  const T scale = static_cast<T>(s.scale);
  const T* mask = p.mask == nullptr ? nullptr : p.mask + (s.mask_batched ? h * s.tq * s.tk : 0);
  for (int64_t i = 0; i < s.tq; ++i) {
    T* row = S + i * s.tk;
    for (int64_t j = 0; j < s.tk; ++j) row[j] *= scale;
    if (mask != nullptr) {
      const T* mr = mask + i * s.tk;
      for (int64_t j = 0; j < s.tk; ++j) row[j] += mr[j];
    }
    if (s.causal) {
      for (int64_t j = i + 1; j < s.tk; ++j) row[j] = -std::numeric_limits<T>::infinity();
    }
  }
}

// How many keys row i sees: all of them, or those up to the diagonal under the causal rule.
int64_t visible(const AttentionShape& s, int64_t i) {
  return s.causal ? std::min<int64_t>(s.tk, i + 1) : s.tk;
}

// Heads per parallel chunk: about kGemmGrain multiply-adds each.
int64_t head_grain(const AttentionShape& s) {
  const int64_t per_head = s.tq * s.tk * (s.d + s.dv);
  return std::max<int64_t>(1, kGemmGrain / std::max<int64_t>(1, per_head));
}

template <typename T>
void forward_head(const Loops& lp, DType dt, const AttentionShape& s, const Ptrs<T>& p,
                  int64_t h, T* out, T* lse, T* S) {
  scores(s, p, h, S);
  for (int64_t i = 0; i < s.tq; ++i) {
    T* row = S + i * s.tk;
    const int64_t n = visible(s, i);
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t j = 0; j < n; ++j) m = row[j] > m ? row[j] : m;
    // A row of -inf only: exp(-inf - -inf) is NaN, as the reference's softmax gives.
    for (int64_t j = 0; j < n; ++j) row[j] -= m;
    exp_row(lp, dt, row, n);
    T l = 0;
    for (int64_t j = 0; j < n; ++j) l += row[j];
    const T inv = T(1) / l;
    for (int64_t j = 0; j < n; ++j) row[j] *= inv;
    for (int64_t j = n; j < s.tk; ++j) row[j] = T(0);
    lse[h * s.tq + i] = m + std::log(l);
  }
  gemm<T>(false, false, static_cast<int>(s.tq), static_cast<int>(s.dv), static_cast<int>(s.tk),
          S, static_cast<int>(s.tk), p.v + h * s.tk * s.dv, static_cast<int>(s.dv), T(0),
          out + h * s.tq * s.dv, static_cast<int>(s.dv));
}

template <typename T>
struct Grads {
  T *q, *k, *v;
  const T *g, *out, *lse;
};

template <typename T>
void backward_head(const Loops& lp, DType dt, const AttentionShape& s, const Ptrs<T>& p,
                   const Grads<T>& gr, int64_t h, T* P, T* dP) {
  scores(s, p, h, P);
  const T* lse = gr.lse + h * s.tq;
  for (int64_t i = 0; i < s.tq; ++i) {
    T* row = P + i * s.tk;
    const int64_t n = visible(s, i);
    for (int64_t j = 0; j < n; ++j) row[j] -= lse[i];
    exp_row(lp, dt, row, n);
    for (int64_t j = n; j < s.tk; ++j) row[j] = T(0);
  }
  const int tq = static_cast<int>(s.tq), tk = static_cast<int>(s.tk);
  const int d = static_cast<int>(s.d), dv = static_cast<int>(s.dv);
  const T* g = gr.g + h * s.tq * s.dv;
  if (gr.v != nullptr) {
    gemm<T>(true, false, tk, dv, tq, P, tk, g, dv, T(0), gr.v + h * s.tk * s.dv, dv);
  }
  if (gr.q == nullptr && gr.k == nullptr) return;
  gemm<T>(false, true, tq, tk, dv, g, dv, p.v + h * s.tk * s.dv, dv, T(0), dP, tk);
  const T* out = gr.out + h * s.tq * s.dv;
  const T scale = static_cast<T>(s.scale);
  for (int64_t i = 0; i < s.tq; ++i) {
    T di = 0;
    for (int64_t c = 0; c < s.dv; ++c) di += g[i * s.dv + c] * out[i * s.dv + c];
    T* dr = dP + i * s.tk;
    const T* pr = P + i * s.tk;
    for (int64_t j = 0; j < s.tk; ++j) dr[j] = pr[j] * (dr[j] - di) * scale;
  }
  if (gr.q != nullptr) {
    gemm<T>(false, false, tq, d, tk, dP, tk, p.k + h * s.tk * s.d, d, T(0),
            gr.q + h * s.tq * s.d, d);
  }
  if (gr.k != nullptr) {
    gemm<T>(true, false, tk, d, tq, dP, tk, p.q + h * s.tq * s.d, d, T(0),
            gr.k + h * s.tk * s.d, d);
  }
}

}  // namespace

void attention_forward(const Stream& stream, const LaunchSpec& spec, DType dt,
                       const AttentionShape& s, void* out, void* lse, const void* q,
                       const void* k, const void* v, const void* mask) {
  const Loops* lp = &loops();
  dispatch::enqueue(stream, spec, [s, out, lse, q, k, v, mask, dt, lp] {
    dispatch_floating(dt, [&](auto t) {
      using T = decltype(t);
      const Ptrs<T> p{static_cast<const T*>(q), static_cast<const T*>(k),
                      static_cast<const T*>(v), static_cast<const T*>(mask)};
      parallel_for(0, s.bh, head_grain(s), [&](int64_t first, int64_t last) {
        std::vector<T> S(static_cast<size_t>(s.tq * s.tk));
        for (int64_t h = first; h < last; ++h) {
          forward_head(*lp, dt, s, p, h, static_cast<T*>(out), static_cast<T*>(lse), S.data());
        }
      });
    });
  });
}

void attention_backward(const Stream& stream, const LaunchSpec& spec, DType dt,
                        const AttentionShape& s, void* gq, void* gk, void* gv, const void* g,
                        const void* q, const void* k, const void* v, const void* out,
                        const void* lse, const void* mask) {
  const Loops* lp = &loops();
  dispatch::enqueue(stream, spec, [s, gq, gk, gv, g, q, k, v, out, lse, mask, dt, lp] {
    dispatch_floating(dt, [&](auto t) {
      using T = decltype(t);
      const Ptrs<T> p{static_cast<const T*>(q), static_cast<const T*>(k),
                      static_cast<const T*>(v), static_cast<const T*>(mask)};
      const Grads<T> gr{static_cast<T*>(gq), static_cast<T*>(gk), static_cast<T*>(gv),
                        static_cast<const T*>(g), static_cast<const T*>(out),
                        static_cast<const T*>(lse)};
      parallel_for(0, s.bh, head_grain(s), [&](int64_t first, int64_t last) {
        std::vector<T> P(static_cast<size_t>(s.tq * s.tk)), dP(P.size());
        for (int64_t h = first; h < last; ++h) {
          backward_head(*lp, dt, s, p, gr, h, P.data(), dP.data());
        }
      });
    });
  });
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad
