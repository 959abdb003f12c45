// The host implementations of the dispatch table's kernels (kernels/dispatch/kernel_ids.h),
// which register_host.cc registers for cpu and sim streams. Each has the table's signature
// for its id and enqueues the loops of the level in use (loops.h) on the stream.
//
// Thread-safety: as launch(). Failure: none beyond launch()'s; the front door has checked
// every argument.
#ifndef STREAMGRAD_KERNELS_HOST_HOST_KERNELS_H_
#define STREAMGRAD_KERNELS_HOST_HOST_KERNELS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/dispatch/kernel_ids.h"
#include "kernels/dispatch/launch.h"

namespace streamgrad {
namespace kernels {
namespace cpu {

using dispatch::LaunchSpec;

void unary(const Stream& stream, const LaunchSpec& spec, Unary op, DType dt,
           const Layout<2>& l, void* out, const void* in);
void unary_scalar(const Stream& stream, const LaunchSpec& spec, UnaryScalar op, DType dt,
                  const Layout<2>& l, void* out, const void* in, double scalar);
void binary(const Stream& stream, const LaunchSpec& spec, Binary op, DType dt,
            const Layout<3>& l, void* out, const void* a, const void* b);
void axpy(const Stream& stream, const LaunchSpec& spec, DType dt, const Layout<3>& l,
          void* out, const void* a, const void* b, double alpha);
void fill(const Stream& stream, const LaunchSpec& spec, DType dt, const Layout<1>& l,
          void* out, double value);
// A 2-D transposing copy runs in cache-sized tiles on one thread.
void copy(const Stream& stream, const LaunchSpec& spec, DType to, DType from,
          const Layout<2>& l, void* out, const void* in);
void arange(const Stream& stream, const LaunchSpec& spec, DType dt, const Layout<1>& l,
            void* out, double start, double step);
void uniform(const Stream& stream, const LaunchSpec& spec, DType dt, const Layout<1>& l,
             void* out, double low, double high, uint64_t seed, uint64_t offset);
void normal(const Stream& stream, const LaunchSpec& spec, DType dt, const Layout<1>& l,
            void* out, double mean, double stddev, uint64_t seed, uint64_t offset);
void compare(const Stream& stream, const LaunchSpec& spec, Compare op, DType dt,
             const Layout<3>& l, void* out, const void* a, const void* b);
void compare_scalar(const Stream& stream, const LaunchSpec& spec, Compare op, DType dt,
                    const Layout<2>& l, void* out, const void* in, double scalar);
// Any dtype, 16-bit ones included (it only moves elements).
void where(const Stream& stream, const LaunchSpec& spec, DType dt, const Layout<4>& l,
           void* out, const void* condition, const void* a, const void* b);
void reduce(const Stream& stream, const LaunchSpec& spec, Reduce op, DType dt,
            const Layout<2>& kept, const Layout<1>& red, void* out, const void* in);
void arg_reduce(const Stream& stream, const LaunchSpec& spec, bool is_max, DType dt,
                const Layout<3>& l, int64_t n, int64_t stride, void* values, int64_t* indices,
                const void* in);
// The running sums of each line of `lines` (operands out, in): n elements, out_step and
// in_step apart; lines split over threads.
void cumsum(const Stream& stream, const LaunchSpec& spec, DType dt, const Layout<2>& lines,
            int64_t n, int64_t out_step, int64_t in_step, void* out, const void* in);
// sort / topk along a dim (float32, float64, int64) and multinomial draws (floating
// weights), split over threads by slice / row.
void sort(const Stream& stream, const LaunchSpec& spec, DType dt, const SortArgs& a,
          void* values, int64_t* indices, const void* in);
void multinomial(const Stream& stream, const LaunchSpec& spec, DType dt,
                 const MultinomialArgs& a, int64_t* out, const void* probs);
// index_select and gather (any dtype), index_add and scatter_add (floating): every index
// is checked before an element moves, on the host for cpu streams (before the launch), in
// the task for sim ones.
void index_read(const Stream& stream, const LaunchSpec& spec, DType dt, const IndexArgs& a);
void index_accumulate(const Stream& stream, const LaunchSpec& spec, DType dt,
                      const IndexArgs& a);
// On a cpu stream checks on the host, with no launch; elsewhere in a task. IndexError
// (index_range_message) for the first index outside [low, limit).
void check_index_range(const Stream& stream, const LaunchSpec& spec, const Layout<1>& l,
                       const int64_t* index, int64_t low, int64_t limit,
                       const std::string& context);
// index_linear (kernels.h): int64 only, no checks.
void index_linear(const Stream& stream, const LaunchSpec& spec, const Layout<2>& l,
                  int64_t* out, const int64_t* index, int64_t size, int64_t stride,
                  bool accumulate);
void matmul(const Stream& stream, const LaunchSpec& spec, const MatmulPlan& p, void* out,
            DType dt);
void join(const Stream& stream, const LaunchSpec& spec, DType dt,
          const std::vector<JoinPiece>& pieces);
void sgd_update(const Stream& stream, const LaunchSpec& spec, DType dt, const SgdHyper& h,
                const std::vector<SgdItem>& items);
void adam_update(const Stream& stream, const LaunchSpec& spec, DType dt, const AdamHyper& h,
                 const std::vector<AdamItem>& items);
void non_finite_check_and_unscale(const Stream& stream, const LaunchSpec& spec, DType dt,
                                  const std::vector<UnscaleItem>& items, float* found_inf,
                                  double inv_scale);
// The kernels of kernels/nn_kernels.h on contiguous views. im2col moves any dtype;
// col2im accumulates, one thread in a fixed order.
void im2col(const Stream& stream, const LaunchSpec& spec, DType dt, const ImageShape& s,
            const Window2d& w, void* cols, const void* img);
void col2im(const Stream& stream, const LaunchSpec& spec, DType dt, const ImageShape& s,
            const Window2d& w, void* img, const void* cols);
// conv2d's three passes through oneDNN (kernels/host/onednn_conv.cc), float32: a, b and c
// as ConvPass names them.
void onednn_conv2d(const Stream& stream, const LaunchSpec& spec, ConvPass pass, DType dt,
                   const ConvShape& s, const Window2d& w, void* a, const void* b,
                   const void* c);
// Both gradients of conv2d in one launch, grad_out put into the blocked layout once for the
// two of them.
void onednn_conv2d_backward(const Stream& stream, const LaunchSpec& spec, DType dt,
                            const ConvShape& s, const Window2d& w, void* grad_in,
                            void* grad_weight, const void* grad_out, const void* in,
                            const void* weight);
// s.channels planes of s.height x s.width; the backward scatters through the indices
// (checked, in the task, before anything is written) and needs no window.
void max_pool2d(const Stream& stream, const LaunchSpec& spec, DType dt, const ImageShape& s,
                const Window2d& w, void* values, int64_t* indices, const void* img);
void max_pool2d_backward(const Stream& stream, const LaunchSpec& spec, DType dt,
                         const ImageShape& s, const Window2d& w, void* grad_in,
                         const void* grad_out, const int64_t* indices);
// The host's batch norm takes float32 or float64 with statistics and parameters of the
// same dtype (param_dt == dt): the front door widens 16-bit calls.
void batch_norm_forward(const Stream& stream, const LaunchSpec& spec, DType dt, DType param_dt,
                        const NcsShape& d, double eps, void* out, void* mean, void* var,
                        const void* in, const void* weight, const void* bias,
                        const RunningUpdate& running);
void batch_norm_backward(const Stream& stream, const LaunchSpec& spec, DType dt, DType param_dt,
                         const NcsShape& d, double eps, void* grad_in, void* grad_weight,
                         void* grad_bias, const void* grad_out, const void* in,
                         const void* mean, const void* var, const void* weight);
// Scaled dot-product attention, each head by one thread through gemm (attention.cc).
void attention_forward(const Stream& stream, const LaunchSpec& spec, DType dt,
                       const AttentionShape& s, void* out, void* lse, const void* q,
                       const void* k, const void* v, const void* mask);
void attention_backward(const Stream& stream, const LaunchSpec& spec, DType dt,
                        const AttentionShape& s, void* grad_q, void* grad_k, void* grad_v,
                        const void* grad_out, const void* q, const void* k, const void* v,
                        const void* out, const void* lse, const void* mask);
// Layer and RMS normalisation (d.rms) of d.m rows: rows split over threads; the backward's
// parameter gradients sum fixed blocks of rows in order, the same bits at every thread
// count (layer_norm.cc).
void layer_norm_forward(const Stream& stream, const LaunchSpec& spec, DType dt,
                        const NormRows& d, double eps, void* out, void* mean, void* rstd,
                        const void* in, const void* weight, const void* bias);
void layer_norm_backward(const Stream& stream, const LaunchSpec& spec, DType dt,
                         const NormRows& d, void* grad_in, void* grad_weight, void* grad_bias,
                         const void* grad_out, const void* in, const void* mean,
                         const void* rstd, const void* weight);

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_HOST_HOST_KERNELS_H_
