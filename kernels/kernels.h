// The compute kernels every operator is built from, on raw strided views.
//
// Each function validates its views, then enqueues its work on `stream` through
// runtime::launch(), declaring the byte ranges it reads and writes. On cpu the work runs
// before the call returns; on sim it runs later on the stream's worker (so the views'
// memory must stay allocated until then, which the caching allocator guarantees for
// memory freed on its own stream). CUDA versions come later: on a cuda stream each
// function throws DeviceError naming the kernel.
//
// Shapes: `out` always has the iteration shape; inputs of element-wise kernels have the
// same sizes as `out` (callers broadcast with stride 0). Reductions take `out` in keepdim
// form (same rank as `in`, size 1 on reduced dims). Floating kernels accept float32,
// float64, float16 and bfloat16 with all views of one dtype; the 16-bit dtypes are
// computed in float32 and rounded once per output element (kernels/widen.h: float32
// copies of the inputs from the caching allocator, so sums, products and convolutions
// accumulate in float32 or better). copy and fill accept every dtype (copy converts;
// to float16/bfloat16 rounds to nearest even), index_select every dtype, arange the
// floating dtypes and int64.
// float32 sums (reduce) accumulate in double and round once when stored, so long sums
// keep float32 accuracy; matmul accumulates in float32, as BLAS does.
//
// Aliasing: a written view must not have stride 0 on a dim of size > 1. Element-wise
// kernels and copy allow out to be exactly an input (same data, dtype and strides: in
// place); any other overlap between out and an input is an error where it can be proven
// (same start, or two contiguous views) and undefined otherwise. reduce, arg_reduce,
// matmul, cat, stack and the index kernels need out disjoint from every input. Rank is at
// most 16.
//
// Speed and determinism (runtime/backend/cpu_settings.h): element-wise kernels, fill, copy and
// reduce run loops compiled for several instruction-set levels (baseline x86-64, AVX2,
// AVX-512; cpu_capability() picks one) and split over up to get_num_threads() threads when
// a launch covers more than 64K elements. Their results are bitwise the same at every
// level and thread count, NaN payloads included where only one NaN meets an operation.
// matmul shares a batch's items, or the blocks of one large product, among the same
// threads, each a single-threaded OpenBLAS gemm (kernels/host/gemm.h: OpenBLAS's own
// threads busy-wait between calls, so it is kept at one thread).
//
// Thread-safety: any thread may call any kernel on any stream.
// cuda streams run the kernels of kernels/cuda/cuda_kernels.h where nvcc built them.
// Failure: checks run in this order, before anything is enqueued: DeviceError for cuda
// streams in a build without nvcc (naming the kernel); ValueError naming the kernel,
// sizes and dtypes for malformed views, mismatched sizes or dtypes, bad dims and proven
// overlap. Views with no elements enqueue nothing (reduce still writes out when in is
// empty).
// Launch names, which observers, traces and error messages show, are the op's own:
// exp, add_scalar, add, axpy, fill, copy, cat, stack, arange, uniform, normal, sum,
// argmax, matmul, index_select, index_add, scatter_add, scatter, scatter_reduce, cumsum,
// gt, gt_scalar, where, ...
#ifndef STREAMGRAD_KERNELS_KERNELS_H_
#define STREAMGRAD_KERNELS_KERNELS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/op_codes.h"
#include "kernels/view.h"
#include "runtime/backend/stream.h"

namespace streamgrad {
namespace kernels {

void unary(const Stream& stream, Unary op, const View& out, const View& in);
void unary_scalar(const Stream& stream, UnaryScalar op, const View& out, const View& in,
                  double scalar);
void binary(const Stream& stream, Binary op, const View& out, const View& a, const View& b);
// out = a + alpha * b (in place allowed: out may alias a exactly).
void axpy(const Stream& stream, const View& out, const View& a, const View& b, double alpha);

// out (bool) = a <op> b, element-wise: a and b of one dtype (any; bool bytes compare as
// 0/1), sizes of out. NaN compares false under every op but kNe. Launch names: eq, ne, lt,
// le, gt, ge.
void compare(const Stream& stream, Compare op, const View& out, const View& a, const View& b);
// out (bool) = in <op> scalar. Floating: the scalar is rounded to in's dtype first
// (as a float32 tensor op does in PyTorch); int64/bool: the comparison is exact (an
// integral scalar compares as int64, a fractional one as double). Launch names: eq_scalar,
// ne_scalar, ...
void compare_scalar(const Stream& stream, Compare op, const View& out, const View& in,
                    double scalar);
// out = condition ? a : b (launch name where): condition bool; a, b and out of one dtype
// (any); all of out's sizes (callers broadcast with stride 0). out may be exactly a or b
// (masked_fill_ writes into its input).
void where(const Stream& stream, const View& out, const View& condition, const View& a,
           const View& b);

// Any dtype: bool stores value != 0; int64 truncates and needs a finite value in range
// (ValueError otherwise).
void fill(const Stream& stream, const View& out, double value);
// Joins in one launch, for any dtype (out and every input of one dtype: no conversion) and
// any strides; out must be disjoint from every input, and at least one input is needed.
// cat: every input has out's rank and sizes except along `dim`, where their extents add
// up to out's; input k fills the k-th run of out along dim. stack: every input has out's
// sizes without `dim`, out.sizes[dim] is the number of inputs, and input k becomes
// out's index k along dim. Launch names cat and stack.
void cat(const Stream& stream, const View& out, const std::vector<View>& ins, int64_t dim);
void stack(const Stream& stream, const View& out, const std::vector<View>& ins, int64_t dim);
// Element-wise copy with dtype conversion; out and in have the same sizes. Overlapping
// views are not allowed unless identical. Every conversion is defined: to bool is
// x != 0, from bool is 0/1, floating to int64 truncates toward zero, saturates at the
// int64 range and maps NaN to 0.
void copy(const Stream& stream, const View& out, const View& in);
// out[i] = start + i * step over the flattened out (i counts elements in row-major order,
// so any strides work). int64 out: start and step must be integers and the range must
// fit in int64; it is computed exactly in int64. bool out is a ValueError.
void arange(const Stream& stream, const View& out, double start, double step);
// Counter-based random numbers: element i of out (in row-major order) depends only on
// (seed, offset + i), so results do not depend on threads, devices or out's strides;
// callers advance offset by numel between draws. uniform is in [low, high) (low == high
// gives low); normal is Box-Muller with one output per counter. float32/float64 only;
// ValueError for non-finite parameters, low > high or std < 0.
void uniform(const Stream& stream, const View& out, double low, double high, uint64_t seed,
             uint64_t offset);
void normal(const Stream& stream, const View& out, double mean, double std, uint64_t seed,
            uint64_t offset);

// out (keepdim shape) = reduction of `in` over the dims where out has size 1 and in does
// not. Sum of an empty set is 0; max/min of an empty set is a ValueError; max and min
// propagate NaN, and a sum that meets a NaN is the quiet NaN (one bit pattern: which of two
// NaNs an addition keeps is not the same at every code level). Launch names: sum, max, min.
void reduce(const Stream& stream, Reduce op, const View& out, const View& in);
// Max or min along `dim` (0 <= dim < rank): values and indices (int64) in keepdim shape.
// Ties pick the first index; a NaN wins (the first one). Its launch name is argmax or
// argmin.
void arg_reduce(const Stream& stream, bool is_max, const View& values, const View& indices,
                const View& in, int64_t dim);

// The first k elements of each slice of `in` along `dim` (0 <= dim < rank) in sort order,
// ascending or descending, with NaN counting as larger than every number and equal values
// in index order (stable, kernels/functors/sort_ops.h): values (in's dtype) and their
// int64 positions along dim, both with in's sizes except k (<= in's size) along dim; k
// equal to the size is a full sort. float32, float64 and int64 (float16 and bfloat16
// through float32, exactly). Launch name: `name`, the op ("sort", "topk"), a literal.
void sort(const Stream& stream, const View& values, const View& indices, const View& in,
          int64_t dim, bool descending, const char* name);
// Draws with replacement from each row of `probs` ([rows, categories], floating weights
// that the caller has checked: non-negative, finite, a positive sum per row) into `out`
// (int64 [rows, samples], contiguous): draw j of row r picks category i with probability
// p[r][i] / sum(p[r]) from counter offset + r * samples + j (random_ops.h), the same
// category on every device. Callers advance offset by rows * samples.
void multinomial(const Stream& stream, const View& out, const View& probs, uint64_t seed,
                 uint64_t offset);

// out[b] = a[b] @ b_[b]: 2-D ([M,K] x [K,N] -> [M,N]) or 3-D with a batch dim (batch
// strides may be 0 for broadcasting). Uses OpenBLAS gemm (any strides: non-BLAS-able
// layouts are copied to contiguous scratch first). M, N and K must fit in int (BLAS);
// K == 0 gives zeros. With a `bias` (2-D only: 1-D of N elements, out's dtype), out = a @ b
// + bias in one gemm (beta = 1 over an out that starts as the bias), launched as "linear".
// float16/bfloat16 a and b may write a float32 out (and take a float32 bias): the product
// is then not rounded to 16 bits.
void matmul(const Stream& stream, const View& out, const View& a, const View& b,
            const View* bias = nullptr);

// out = in.index_select(dim, index): index is a 1-D int64 view; out.sizes[dim] ==
// index.numel(). Out-of-range indices are a ValueError when checked on the host
// (cpu) and are reported at the next synchronize (sim) — the kernel never reads outside
// `in`. Indices must be in [0, in.sizes[dim]) (no negative wrap-around).
void index_select(const Stream& stream, const View& out, const View& in, int64_t dim,
                  const View& index);
// out.index_select(dim, index) += src  (duplicates accumulate, in index order). out and
// src agree on every dim but `dim`, where src has index.numel() entries. Floating only.
// Bad indices are reported as for index_select, before anything is written.
void index_add(const Stream& stream, const View& out, int64_t dim, const View& index,
               const View& src);
// The same positions, assigned (out.index_copy_(dim, index, src)): among duplicate indices
// the last wins on the host, one of them in no fixed order on cuda. Launch name index_copy.
void index_copy(const Stream& stream, const View& out, int64_t dim, const View& index,
                const View& src);
// out[..., index[j], ...] += src[..., j, ...] along dim where index has src's sizes
// (the backward of max/min along a dim). On dims other than `dim`, src may be smaller
// than out. Floating only; bad indices are reported as for index_select.
void scatter_add(const Stream& stream, const View& out, int64_t dim, const View& index,
                 const View& src);
// The same positions, assigned: out[..., index[j], ...] = src[..., j, ...]. Among
// duplicate indices the last in src's row-major order wins on the host; on cuda one of
// them, in no fixed order (as the reference's scatter). Floating only.
void scatter(const Stream& stream, const View& out, int64_t dim, const View& index,
             const View& src);
// The same positions, combined: out[..., index[j], ...] (op)= src[..., j, ...] for op
// kAdd, kMultiply, kMax or kMin (kAssign is scatter); max and min keep a NaN once met.
// With include_self false every indexed position first takes op's identity (0, 1, -inf,
// +inf), so out's earlier value there takes no part; other positions keep it. The host
// combines in src's row-major order; cuda combines duplicates atomically in no fixed
// order (products of duplicates may differ within rounding). Floating only (16-bit
// views combined in float32); bad indices are reported as for index_select, under
// `name` (the op the user called), before anything is written.
void scatter_reduce(const Stream& stream, const View& out, int64_t dim, const View& index,
                    const View& src, IndexCombine op, bool include_self,
                    const char* name = "scatter_reduce");

// out[..., j, ...] = in[..., index[..., j, ...], ...] along dim, where index has out's
// sizes (PyTorch's gather). On dims other than `dim`, out may be smaller than in. Any
// dtype; bad indices are reported as for index_select.
void gather(const Stream& stream, const View& out, const View& in, int64_t dim,
            const View& index);

// out[..., i, ...] = in[..., 0, ...] + ... + in[..., i, ...] along dim (the running sum;
// out and in of one shape, floating); with `reverse`, in[..., i, ...] + ... + in[..., n-1,
// ...] (cumsum's gradient). Each line along dim is summed in order in double (16-bit views
// widened to float32 first), one line per thread, so the bits do not depend on the thread
// count. Launch name: cumsum.
void cumsum(const Stream& stream, const View& out, const View& in, int64_t dim,
            bool reverse = false);

// Checks that every element of `index` (int64, any shape) lies in [0, limit) without
// reading it on the host where that would wait for the device: on cpu the check runs at
// the call, on sim inside a task (its ValueError surfaces at the stream's next
// synchronisation), on cuda at the launch (which synchronises the stream, as the index
// kernels do). The error reads `context` (the caller's op, argument and what to do),
// then the first bad element's row-major position and value. Launch name:
// check_index_range (none on cpu, where nothing is enqueued). Composite ops call it so
// that a bad class index or embedding index is reported under the op the user called.
void check_index_range(const Stream& stream, const View& index, int64_t limit,
                       const std::string& context);
// The same for [low, limit): negative indices that wrap around (index_put_ accepts
// -size..size-1). Both throw IndexError, a ValueError.
void check_index_range(const Stream& stream, const View& index, int64_t low, int64_t limit,
                       const std::string& context);
// One step of flattening advanced indices into positions of a flattened tensor
// (index_put_): out = (accumulate ? out : 0) + wrapped(index) * stride, element-wise over
// int64 views of one size (callers broadcast index with stride 0), where a negative index
// wraps by adding `size`. No error: callers run check_index_range first; an index outside
// [-size, size) makes the position negative for good (kBadPosition, kernels/dispatch/
// kernel_args.h), so that an index kernel given these positions refuses them before
// writing, even where the check's error comes later (sim runs the tasks after a failed
// check). Launch name index_linear.
void index_linear(const Stream& stream, const View& out, const View& index, int64_t size,
                  int64_t stride, bool accumulate);

}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_KERNELS_H_
