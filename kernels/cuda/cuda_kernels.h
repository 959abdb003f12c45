// The cuda kernels behind kernels.h, nn_kernels.h and foreach.h, registered in the
// dispatch table for cuda streams by register_cuda.cc. The element-wise ones (unary,
// unary_scalar, binary, axpy, fill, copy, arange, uniform, normal, compare, where) run one
// strided kernel template over a cpu::Layout (any rank up to kMaxDims, broadcasting as
// stride 0, 32-bit index arithmetic when every offset fits) with the per-element functors
// the host loops run (kernels/functors/), so the cpu tests cover the math; the others are
// described where declared below.
//
// Compiled only where nvcc exists. The front door (kernels/*.cc) checks the views first,
// exactly as for cpu and sim, and these run as the work of its launch (SG_AS_TASK), so the
// trace and the stream sanitizer see each launch; they enqueue on the stream's raw handle
// and return (the index kernels and max pooling's backward synchronise the stream once,
// to check indices).
// The device code is compiled with -fmad=false so that a + b * c rounds twice, as on
// every cpu level.
//
// Thread-safety: any thread (as launch()). Failure: DeviceError when the launch fails
// (check_cuda); errors of the kernel itself surface at the next synchronisation, or at the
// launch under STREAMGRAD_LAUNCH_BLOCKING=1.
#ifndef STREAMGRAD_KERNELS_CUDA_CUDA_KERNELS_H_
#define STREAMGRAD_KERNELS_CUDA_CUDA_KERNELS_H_

#include "kernels/dispatch/kernel_args.h"
#include "kernels/dispatch/matmul_plan.h"
#include "kernels/dispatch/strided.h"
#include "kernels/foreach.h"
#include "kernels/op_codes.h"
#include "kernels/window.h"
#include "runtime/backend/stream.h"
#include "runtime/base/dtype.h"

namespace streamgrad {
namespace kernels {
namespace cuda {

void unary(const Stream& stream, Unary op, DType dt, const cpu::Layout<2>& l, void* out,
           const void* in);
void unary_scalar(const Stream& stream, UnaryScalar op, DType dt, const cpu::Layout<2>& l,
                  void* out, const void* in, double scalar);
void binary(const Stream& stream, Binary op, DType dt, const cpu::Layout<3>& l, void* out,
            const void* a, const void* b);
void axpy(const Stream& stream, DType dt, const cpu::Layout<3>& l, void* out, const void* a,
          const void* b, double alpha);
void fill(const Stream& stream, DType dt, const cpu::Layout<1>& l, void* out, double value);
void copy(const Stream& stream, DType to, DType from, const cpu::Layout<2>& l, void* out,
          const void* in);
// Element i of out (row-major) is ArangeOp<T>{start, step}(i) (kernels/functors/elementwise_ops.h).
void arange(const Stream& stream, DType dt, const cpu::Layout<1>& l, void* out, double start,
            double step);
// Element i of out (row-major) from counter offset + i (kernels/functors/random_ops.h).
void uniform(const Stream& stream, DType dt, const cpu::Layout<1>& l, void* out, double low,
             double high, uint64_t seed, uint64_t offset);
void normal(const Stream& stream, DType dt, const cpu::Layout<1>& l, void* out, double mean,
            double stddev, uint64_t seed, uint64_t offset);

// compare (operands out, a, b) and compare_scalar (out, in) with elements of dtype dt
// into a bool out; where (out, condition, a, b) with out of dtype dt.
void compare(const Stream& stream, Compare op, DType dt, const cpu::Layout<3>& l, void* out,
             const void* a, const void* b);
void compare_scalar(const Stream& stream, Compare op, DType dt, const cpu::Layout<2>& l,
                    void* out, const void* in, double scalar);
void where(const Stream& stream, DType dt, const cpu::Layout<4>& l, void* out,
           const void* condition, const void* a, const void* b);

// reduce (kernels.h) of `in` over `red` for each output of `kept` (operands out, in), and
// arg_reduce along a dim of n elements `stride` apart for each output of `l` (operands
// values, indices, in). Deterministic; sums in double for float32.
void reduce(const Stream& stream, Reduce op, DType dt, const cpu::Layout<2>& kept,
            const cpu::Layout<1>& red, void* out, const void* in);
void arg_reduce(const Stream& stream, bool is_max, DType dt, const cpu::Layout<3>& l,
                int64_t n, int64_t stride, void* values, int64_t* indices, const void* in);
// cumsum (kernels.h) along each line of `lines` (operands out, in): n elements, out_step
// and in_step apart (negative: a reverse sum from the line's last element). One thread per
// line, summing in order in double for float32 as the host does, so the results equal the
// host's bit for bit.
void cumsum(const Stream& stream, DType dt, const cpu::Layout<2>& lines, int64_t n,
            int64_t out_step, int64_t in_step, void* out, const void* in);

// sort / topk (kernels.h) of each slice of a.walk, float32, float64 or int64: a thread per
// element, placed by counting the elements before it (kernels/cuda/sort.cu). multinomial:
// a thread per draw (float32 / float64 weights). Both equal the host's results exactly.
void sort(const Stream& stream, DType dt, const SortArgs& a, void* values, int64_t* indices,
          const void* in);
void multinomial(const Stream& stream, DType dt, const MultinomialArgs& a, int64_t* out,
                 const void* probs);

// The first element (row-major position in `layout`) of `index` outside [0, limit) and
// its value, found on the device and read back after synchronising `stream`; false when
// every index is in range. check_index_range's cuda path (defined in index.cu; adapted to
// the table's signature in register_cuda.cc).
bool first_bad_index(const Stream& stream, const char* name, const cpu::Layout<1>& layout,
                     const int64_t* index, int64_t limit, int64_t* position, int64_t* value);
// The same for the range [low, limit) (negative indices that wrap around).
bool first_bad_index_in(const Stream& stream, const char* name, const cpu::Layout<1>& layout,
                        const int64_t* index, int64_t low, int64_t limit, int64_t* position,
                        int64_t* value);

// index_select and gather: out[off0] = in[off1 + index * step], any dtype.
void index_read(const Stream& stream, DType dt, const IndexArgs& a);
// index_add, scatter_add, scatter and scatter_reduce: out[off0 + index * step] combined
// with src[off1] as a.combine says (after the identity, where a.include_self is false),
// float32/float64; duplicates combine atomically, in no fixed order.
void index_accumulate(const Stream& stream, DType dt, const IndexArgs& a);
// index_linear (kernels.h): one element-wise kernel over int64, no checks (the caller's
// check_index_range has run).
void index_linear(const Stream& stream, const cpu::Layout<2>& l, int64_t* out,
                  const int64_t* index, int64_t size, int64_t stride, bool accumulate);
// sgd_update / adam_update of kernels/foreach.h: one kernel per item.
void sgd_update(const Stream& stream, DType dt, const SgdHyper& h,
                const std::vector<SgdItem>& items);
void adam_update(const Stream& stream, DType dt, const AdamHyper& h,
                 const std::vector<AdamItem>& items);
// non_finite_check_and_unscale: one kernel per item, each setting *found_inf to 1.0 when
// it meets an Inf or NaN.
void non_finite_check_and_unscale(const Stream& stream, DType dt,
                                  const std::vector<UnscaleItem>& items, float* found_inf,
                                  double inv_scale);
void im2col(const Stream& stream, DType dt, const ImageShape& s, const Window2d& w, void* cols,
            const void* img);
void col2im(const Stream& stream, DType dt, const ImageShape& s, const Window2d& w, void* img,
            const void* cols);
void max_pool2d(const Stream& stream, DType dt, const ImageShape& s, const Window2d& w,
                void* values, int64_t* indices, const void* img);
// ValueError (after a stream synchronisation) when an index lies outside its plane.
void max_pool2d_backward(const Stream& stream, DType dt, const ImageShape& s, const Window2d& w,
                         void* grad_in, const void* grad_out, const int64_t* indices);
// weight and bias may be null (1 and 0); the backward's outputs may be null (not wanted).
// dt is the data's dtype, param_dt that of the statistics and parameters: the same, or
// float32 beside float16 or bfloat16 data (mixed precision), computed in float32 as the
// widening rule would.
void batch_norm_forward(const Stream& stream, DType dt, DType param_dt, const NcsShape& d,
                        double eps, void* out, void* mean, void* var, const void* in,
                        const void* weight, const void* bias, const RunningUpdate& running);
void batch_norm_backward(const Stream& stream, DType dt, DType param_dt, const NcsShape& d,
                         double eps, void* grad_in, void* grad_weight, void* grad_bias,
                         const void* grad_out, const void* in, const void* mean, const void* var,
                         const void* weight);
// Layer / RMS normalisation (d.rms) of d.m rows: one block per row for the statistics,
// the output and grad_in; one thread per column for grad_weight and grad_bias, adding the
// rows in order (deterministic; within rounding of the cpu's blocks of rows). mean,
// weight, bias and the backward's outputs may be null.
void layer_norm_forward(const Stream& stream, DType dt, const NormRows& d, double eps,
                        void* out, void* mean, void* rstd, const void* in, const void* weight,
                        const void* bias);
void layer_norm_backward(const Stream& stream, DType dt, const NormRows& d, void* grad_in,
                         void* grad_weight, void* grad_bias, const void* grad_out,
                         const void* in, const void* mean, const void* rstd,
                         const void* weight);
// Scaled dot-product attention: a thread per query row (forward, grad_q) or key row
// (grad_k, grad_v), recomputing probabilities from lse; deterministic, no [Tq, Tk] buffer.
void attention_forward(const Stream& stream, DType dt, const AttentionShape& s, void* out,
                       void* lse, const void* q, const void* k, const void* v,
                       const void* mask);
void attention_backward(const Stream& stream, DType dt, const AttentionShape& s, void* grad_q,
                        void* grad_k, void* grad_v, const void* grad_out, const void* q,
                        const void* k, const void* v, const void* out, const void* lse,
                        const void* mask);
void cudnn_conv2d(const Stream& stream, ConvPass pass, DType dt, const ConvShape& s,
                  const Window2d& w, void* a, const void* b, const void* c);
// Both gradients: cuDNN's two passes one after the other (cuDNN takes the plain layouts
// as they are, so there is nothing to share between them).
void cudnn_conv2d_backward(const Stream& stream, DType dt, const ConvShape& s,
                           const Window2d& w, void* grad_in, void* grad_weight,
                           const void* grad_out, const void* in, const void* weight);

// The matmul of plan `p` into out through cuBLAS (kernels/cuda/matmul.cu): one handle and
// workspace per (device, stream), created on first use; TF32 for float32 only where
// matmul_allow_tf32() (runtime/backend/cuda_settings.h). Packed operands go through scratch on
// the same stream. dt is out's (and the bias's) dtype; float16 and bfloat16 operands
// (p.ab_dtype) are summed in float32 by cuBLAS, into an out of their dtype or float32.
void matmul(const Stream& stream, const cpu::MatmulPlan& p, void* out, DType dt);

}  // namespace cuda
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_CUDA_CUDA_KERNELS_H_
