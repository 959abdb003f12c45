// Kernels of the neural-network layers: im2col / col2im (the building blocks of
// convolution, as unfold / fold), 2-D max pooling with indices, training-mode batch
// normalisation, and layer and RMS normalisation (their math in
// kernels/functors/norm_ops.h).
//
// All views are contiguous (ops make their inputs contiguous first) and of one floating
// dtype, except max pooling's int64 indices. Shapes: `planes` are [P, H, W] images
// (P = batch x channels); columns are [B, C * kH * kW, L] with L = oH * oW output
// positions, rows ordered (channel, kernel row, kernel column) as PyTorch's unfold.
// Taps in the padding read zeros (im2col) and are dropped (col2im); max pooling's
// padding is -infinity, NaN wins (and propagates), ties keep the first position; indices
// are flat h * W + w within each plane, as PyTorch's.
//
// Thread-safety: any thread, any stream (as kernels.h). Failure: ValueError naming the
// kernel and the views for malformed or mismatched views; DeviceError on cuda streams in a
// build without nvcc (kernels/cuda/cuda_kernels.h runs them where it built).
#ifndef STREAMGRAD_KERNELS_NN_KERNELS_H_
#define STREAMGRAD_KERNELS_NN_KERNELS_H_

#include <vector>

#include "kernels/view.h"
#include "kernels/window.h"
#include "runtime/backend/stream.h"
#include "runtime/base/device.h"

namespace streamgrad {
namespace kernels {

// cols [B, C*kH*kW, oH*oW] from in [B, C, H, W].
void im2col(const Stream& stream, const View& cols, const View& in, const Window2d& w);
// out [B, C, H, W] += the columns summed back onto the positions they were taken from.
void col2im(const Stream& stream, const View& out, const View& cols, const Window2d& w);
// values and indices [P, oH, oW] from in [P, H, W]; oH, oW come from the views.
void max_pool2d(const Stream& stream, const View& values, const View& indices, const View& in,
                const Window2d& w);
// grad_in [P, H, W] = zeros, then grad_out [P, oH, oW] added at the forward's indices
// (same sizes as grad_out) of window `w` (max_pool2d's). An index outside its plane is a
// ValueError (cpu: at the call; sim: the stream's error) before anything is written.
void max_pool2d_backward(const Stream& stream, const View& grad_in, const View& grad_out,
                         const View& indices, const Window2d& w);

// Training-mode batch normalisation of in [N, C, S] (contiguous, N * S > 0): mean and var
// [C] get each channel's batch mean and biased variance, and out [N, C, S] =
// (in - mean) / sqrt(var + eps) * weight + bias (weight and bias [C], or null for 1 and 0).
// Launch name: batch_norm. Mixed precision: with in and out float16 or bfloat16, mean,
// var, weight, bias and the running statistics may be float32 (computed in float32, out
// rounded once); the same holds for the backward's grad_in / grad_out (16-bit) and
// grad_weight / grad_bias.
// `running`, where given, moves the running statistics [C] (mean's dtype) in the same
// launch, as BatchNorm2d's training forward does: running_mean = (1 - momentum) *
// running_mean + momentum * mean, and running_var likewise with var * N * S / (N * S - 1)
// (unbiased; N * S > 1), each computed in double and rounded once. One launch for what
// took four in-place ops (a quarter of a float32 ResNet step's launches on cuda).
struct RunningStats {
  View mean, var;
  double momentum = 0;
};
void batch_norm_forward(const Stream& stream, const View& out, const View& mean, const View& var,
                        const View& in, const View* weight, const View* bias, double eps,
                        const RunningStats* running = nullptr);
// Its gradients for grad_out [N, C, S], given the forward's in, mean, var and weight:
// grad_in [N, C, S], grad_weight and grad_bias [C], each computed only where not null.
// Launch name: batch_norm_backward.
void batch_norm_backward(const Stream& stream, const View* grad_in, const View* grad_weight,
                         const View* grad_bias, const View& grad_out, const View& in,
                         const View& mean, const View& var, const View* weight, double eps);

// Layer normalisation of in [M, N] (contiguous), each row on its own: mean and rstd [M]
// get each row's mean and 1 / sqrt(biased variance + eps), and out [M, N] =
// (in - mean) * rstd * weight + bias (weight and bias [N], or null for 1 and 0).
// Row sums accumulate in double; rows are split over threads. Launch name: layer_norm.
// Mixed precision: with in and out (and the backward's grad_in / grad_out) float16 or
// bfloat16, mean, rstd, weight, bias, grad_weight and grad_bias may each be float32 (all
// computed in float32, 16-bit outputs rounded once); otherwise every view has in's dtype.
void layer_norm_forward(const Stream& stream, const View& out, const View& mean,
                        const View& rstd, const View& in, const View* weight, const View* bias,
                        double eps);
// RMS normalisation, the same without centring: rstd [M] = 1 / sqrt(mean of in^2 + eps)
// per row and out = in * rstd * weight. Launch name: rms_norm.
void rms_norm_forward(const Stream& stream, const View& out, const View& rstd, const View& in,
                      const View* weight, double eps);
// Their gradients for grad_out [M, N], given the forward's in, mean (layer norm only),
// rstd and weight: grad_in [M, N], grad_weight and grad_bias [N], each computed only where
// not null. grad_weight and grad_bias sum over the rows in an order fixed by M alone, so
// every thread count gives the same bits; with M = 0 they are zeros. Launch names:
// layer_norm_backward, rms_norm_backward.
void layer_norm_backward(const Stream& stream, const View* grad_in, const View* grad_weight,
                         const View* grad_bias, const View& grad_out, const View& in,
                         const View& mean, const View& rstd, const View* weight);
void rms_norm_backward(const Stream& stream, const View* grad_in, const View* grad_weight,
                       const View& grad_out, const View& in, const View& rstd,
                       const View* weight);

// Scaled dot-product attention that never keeps the [Tq, Tk] probabilities (the reference's
// memory-efficient attention): out [BH, Tq, Dv] = softmax(q k^T * scale + mask) v per
// head, where causal hides keys j > i from query i (top-left aligned, as the reference's
// is_causal) and mask (null, [Tq, Tk] for every head, or [BH, Tq, Tk]) is added to the
// scores; lse [BH, Tq] gets each row's log-sum-exp of the scores, from which the backward
// recomputes the probabilities. q [BH, Tq, D], k [BH, Tk, D], v [BH, Tk, Dv], all
// contiguous and of one floating dtype; 16-bit ones are computed in float32 beside a
// float32 lse and mask (lse and mask may also have q's dtype). A row whose scores are all
// -inf gives NaN, as softmax does. Each head is computed whole by one thread, so results
// are the same bits at every thread count. Launch names: attention, attention_backward.
void attention_forward(const Stream& stream, const View& out, const View& lse, const View& q,
                       const View& k, const View& v, const View* mask, bool causal,
                       double scale);
// Gradients for grad_out [BH, Tq, Dv] given the forward's q, k, v, out and lse: grad_q,
// grad_k, grad_v (each where not null) with q's, k's and v's sizes.
void attention_backward(const Stream& stream, const View* grad_q, const View* grad_k,
                        const View* grad_v, const View& grad_out, const View& q, const View& k,
                        const View& v, const View& out, const View& lse, const View* mask,
                        bool causal, double scale);

// Convolution through the device's library: cuDNN on cuda streams, oneDNN on cpu and sim
// streams (conv2d uses unfold and matmul where neither applies). Views are contiguous and
// of one dtype: in [N, C, H, W], weight [O, C / groups, kH, kW], out [N, O, oH, oW] with
// oH, oW as window `w` gives. Each (device, pass, dtype, shapes, window, groups, TF32
// setting) is planned once and kept: on cuda the descriptors and the first deterministic
// algorithm cuDNN's heuristics offer, in cudnn_conv_plan_cache(device)
// (kernels/plan_cache.h), float32 on TF32 tensor cores only where cudnn_allow_tf32()
// (runtime/backend/cuda_settings.h); on the host, per thread count too, oneDNN's
// primitives and the reorders between the user's plain layout and the blocked one
// oneDNN's fast kernels want, in onednn_conv_plan_cache(). Workspace (cuDNN's, and
// oneDNN's scratchpad and blocked copies) comes from the caching allocator on the launch's
// stream. Launch names: cudnn_conv2d, cudnn_conv2d_backward_input,
// cudnn_conv2d_backward_weight, cudnn_conv2d_backward (both gradients), and onednn_ in
// place of cudnn_ on the host.
//
// Whether conv2d should take this path: a device whose library is in the build and
// enabled (oneDNN: onednn_enabled(), runtime/backend/cpu_settings.h), groups >= 1, and
// on cuda float32 or float64 with every size and element count within cuDNN's 32-bit
// limits; on cpu and sim float32; on both, float16 and bfloat16 where float32 would be
// taken and the call's float32 copies fit widen.h's cap (the entry points widen 16-bit
// operands whole, run the float32 plan and round each result once). The entry points throw
// ValueError for inputs outside this.
bool library_conv2d_supported(const Device& device, DType dt, const std::vector<int64_t>& in,
                              const std::vector<int64_t>& weight, const Window2d& w,
                              int64_t groups);
void library_conv2d(const Stream& stream, const View& out, const View& in, const View& weight,
                    const Window2d& w, int64_t groups);
// grad_in [N, C, H, W] = the gradient of conv2d's out with respect to in, for grad_out.
void library_conv2d_backward_input(const Stream& stream, const View& grad_in,
                                   const View& grad_out, const View& weight, const Window2d& w,
                                   int64_t groups);
// grad_weight [O, C / groups, kH, kW] = the gradient with respect to the weight.
void library_conv2d_backward_weight(const Stream& stream, const View& grad_weight,
                                    const View& grad_out, const View& in, const Window2d& w,
                                    int64_t groups);
// Both of the above in one launch (onednn_ / cudnn_conv2d_backward), the same values: on
// the host grad_out goes into oneDNN's blocked layout once for the two, not once each.
void library_conv2d_backward(const Stream& stream, const View& grad_in, const View& grad_weight,
                             const View& grad_out, const View& in, const View& weight,
                             const Window2d& w, int64_t groups);

}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_NN_KERNELS_H_
