// Scaled dot-product attention on cuda streams (declared in kernels/cuda/cuda_kernels.h):
// one thread per query row for the forward and grad_q, one thread per key row for grad_k
// and grad_v, each recomputing the probabilities it needs from q, k and the saved
// log-sum-exp. No atomics and no [Tq, Tk] buffer: deterministic, O(T) memory, and simple
// rather than fast (a tiled kernel is future work). Sums in the accumulator type (double
// for float32), so results match the cpu's within rounding, not bit for bit.
//
// For head dims up to kMaxHeadDim each thread computes a score (and its probability and
// gradient factor) once per key and adds it into per-column accumulators it holds,
// rather than once per key and output column: the same products summed in the same
// order, so the same bits, d times less work (the first GPU run measured the per-column
// backward at 35.8 ms a call, 80 % of the GPT step). Wider heads take the per-column
// kernels (`*_general`).
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/indexing.cuh"
#include "runtime/base/error.h"
#include "runtime/cuda/cuda_stream.h"
#include "runtime/cuda/kernel_launch.h"

namespace streamgrad {
namespace kernels {
namespace cuda {
namespace {

// The score of query i and key j of head h: scale q_i . k_j + mask_ij, or -inf where the
// causal rule hides the key.
template <typename T, typename A>
__device__ A score(const AttentionShape& s, const T* q, const T* k, const T* mask, int64_t h,
                   int64_t i, int64_t j) {
  if (s.causal && j > i) return -INFINITY;
  const T* qi = q + (h * s.tq + i) * s.d;
  const T* kj = k + (h * s.tk + j) * s.d;
  A dot = 0;
  for (int64_t c = 0; c < s.d; ++c) dot += A(qi[c]) * A(kj[c]);
  A v = dot * A(s.scale);
  if (mask != nullptr) v += A(mask[(s.mask_batched ? h * s.tq * s.tk : 0) + i * s.tk + j]);
  return v;
}

template <typename T>
__global__ void attention_forward_general(AttentionShape s, T* out, T* lse, const T* q,
                                         const T* k, const T* v, const T* mask) {
  using A = typename Acc<T>::type;
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < s.bh * s.tq;
       r += int64_t(gridDim.x) * blockDim.x) {
    const int64_t h = r / s.tq, i = r % s.tq;
    A m = -INFINITY;
    for (int64_t j = 0; j < s.tk; ++j) m = fmax(m, score<T, A>(s, q, k, mask, h, i, j));
    A l = 0;
    T* o = out + r * s.dv;
    for (int64_t c = 0; c < s.dv; ++c) o[c] = T(0);
    for (int64_t j = 0; j < s.tk; ++j) l += exp(score<T, A>(s, q, k, mask, h, i, j) - m);
    for (int64_t c = 0; c < s.dv; ++c) {
      A acc = 0;
      for (int64_t j = 0; j < s.tk; ++j) {
        acc += exp(score<T, A>(s, q, k, mask, h, i, j) - m) * A(v[(h * s.tk + j) * s.dv + c]);
      }
      o[c] = static_cast<T>(acc / l);
    }
    lse[r] = static_cast<T>(m + log(l));
  }
}

// D_i = g_i . out_i, then grad_q_i = scale sum_j P_ij (g_i . v_j - D_i) k_j.
template <typename T>
__global__ void attention_grad_q_general(AttentionShape s, T* gq, const T* g, const T* q,
                                        const T* k, const T* v, const T* out, const T* lse,
                                        const T* mask) {
  using A = typename Acc<T>::type;
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < s.bh * s.tq;
       r += int64_t(gridDim.x) * blockDim.x) {
    const int64_t h = r / s.tq, i = r % s.tq;
    A di = 0;
    for (int64_t c = 0; c < s.dv; ++c) di += A(g[r * s.dv + c]) * A(out[r * s.dv + c]);
    for (int64_t c = 0; c < s.d; ++c) {
      A acc = 0;
      for (int64_t j = 0; j < s.tk; ++j) {
        const A p = exp(score<T, A>(s, q, k, mask, h, i, j) - A(lse[r]));
        A dp = 0;
        for (int64_t e = 0; e < s.dv; ++e) {
          dp += A(g[r * s.dv + e]) * A(v[(h * s.tk + j) * s.dv + e]);
        }
        acc += p * (dp - di) * A(k[(h * s.tk + j) * s.d + c]);
      }
      gq[r * s.d + c] = static_cast<T>(acc * A(s.scale));
    }
  }
}

// grad_v_j = sum_i P_ij g_i; grad_k_j = scale sum_i P_ij (g_i . v_j - D_i) q_i.
template <typename T>
__global__ void attention_grad_kv_general(AttentionShape s, T* gk, T* gv, const T* g,
                                         const T* q, const T* k, const T* v, const T* out,
                                         const T* lse, const T* mask) {
  using A = typename Acc<T>::type;
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < s.bh * s.tk;
       r += int64_t(gridDim.x) * blockDim.x) {
    const int64_t h = r / s.tk, j = r % s.tk;
    if (gv != nullptr) {
      for (int64_t c = 0; c < s.dv; ++c) {
        A acc = 0;
        for (int64_t i = 0; i < s.tq; ++i) {
          const int64_t qi = h * s.tq + i;
          acc += exp(score<T, A>(s, q, k, mask, h, i, j) - A(lse[qi])) * A(g[qi * s.dv + c]);
        }
        gv[r * s.dv + c] = static_cast<T>(acc);
      }
    }
    if (gk == nullptr) continue;
    for (int64_t c = 0; c < s.d; ++c) {
      A acc = 0;
      for (int64_t i = 0; i < s.tq; ++i) {
        const int64_t qi = h * s.tq + i;
        const A p = exp(score<T, A>(s, q, k, mask, h, i, j) - A(lse[qi]));
        A dp = 0, di = 0;
        for (int64_t e = 0; e < s.dv; ++e) {
          dp += A(g[qi * s.dv + e]) * A(v[r * s.dv + e]);
          di += A(g[qi * s.dv + e]) * A(out[qi * s.dv + e]);
        }
        acc += p * (dp - di) * A(q[qi * s.d + c]);
      }
      gk[r * s.d + c] = static_cast<T>(acc * A(s.scale));
    }
  }
}

constexpr int64_t kMaxHeadDim = 256;

template <typename T>
__global__ void attention_forward_kernel(AttentionShape s, T* out, T* lse, const T* q,
                                         const T* k, const T* v, const T* mask) {
  using A = typename Acc<T>::type;
  A acc[kMaxHeadDim];
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < s.bh * s.tq;
       r += int64_t(gridDim.x) * blockDim.x) {
    const int64_t h = r / s.tq, i = r % s.tq;
    A m = -INFINITY;
    for (int64_t j = 0; j < s.tk; ++j) m = fmax(m, score<T, A>(s, q, k, mask, h, i, j));
    A l = 0;
    for (int64_t c = 0; c < s.dv; ++c) acc[c] = 0;
    for (int64_t j = 0; j < s.tk; ++j) {
      const A p = exp(score<T, A>(s, q, k, mask, h, i, j) - m);
      l += p;
      const T* vj = v + (h * s.tk + j) * s.dv;
      for (int64_t c = 0; c < s.dv; ++c) acc[c] += p * A(vj[c]);
    }
    T* o = out + r * s.dv;
    for (int64_t c = 0; c < s.dv; ++c) o[c] = static_cast<T>(acc[c] / l);
    lse[r] = static_cast<T>(m + log(l));
  }
}

template <typename T>
__global__ void attention_grad_q_kernel(AttentionShape s, T* gq, const T* g, const T* q,
                                        const T* k, const T* v, const T* out, const T* lse,
                                        const T* mask) {
  using A = typename Acc<T>::type;
  A acc[kMaxHeadDim];
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < s.bh * s.tq;
       r += int64_t(gridDim.x) * blockDim.x) {
    const int64_t h = r / s.tq, i = r % s.tq;
    A di = 0;
    for (int64_t c = 0; c < s.dv; ++c) di += A(g[r * s.dv + c]) * A(out[r * s.dv + c]);
    for (int64_t c = 0; c < s.d; ++c) acc[c] = 0;
    for (int64_t j = 0; j < s.tk; ++j) {
      const A p = exp(score<T, A>(s, q, k, mask, h, i, j) - A(lse[r]));
      A dp = 0;
      const T* vj = v + (h * s.tk + j) * s.dv;
      for (int64_t e = 0; e < s.dv; ++e) dp += A(g[r * s.dv + e]) * A(vj[e]);
      const A ds = p * (dp - di);
      const T* kj = k + (h * s.tk + j) * s.d;
      for (int64_t c = 0; c < s.d; ++c) acc[c] += ds * A(kj[c]);
    }
    for (int64_t c = 0; c < s.d; ++c) gq[r * s.d + c] = static_cast<T>(acc[c] * A(s.scale));
  }
}

template <typename T>
__global__ void attention_grad_kv_kernel(AttentionShape s, T* gk, T* gv, const T* g,
                                         const T* q, const T* k, const T* v, const T* out,
                                         const T* lse, const T* mask) {
  using A = typename Acc<T>::type;
  A acc_v[kMaxHeadDim], acc_k[kMaxHeadDim];
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < s.bh * s.tk;
       r += int64_t(gridDim.x) * blockDim.x) {
    const int64_t h = r / s.tk, j = r % s.tk;
    for (int64_t c = 0; c < s.dv; ++c) acc_v[c] = 0;
    for (int64_t c = 0; c < s.d; ++c) acc_k[c] = 0;
    for (int64_t i = 0; i < s.tq; ++i) {
      const int64_t qi = h * s.tq + i;
      const A p = exp(score<T, A>(s, q, k, mask, h, i, j) - A(lse[qi]));
      if (gv != nullptr) {
        for (int64_t c = 0; c < s.dv; ++c) acc_v[c] += p * A(g[qi * s.dv + c]);
      }
      if (gk == nullptr) continue;
      A dp = 0, di = 0;
      for (int64_t e = 0; e < s.dv; ++e) {
        dp += A(g[qi * s.dv + e]) * A(v[r * s.dv + e]);
        di += A(g[qi * s.dv + e]) * A(out[qi * s.dv + e]);
      }
      const A ds = p * (dp - di);
      for (int64_t c = 0; c < s.d; ++c) acc_k[c] += ds * A(q[qi * s.d + c]);
    }
    if (gv != nullptr) {
      for (int64_t c = 0; c < s.dv; ++c) gv[r * s.dv + c] = static_cast<T>(acc_v[c]);
    }
    if (gk != nullptr) {
      for (int64_t c = 0; c < s.d; ++c) {
        gk[r * s.d + c] = static_cast<T>(acc_k[c] * A(s.scale));
      }
    }
  }
}

}  // namespace

void attention_forward(const Stream& stream, DType dt, const AttentionShape& s, void* out,
                       void* lse, const void* q, const void* k, const void* v,
                       const void* mask) {
  if (s.bh * s.tq == 0) return;
  cpu::dispatch_floating(dt, [&](auto t) {
    using T = decltype(t);
    const auto kernel = s.dv <= kMaxHeadDim ? SG_KERNEL(attention_forward_kernel<T>)
                                            : SG_KERNEL(attention_forward_general<T>);
    launch_kernel("attention on cuda", kernel, blocks_for(s.bh * s.tq), kThreads,
                  raw_cuda_stream(stream), s, static_cast<T*>(out), static_cast<T*>(lse),
                  static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
                  static_cast<const T*>(mask));
  });
}

void attention_backward(const Stream& stream, DType dt, const AttentionShape& s, void* gq,
                        void* gk, void* gv, const void* g, const void* q, const void* k,
                        const void* v, const void* out, const void* lse, const void* mask) {
  const cudaStream_t cs = raw_cuda_stream(stream);
  cpu::dispatch_floating(dt, [&](auto t) {
    using T = decltype(t);
    if (gq != nullptr && s.bh * s.tq > 0) {
      const auto kernel = s.d <= kMaxHeadDim ? SG_KERNEL(attention_grad_q_kernel<T>)
                                             : SG_KERNEL(attention_grad_q_general<T>);
      launch_kernel("attention_backward on cuda", kernel, blocks_for(s.bh * s.tq), kThreads, cs, s,
                    static_cast<T*>(gq), static_cast<const T*>(g), static_cast<const T*>(q),
                    static_cast<const T*>(k), static_cast<const T*>(v), static_cast<const T*>(out),
                    static_cast<const T*>(lse), static_cast<const T*>(mask));
    }
    if ((gk != nullptr || gv != nullptr) && s.bh * s.tk > 0) {
      const auto kernel = s.d <= kMaxHeadDim && s.dv <= kMaxHeadDim
                              ? SG_KERNEL(attention_grad_kv_kernel<T>)
                              : SG_KERNEL(attention_grad_kv_general<T>);
      launch_kernel("attention_backward on cuda", kernel, blocks_for(s.bh * s.tk), kThreads, cs, s,
                    static_cast<T*>(gk), static_cast<T*>(gv), static_cast<const T*>(g),
                    static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
                    static_cast<const T*>(out), static_cast<const T*>(lse),
                    static_cast<const T*>(mask));
    }
  });
}

}  // namespace cuda
}  // namespace kernels
}  // namespace streamgrad
