// sgd_update and adam_update on cuda streams (kernels/cuda/cuda_kernels.h): one kernel per
// parameter over its merged layout, the per-element update of kernels/functors/optim_ops.h built
// by make_sgd_update / make_adam_update as on cpu. Device code is compiled without FMA
// contraction (kernels/cuda/BUILD), so each update rounds as the cpu's does.
// non_finite_check_and_unscale: one kernel per grad with the cpu's per-element functor;
// a thread that meets an Inf or NaN stores 1.0 into the flag (every such store writes
// the same value, so their order does not matter).
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/indexing.cuh"
#include "runtime/cuda/cuda_stream.h"
#include "runtime/cuda/kernel_launch.h"

namespace streamgrad {
namespace kernels {
namespace cuda {
namespace {

template <typename T>
__global__ void __launch_bounds__(kThreads)
    sgd_kernel(Indexer<3, int64_t> ix, int64_t n, SgdUpdate<T> op, T* p, const T* g, T* buf,
               bool fresh) {
  SG_GRID_LOOP(i, n) {
    int64_t off[3];
    ix.offsets(i, off);
    if (buf == nullptr) {
      p[off[0]] = op(p[off[0]], g[off[1]]);
    } else {
      T b = fresh ? T(0) : buf[off[2]];
      p[off[0]] = op(p[off[0]], g[off[1]], b, fresh);
      buf[off[2]] = b;
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    adam_kernel(Indexer<4, int64_t> ix, int64_t n, AdamUpdate<T> op, T* p, const T* g, T* m,
                T* v, T inv_sqrt_bias2, T neg_step, bool fresh) {
  SG_GRID_LOOP(i, n) {
    int64_t off[4];
    ix.offsets(i, off);
    // Fresh moments start at 0 (their memory holds nothing yet).
    T mi = fresh ? T(0) : m[off[2]];
    T vi = fresh ? T(0) : v[off[3]];
    p[off[0]] = op(p[off[0]], g[off[1]], mi, vi, inv_sqrt_bias2, neg_step);
    m[off[2]] = mi;
    v[off[3]] = vi;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    unscale_kernel(Indexer<1, int64_t> ix, int64_t n, NonFiniteCheckAndUnscale<T> op, T* g,
                   float* found_inf) {
  int found = 0;
  SG_GRID_LOOP(i, n) {
    int64_t off[1];
    ix.offsets(i, off);
    g[off[0]] = op(g[off[0]], found);
  }
  if (found) *found_inf = 1.0f;
}

template <typename T>
void run_unscale(const Stream& stream, const std::vector<UnscaleItem>& items, float* found_inf,
                 double inv_scale) {
  const NonFiniteCheckAndUnscale<T> op{static_cast<T>(inv_scale)};
  const cudaStream_t s = raw_cuda_stream(stream);
  for (const UnscaleItem& it : items) {
    launch_kernel("non_finite_check_and_unscale on cuda", SG_KERNEL(unscale_kernel<T>),
                  blocks_for(it.layout.numel), kThreads, s, make_indexer<int64_t>(it.layout),
                  it.layout.numel, op, static_cast<T*>(it.grad), found_inf);
  }
}

template <typename T>
void run_sgd(const Stream& stream, const SgdHyper& h, const std::vector<SgdItem>& items) {
  const SgdUpdate<T> op = make_sgd_update<T>(h);
  const cudaStream_t s = raw_cuda_stream(stream);
  for (const SgdItem& it : items) {
    launch_kernel("sgd_update on cuda", SG_KERNEL(sgd_kernel<T>), blocks_for(it.layout.numel),
                  kThreads, s, make_indexer<int64_t>(it.layout), it.layout.numel, op,
                  static_cast<T*>(it.param), static_cast<const T*>(it.grad),
                  static_cast<T*>(it.buf), it.fresh);
  }
}

template <typename T>
void run_adam(const Stream& stream, const AdamHyper& h, const std::vector<AdamItem>& items) {
  const AdamUpdate<T> op = make_adam_update<T>(h);
  const cudaStream_t s = raw_cuda_stream(stream);
  for (const AdamItem& it : items) {
    launch_kernel("adam_update on cuda", SG_KERNEL(adam_kernel<T>), blocks_for(it.layout.numel),
                  kThreads, s, make_indexer<int64_t>(it.layout), it.layout.numel, op,
                  static_cast<T*>(it.param), static_cast<const T*>(it.grad), static_cast<T*>(it.m),
                  static_cast<T*>(it.v), static_cast<T>(it.inv_sqrt_bias2),
                  static_cast<T>(it.neg_step), it.fresh);
  }
}

}  // namespace

void sgd_update(const Stream& stream, DType dt, const SgdHyper& h,
                const std::vector<SgdItem>& items) {
  if (dt == DType::kFloat32) return run_sgd<float>(stream, h, items);
  run_sgd<double>(stream, h, items);
}

void adam_update(const Stream& stream, DType dt, const AdamHyper& h,
                 const std::vector<AdamItem>& items) {
  if (dt == DType::kFloat32) return run_adam<float>(stream, h, items);
  run_adam<double>(stream, h, items);
}

void non_finite_check_and_unscale(const Stream& stream, DType dt,
                                  const std::vector<UnscaleItem>& items, float* found_inf,
                                  double inv_scale) {
  if (dt == DType::kFloat32) return run_unscale<float>(stream, items, found_inf, inv_scale);
  run_unscale<double>(stream, items, found_inf, inv_scale);
}

}  // namespace cuda
}  // namespace kernels
}  // namespace streamgrad
