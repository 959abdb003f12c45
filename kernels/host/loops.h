// Internal to the cpu kernels: the per-element loops compiled once per instruction-set
// level, and the table through which kernels call the level in use.
//
// How the levels are built (kernels/BUILD): loops_elementwise.cc, loops_elementwise16.cc,
// loops_copy.cc, loops_reduce.cc and loops_nn.cc (elementwise_rows.h the row loops of the
// first two) are compiled by three cc_library targets, loops_default
// (baseline x86-64), loops_avx2 (-mavx2 -mfma) and loops_avx512 (-mavx512f/bw/dq/vl), each with
// -DSG_CPU_LEVEL naming its namespace and with -ftree-vectorize
// -fvect-cost-model=dynamic (GCC 12's -O2 model skips loops that need an alias check or
// an epilogue, which is every loop here), -ffp-contract=off (no FMA: every level rounds
// alike), -fno-math-errno (sqrt becomes one instruction, as exact as the libm call) and
// -fno-trapping-math (a selection may compute both sides: without it GCC left GELU's
// clamped rows scalar at the avx2 level; the values are the same either way).
// Three libraries rather than GCC's target_clones: the level is chosen at run time, so
// tests can run every level the machine has in one process and a sim stream keeps the
// level it was launched with; target_clones resolves once per function through ifunc,
// before main, and cannot be overridden.
// A level's objects must define nothing outside its namespace, or the linker could pick
// its copy for every level (tests/kernels/loops_symbols_test checks this): so the loops
// use no std:: templates and the per-element functors are always inlined.
//
// Flat ranges: every element-wise loop takes [begin, end), flat row-major indices of its
// layout, so the caller can split one launch over threads (kernels/host/parallel.h).
// Aliasing: element-wise loops allow out to be exactly an input (same pointer and steps)
// and use unaliased vector code when rows are disjoint; any other overlap (undefined by
// kernels.h) runs element by element in order (float16 and bfloat16 rows: block by block,
// each block widened into float buffers first; loops_elementwise16.cc).
// Sums: sum_block adds a block of at most kSumBlock contiguous elements in 16 lanes
// (element i into lane i % 16), then folds the lanes pairwise (lane j += lane j + 8, + 4,
// + 2, + 1); callers add the blocks of a row in order. The order is fixed by the source,
// not by the vector width, so every level gives the same bits.
//
// Thread-safety: pure functions on caller-owned memory. Failure: none (callers check).
#ifndef STREAMGRAD_KERNELS_HOST_LOOPS_H_
#define STREAMGRAD_KERNELS_HOST_LOOPS_H_

#include <cstdint>

#include "kernels/dispatch/strided.h"
#include "kernels/kernels.h"
#include "runtime/backend/cpu_settings.h"
#include "runtime/base/dtype.h"
#include "runtime/base/host_device.h"

namespace streamgrad {
namespace kernels {
namespace cpu {

constexpr int64_t kSumBlock = 4096;

// Asks for row [p, p + n) to be brought into the cache ahead of use, where the hardware's
// prefetchers do not run far enough ahead: rows to be read (the normalisations': batch_norm.cc
// and layer_norm.cc say when) and rows about to be written, whose stores would otherwise
// wait for each line in turn (batch_norm.cc, elementwise_rows.h). A read prefetch serves
// for those too: a line no other core holds comes in exclusive, and the store that
// follows needs no further request (prefetchw measured no better, and varied more).
template <typename T>
inline void prefetch_row(const T* p, int64_t n) {
  const char* b = reinterpret_cast<const char*>(p);
  for (int64_t i = 0; i < n * static_cast<int64_t>(sizeof(T)); i += 64) __builtin_prefetch(b + i);
}

struct Loops {
  CpuCapability level;
  void (*unary)(Unary op, DType dt, const Layout<2>& l, void* out, const void* in,
                int64_t begin, int64_t end);
  // The scalar is rounded to dt first.
  void (*unary_scalar)(UnaryScalar op, DType dt, const Layout<2>& l, void* out,
                       const void* in, double scalar, int64_t begin, int64_t end);
  void (*binary)(Binary op, DType dt, const Layout<3>& l, void* out, const void* a,
                 const void* b, int64_t begin, int64_t end);
  void (*axpy)(DType dt, const Layout<3>& l, void* out, const void* a, const void* b,
               double alpha, int64_t begin, int64_t end);
  // Any dtype; the value is converted as kernels.h's fill says.
  void (*fill)(DType dt, const Layout<1>& l, void* out, double value, int64_t begin,
               int64_t end);
  // Any pair of dtypes, converting as kernels.h's copy says.
  void (*copy)(DType to, DType from, const Layout<2>& l, void* out, const void* in,
               int64_t begin, int64_t end);
  // float32/float64: the sum, in double, of n <= kSumBlock contiguous elements.
  double (*sum_block)(DType dt, const void* p, int64_t n);
  // float32/float64: *acc (of dt) becomes the max (min) of itself and n contiguous
  // elements; a NaN wins and stays.
  void (*extreme)(bool is_max, DType dt, const void* p, int64_t n, void* acc);
  // One row of a reduction over outer dims: acc[j] = acc[j] (op) row[j] for j < n; acc is
  // double for kSum, dt otherwise; acc and row are disjoint.
  void (*columns)(Reduce op, DType dt, void* acc, const void* row, int64_t n);
};

// The sum of n contiguous elements in kSumBlock blocks, added in order (as reduce() sums a
// row; the normalisations' statistics).
template <typename T>
double row_sum(const Loops& lp, DType dt, const T* p, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i += kSumBlock) {
    s += lp.sum_block(dt, p + i, n - i < kSumBlock ? n - i : kSumBlock);
  }
  return s;
}

// The loops of the neural-network kernels (loops_nn.cc), float32 and float64 only.
struct NnLoops {
  // One output row of a 2x2, stride-2 max pool whose windows lie inside the image: the
  // windows' rows are `top` and `bottom` (2 * ow values each); indices get the flat index
  // in the plane, `first` being top[0]'s and `width` the plane's row length.
  void (*max_pool_2x2)(DType dt, const void* top, const void* bottom, int64_t ow,
                       void* values, int64_t* indices, int64_t first, int64_t width);
  // The sum, in double, of (p[i] - mean)^2 over n contiguous elements (the difference
  // taken in dt); mean is a dt value.
  double (*centred_squares)(DType dt, const void* p, int64_t n, double mean);
  // *sum_g += the sum of g[i], *sum_gc += the sum of g[i] * (x[i] - mean), in double.
  void (*grad_sums)(DType dt, const void* g, const void* x, int64_t n, double mean,
                    double* sum_g, double* sum_gc);
  // out[i] = BatchNormApply{c[0..3]}(in[i]) and out[i] = BatchNormInputGrad{c[0..4]}(g[i],
  // x[i]) (kernels/functors/norm_ops.h), the coefficients being dt values; out is disjoint from
  // the inputs.
  void (*batch_norm_apply)(DType dt, void* out, const void* in, int64_t n, const double* c);
  void (*batch_norm_input_grad)(DType dt, void* out, const void* g, const void* x, int64_t n,
                                const double* c);
  // One row of layer / RMS normalisation (norm_ops.h): out[i] = LayerNormApply{mean,
  // rstd}(in[i]), then times weight[i] and plus bias[i] where those are not null; mean and
  // rstd are dt values; out is disjoint from the inputs.
  void (*layer_norm_apply)(DType dt, void* out, const void* in, const void* weight,
                           const void* bias, int64_t n, double mean, double rstd);
  // out[i] = LayerNormInputGrad{c[0..3]}(gw[i], x[i]), the coefficients being dt values.
  void (*layer_norm_input_grad)(DType dt, void* out, const void* gw, const void* x, int64_t n,
                                const double* c);
  // A block of `rows` contiguous rows of n values: their shares of the parameter
  // gradients, in double and column by column (no lanes: each column is its own sum),
  // each column adding the rows in row order from +0: acc_w[j] = the sum of g[r][j] *
  // ((x[r][j] - mean[r]) * rstd[r]) (the product of normalised value and g taken in
  // double), acc_b[j] = the sum of g[r][j]. mean and rstd hold a dt value per row; mean
  // null means 0 (RMS); acc_w or acc_b may be null.
  void (*layer_norm_param_block)(DType dt, double* acc_w, double* acc_b, const void* g,
                                 const void* x, const void* mean, const void* rstd,
                                 int64_t rows, int64_t n);
  // gw[i] = g[i] * weight[i] (the gradient of the row before its weight), then grad_sums
  // of that gw: *sum_gw += the sum of gw[i], *sum_gwc += the sum of gw[i] * (x[i] - mean).
  void (*scaled_grad_sums)(DType dt, void* gw, const void* g, const void* weight,
                           const void* x, int64_t n, double mean, double* sum_gw,
                           double* sum_gwc);
  // One contiguous row of Adam's update (optim_ops.h): p[i] = op(p[i], g[i], m[i], v[i],
  // inv_sqrt_bias2, neg_step), op an AdamUpdate<float> or <double> as dt says, the four
  // rows pairwise disjoint. Here rather than in foreach.cc so that the division and
  // square root run 16 lanes wide on AVX-512 (2 % of a GPT step at the baseline's 4).
  void (*adam_row)(DType dt, const void* op, void* p, const void* g, void* m, void* v,
                   int64_t n, double inv_sqrt_bias2, double neg_step);
};

// The tables of cpu_capability(), or of a given level (at most the machine's). Under
// ThreadSanitizer, whose build compiles the levels without its instrumentation, these are
// the announced tables: the same loops, each call's rows announced to TSan first
// (announced_loops.cc).
const Loops& loops();
const Loops& loops_for(CpuCapability c);
const NnLoops& nn_loops();
const NnLoops& nn_loops_for(CpuCapability c);
const Loops& announced_loops_for(CpuCapability c);
const NnLoops& announced_nn_loops_for(CpuCapability c);

// One table of each kind per level, each defined in its own library.
namespace level_default {
extern const Loops kLoops;
extern const NnLoops kNnLoops;
}
#if defined(__x86_64__)
namespace level_avx2 {
extern const Loops kLoops;
extern const NnLoops kNnLoops;
}
namespace level_avx512 {
extern const Loops kLoops;
extern const NnLoops kNnLoops;
}
#endif

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_HOST_LOOPS_H_
