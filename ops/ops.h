// Every differentiable operator of streamgrad. Each forward validates its inputs,
// allocates its outputs on the current stream of their device (the outputs' stamp, S1),
// launches kernels there, and — when grad mode is on and an input requires grad — records
// a backward node that saves only what its backward needs. Backward formulas are written
// with these same ops, so they are differentiable again (create_graph).
//
//   Tensor y = relu(matmul(x, w) + b);
//   Tensor loss = mean(y * y);
//
// Broadcasting follows numpy: trailing dimensions are matched, size-1 dimensions stretch.
// Views (transpose, permute, reshape of contiguous data, expand, squeeze, unsqueeze,
// slice, narrow) share storage with their input; the in-place ops (add_, mul_, zero_,
// copy_, fill_, masked_fill_, index_put_) bump the version counter so that a tensor saved
// for backward and modified afterwards is reported by the backward that needs it.
//
// Thread-safety: ops may be called from any thread on distinct or shared inputs; in-place
// ops on a shared tensor need external synchronisation.
// Failure: ValueError naming the op, the shapes and dtypes involved (mismatched or
// non-broadcastable shapes, non-floating inputs to differentiable math, bad dims);
// DeviceError naming both devices when inputs live on different devices, except that a
// 0-dim cpu tensor beside a tensor on another device acts as a scalar in add, sub, mul,
// div, add_, mul_, the comparisons, where's input / other and masked_fill(_)'s value (its
// value is read on the host when the op is called; its gradient comes back as a 0-dim
// cpu tensor), as in PyTorch; Error for in-place ops on a leaf that requires grad
// (outside NoGradGuard).
#ifndef STREAMGRAD_OPS_OPS_H_
#define STREAMGRAD_OPS_OPS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace streamgrad {

// Arithmetic (tensor and scalar forms); `alpha` scales b.
Tensor add(const Tensor& a, const Tensor& b, double alpha = 1);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, const Tensor& b, double alpha = 1);
Tensor sub(const Tensor& a, double b);
Tensor sub(double a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, double b);
Tensor div(double a, const Tensor& b);
Tensor neg(const Tensor& a);

// Element-wise math.
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor pow(const Tensor& a, double exponent);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor relu(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor log1p(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor erf(const Tensor& a);
Tensor sin(const Tensor& a);
Tensor cos(const Tensor& a);
// Activations (activation.cc), fused forward and backward. gelu's `approximate` is "none"
// (x Phi(x), through erf) or "tanh" (the tanh approximation); ValueError otherwise.
Tensor silu(const Tensor& a);
Tensor gelu(const Tensor& a, const std::string& approximate = "none");
// clamp (clamp.cc): each element bounded below by min and above by max (either may be
// absent, not both: ValueError), NaN kept; with min > max every element is max. The
// gradient passes where min <= x <= max.
Tensor clamp(const Tensor& a, std::optional<double> min, std::optional<double> max);
Tensor clamp_min(const Tensor& a, double min);
Tensor clamp_max(const Tensor& a, double max);

// Comparisons (compare.cc), as PyTorch's eq/ne/lt/le/gt/ge: a bool tensor with no
// history (the result of a comparison has no gradient). Tensor forms broadcast and need
// one dtype (any) on one device, except that a 0-dim cpu tensor acts as a scalar beside
// another device; scalar forms round the scalar to a floating tensor's dtype first and
// compare int64/bool tensors exactly. NaN compares false under every op but ne.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, double b);

// Selection (where.cc), as PyTorch's. where: input where condition is true, else other;
// condition is bool, the three broadcast together, input and other share a dtype (any)
// or are both floating (they then meet in the promoted dtype, as in add: a 0-dim operand
// defers to a dimensioned one; each gradient comes back in its operand's dtype), and
// either may be a 0-dim cpu tensor beside another device. The gradient goes to input
// where the condition holds and to other elsewhere (zero, never NaN, in the branch not
// taken), summed to each operand's shape. masked_fill: input with value wherever the bool
// mask is set (input and mask broadcast together); value is a double (stored in input's
// dtype: an int64 input needs an integral value, a bool input 0 or 1) or a 0-dim tensor
// of input's dtype, whose gradient is the sum of the result's gradient over the filled
// positions. The input's gradient is zero where the mask is set.
Tensor where(const Tensor& condition, const Tensor& input, const Tensor& other);
Tensor masked_fill(const Tensor& input, const Tensor& mask, double value);
Tensor masked_fill(const Tensor& input, const Tensor& mask, const Tensor& value);

// Reductions. Negative dims count from the end; an empty `dims` reduces over all.
Tensor sum(const Tensor& a);
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& a);
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim = false);
// Values and int64 indices along `dim` (ties: the first index).
std::pair<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim = false);

// Statistics (statistics.cc), as the reference's; an empty `dims` reduces over all, and
// the one-argument forms reduce over all with correction 1.
// var: sum((x - mean)^2) / max(0, N - correction) over the N reduced elements (N <=
// correction divides by zero: NaN or inf, as the reference).
Tensor var(const Tensor& a);
Tensor var(const Tensor& a, const std::vector<int64_t>& dims, double correction = 1,
           bool keepdim = false);
// std: sqrt(var); its gradient is zero where the result is zero.
Tensor std(const Tensor& a);
Tensor std(const Tensor& a, const std::vector<int64_t>& dims, double correction = 1,
           bool keepdim = false);
// log(sum(exp(x))) over dims, shifted by the maximum (no overflow); gradient g softmax(x).
Tensor logsumexp(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim = false);
// The p-norm of the elements (over `dims`, or all): p = 2, 1, inf, -inf, 0 (non-zeros)
// or any other p, as the reference's torch.norm / linalg.vector_norm.
Tensor norm(const Tensor& a, double p = 2);
Tensor norm(const Tensor& a, double p, const std::vector<int64_t>& dims, bool keepdim = false);
// Element-wise larger / smaller of a and b (maximum.cc), broadcast; NaN wins; equal
// elements split the gradient half and half, as the reference.
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
// Whether every / some element is nonzero (logical.cc; NaN is nonzero), over all elements
// or along dim: a bool tensor without history, for any dtype.
Tensor all(const Tensor& x);
Tensor all(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor any(const Tensor& x);
Tensor any(const Tensor& x, int64_t dim, bool keepdim = false);
// The lower / upper triangle of the last two dims (triangular.cc), the rest zero;
// `diagonal` > 0 moves the boundary above the main diagonal, < 0 below. The gradient is
// masked alike. ValueError for fewer than 2 dims.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);

// Running sum along dim (cumsum.cc): element i is the sum of elements 0..i; floating
// inputs. The gradient is the reverse running sum of the incoming gradient.
Tensor cumsum(const Tensor& x, int64_t dim);

// Sorting along a dim (sort.cc), as the reference's: values and int64 positions along
// dim. NaN counts as larger than every number and equal values keep their index order
// (every sort here is stable). Floating and int64 inputs; a 0-dim input acts as [1]. The
// gradient goes to the positions the values came from. topk: the k largest (smallest)
// in that order, k in 0..size; `sorted` = false sorts too (the reference leaves it open).
std::tuple<Tensor, Tensor> topk(const Tensor& input, int64_t k, int64_t dim = -1,
                                bool largest = true, bool sorted = true);
// As in libtorch, the stable forms take `stable` first, as std::optional<bool>: a plain
// bool converts to dim (sort(x, true) sorts along dim 1). argsort has no gradient.
std::tuple<Tensor, Tensor> sort(const Tensor& input, int64_t dim = -1, bool descending = false);
std::tuple<Tensor, Tensor> sort(const Tensor& input, std::optional<bool> stable,
                                int64_t dim = -1, bool descending = false);
Tensor argsort(const Tensor& input, int64_t dim = -1, bool descending = false);
Tensor argsort(const Tensor& input, std::optional<bool> stable, int64_t dim = -1,
               bool descending = false);

// The reference's matmul for every rank: 1-D x 1-D a dot product (0-dim), a 1-D operand a
// row (first) or column (second) that the result drops, 2-D [M,K]x[K,N], and batches
// ([..., M, K] x [..., K, N]) whose batch dims broadcast; N-D x 2-D folds the batch into
// one gemm. ValueError for a 0-dim operand or inner sizes that differ.
Tensor matmul(const Tensor& a, const Tensor& b);
// [B, M, K] x [B, K, N] -> [B, M, N], no broadcasting (ValueError otherwise).
Tensor bmm(const Tensor& a, const Tensor& b);
// beta * input + alpha * bmm(batch1, batch2); input broadcasts to [B, N, P] (beta 0:
// input unread).
Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2,
               double beta = 1, double alpha = 1);

// Gathering along a dim (PyTorch's gather / scatter_add, out of place): index is int64
// with the result's shape (gather); on other dims it may be smaller than the indexed
// tensor. scatter_add's src has index's rank and is at least as large on every dim: only
// the part index covers is read (src's gradient is zero elsewhere). Out-of-range indices
// are a ValueError (on sim at the next synchronisation). Differentiable with respect to
// input / self and src.
Tensor gather(const Tensor& input, int64_t dim, const Tensor& index);
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
// self with src (or value) written at the positions index names along dim, as the
// reference's scatter (duplicates: one of them wins; src's gradient reaches all of them).
// Floating dtypes.
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, double value);
// self with each src element combined into the position index names along dim, as the
// reference's scatter_reduce (scatter_reduce.cc): reduce is "sum", "prod", "mean", "amax"
// or "amin" (ValueError otherwise). With include_self, self's value takes part ("mean"
// counts it); without, positions index reaches get only src's values. Positions index
// does not reach keep self's value. index and src as scatter_add's. Floating dtypes;
// differentiable with respect to self and src (amax / amin share the gradient evenly among
// the values equal to the result), twice too (for "prod", not for src where two zeros of
// src meet at one position, as in the reference).
Tensor scatter_reduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                      const std::string& reduce, bool include_self = true);

// Advanced-index writes (index_put.cc), as the reference's Tensor.index_put_: `indices`
// address self's leading dims: an int64 tensor one dim (negative positions count from the
// end), a bool mask as many dims as it has (it must match their sizes and stands for its
// nonzero() coordinates, read on the host). The int64 tensors broadcast together to B;
// values broadcast to B followed by self's remaining dims, and are written there
// (duplicates: one of them wins, in no fixed order) or added (accumulate: duplicates
// sum). Floating dtypes; values has self's dtype and device. An index outside -size..
// size-1 is an IndexError (a ValueError) naming the op, the dim and its size (on sim at
// the next synchronisation) and nothing is written. self's gradient is g, with the
// written positions zeroed unless accumulating; values' gradient is g at the positions,
// summed to values' shape. index_put_ follows the in-place rules (check_inplace).
Tensor& index_put_(Tensor& self, const std::vector<Tensor>& indices, const Tensor& values,
                   bool accumulate = false);
Tensor index_put(const Tensor& self, const std::vector<Tensor>& indices, const Tensor& values,
                 bool accumulate = false);

// Convolution, pooling and normalisation (conv.cc, pool.cc, norm.cc), on [N, C, H, W]
// inputs (or unbatched [C, H, W]), as PyTorch's.
struct Conv2dParams {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
};
// Sliding local blocks: [N, C, H, W] -> [N, C * kH * kW, L] (unfold, im2col) and back,
// summing overlaps (fold, col2im, to `output_size` [H, W]).
Tensor unfold(const Tensor& input, std::array<int64_t, 2> kernel_size,
              const Conv2dParams& params = {});
Tensor fold(const Tensor& input, std::array<int64_t, 2> output_size,
            std::array<int64_t, 2> kernel_size, const Conv2dParams& params = {});
// weight [O, C / groups, kH, kW], bias [O] or an undefined Tensor.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
              const Conv2dParams& params = {});
// conv2d's gradients with respect to its input and its weight, for grad_output (as
// torch.nn.grad.conv2d_input / conv2d_weight); both differentiable.
Tensor conv2d_input_grad(const Shape& input_size, const Tensor& weight,
                         const Tensor& grad_output, const Conv2dParams& params = {});
Tensor conv2d_weight_grad(const Tensor& input, const Shape& weight_size,
                          const Tensor& grad_output, const Conv2dParams& params = {});
// The transposed convolution (conv_transpose.cc): weight [C_in, C_out / groups, kH, kW],
// bias [C_out]; output (in - 1) * stride - 2 * padding + dilation * (k - 1) +
// output_padding + 1 per spatial dim, output_padding below stride or dilation.
struct ConvTranspose2dParams {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> output_padding{0, 0};
  int64_t groups = 1;
  std::array<int64_t, 2> dilation{1, 1};
};
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
                        const ConvTranspose2dParams& params = {});
// Resizing [N, C, H, W] images (interpolate.cc), as torch.nn.functional.interpolate: to
// `size` {H, W} or by `scale_factor` (one for both dims, or {h, w}); mode "nearest" or
// "bilinear" (align_corners only there; unset is false).
struct InterpolateOptions {
  std::vector<int64_t> size;
  std::vector<double> scale_factor;
  std::string mode = "nearest";
  std::optional<bool> align_corners;
};
Tensor interpolate(const Tensor& input, const InterpolateOptions& options);
struct Pool2dParams {
  std::array<int64_t, 2> kernel_size{1, 1};
  std::array<int64_t, 2> stride{0, 0};  // {0, 0}: the kernel size (PyTorch's default)
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};  // max pooling only
  // Output sizes rounded up, as long as the last window starts inside the input or its
  // left padding (a window longer than the padded input then still gives one output).
  bool ceil_mode = false;
  // Average pooling only: the divisor counts the zero padding (not what ceil_mode adds
  // past it), or only the taps inside the input.
  bool count_include_pad = true;
};
// Indices are int64, flat h * W + w within each plane, as PyTorch's.
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, const Pool2dParams& params);
Tensor max_pool2d(const Tensor& input, const Pool2dParams& params);
Tensor avg_pool2d(const Tensor& input, const Pool2dParams& params);
// The average of each cell of an [oh, ow] grid laid over the last two dims
// (adaptive_pool.cc), as the reference's: output row i covers input rows
// floor(i H / oh) .. ceil((i + 1) H / oh) - 1, columns alike. [N, C, H, W] or [C, H, W]
// with H, W > 0; differentiable to any order.
Tensor adaptive_avg_pool2d(const Tensor& input, std::array<int64_t, 2> output_size);
// Normalises over every dim but 1 of [N, C] or [N, C, *]. Training: batch statistics,
// and running_mean / running_var (when defined) updated in place, without grad, with
// the unbiased variance. Eval: the running statistics. weight / bias may be undefined.
Tensor batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var, bool training,
                  double momentum = 0.1, double eps = 1e-5);
// Group normalisation (group_norm.cc), as torch.nn.functional.group_norm: the C channels
// of an [N, C, *] input (at least 2 dims) form num_groups consecutive groups (C must be
// divisible by it), each (sample, group) normalised by its mean and biased variance, then
// weight [C] and bias [C] (each may be undefined) per channel. Parameters have the input's
// dtype, or float32 beside a float16 / bfloat16 input; the result has the input's dtype.
// Runs in float32 under autocast.
Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// Layer and RMS normalisation (layer_norm.cc), as torch.nn.functional's: each normalises
// over the trailing dims that normalized_shape names (which must equal them), every
// leading index on its own. layer_norm: (x - mean) / sqrt(biased var + eps) * weight +
// bias; rms_norm: x / sqrt(mean(x^2) + eps) * weight, eps defaulting to the machine epsilon
// of the type it computes in (float32's for float16, bfloat16 and float32 inputs,
// float64's for float64). weight and bias (each may be undefined) have normalized_shape's
// shape and the input's dtype, or float32 beside a float16 / bfloat16 input; the result
// has the input's dtype. Both run in float32 under autocast.
Tensor layer_norm(const Tensor& input, const Shape& normalized_shape,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  double eps = 1e-5);
Tensor rms_norm(const Tensor& input, const Shape& normalized_shape,
                const Tensor& weight = Tensor(), std::optional<double> eps = std::nullopt);

// Shape and views.
Tensor transpose(const Tensor& a, int64_t dim0, int64_t dim1);
Tensor permute(const Tensor& a, const std::vector<int64_t>& dims);
// reshape: a view when the input is contiguous, else a copy; view: always a view (error
// when impossible); one size may be -1.
Tensor reshape(const Tensor& a, const Shape& sizes);
Tensor view(const Tensor& a, const Shape& sizes);
Tensor expand(const Tensor& a, const Shape& sizes);
Tensor squeeze(const Tensor& a);
Tensor squeeze(const Tensor& a, int64_t dim);
Tensor unsqueeze(const Tensor& a, int64_t dim);
Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length);
// cat and stack: tensors of one dtype, or all floating (the result has their promotion;
// each input's gradient comes back in its own dtype).
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);
// Views of consecutive pieces along dim (split.cc), as the reference's: split into pieces
// of split_size (the last smaller), or of the given sizes, which must sum to the dim's
// size (a one-piece list needs std::vector<int64_t>{n}: a braced {n} picks split_size);
// chunk into ceil(size / chunks)-sized pieces (so possibly fewer than chunks).
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& split_sizes,
                          int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
// Tiles x repeats[i] times along dim i (at least x.dim() counts; extra leading ones add
// dims), a copy; the gradient sums the tiles.
Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats);
Tensor clone(const Tensor& a);
Tensor contiguous(const Tensor& a);

// torch.nn.functional.pad (pad.cc): (before, after) for the last dim, then the one before
// it, ...; negative amounts crop. "constant" fills with value (0), any dims and dtype;
// "reflect" mirrors about the edge (amounts below the size), "replicate" repeats it, both
// for floating inputs; "circular" wraps around (amounts at most the size, or what a
// negative amount on the other side leaves), any dtype. These three pad the last 1-3 dims
// of an input with 1 or 2 more. Gradients sum the copies.
Tensor pad(const Tensor& input, const std::vector<int64_t>& pad,
           const std::string& mode = "constant", std::optional<double> value = std::nullopt);

// Devices and dtypes. to(device) is a copy ordered against both devices' current streams
// (runtime/memory/copy.h); its backward copies the gradient back (S7).
Tensor to(const Tensor& a, Device device, bool non_blocking = false);
Tensor to(const Tensor& a, DType dtype);

// In place: return `a`. copy_ from another device is one copy ordered against both
// devices' current streams, like to(device); its gradient goes back to src's device.
Tensor& add_(Tensor& a, const Tensor& b, double alpha = 1);
Tensor& mul_(Tensor& a, const Tensor& b);
Tensor& mul_(Tensor& a, double b);
Tensor& zero_(Tensor& a);
Tensor& fill_(Tensor& a, double value);
Tensor& copy_(Tensor& a, const Tensor& src);
// masked_fill in place: the mask broadcasts to a's shape (a itself does not grow).
Tensor& masked_fill_(Tensor& a, const Tensor& mask, double value);
Tensor& masked_fill_(Tensor& a, const Tensor& mask, const Tensor& value);

// Linear layers, activations, dropout and losses (nn_functional.cc, loss.cc), as
// PyTorch's torch.nn.functional.
// input [*, in], weight [out, in], bias [out] or undefined: input @ weight^T + bias.
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor());
Tensor softmax(const Tensor& input, int64_t dim);
Tensor log_softmax(const Tensor& input, int64_t dim);
// Zeroes each element with probability p and scales the rest by 1 / (1 - p) when
// training (identity otherwise); the mask comes from the seeded generator (manual_seed).
Tensor dropout(const Tensor& input, double p = 0.5, bool training = true);
// softmax(q k^T * scale + mask) v over the last two dims (attention.cc), as the reference's
// torch.nn.functional.scaled_dot_product_attention: query [..., L, E], key [..., S, E],
// value [..., S, Ev] with the same batch dims; attn_mask bool (true: take part) or float
// (added), broadcasting to [..., L, S]; is_causal hides keys j > i (not with a mask);
// scale defaults to 1 / sqrt(E). Without dropout one fused kernel each way that keeps
// O(L) for backward; with dropout_p > 0 the composite (dropout always applies: pass 0 in
// evaluation, as the reference's modules do).
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask = Tensor(), double dropout_p = 0.0,
                                    bool is_causal = false,
                                    std::optional<double> scale = std::nullopt);
// Category indices (int64) drawn from rows of non-negative weights (multinomial.cc), as
// torch.multinomial: [categories] -> [num_samples], [rows, categories] -> [rows,
// num_samples]; weights need not sum to 1. Seeded (manual_seed), the same on every device;
// without replacement zero-weight categories come after every positive one. ValueError
// (weights read on the host) for num_samples <= 0 or > categories without replacement,
// negative, infinite or NaN weights, a zero row. No gradient.
Tensor multinomial(const Tensor& input, int64_t num_samples, bool replacement = false);
Tensor flatten(const Tensor& input, int64_t start_dim = 0, int64_t end_dim = -1);
// Index of the largest element along dim (ties: the first), int64, no gradient.
Tensor argmax(const Tensor& input, int64_t dim, bool keepdim = false);
// weight [num_embeddings, D], indices int64 of any shape -> [*indices.shape, D]; the row
// padding_idx (when >= 0) gets no gradient. An index outside the table is a ValueError
// naming embedding (on sim at the next synchronisation).
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx = -1);
enum class Reduction { kNone, kMean, kSum };
struct NllLossOptions {
  Reduction reduction = Reduction::kMean;
  int64_t ignore_index = -100;
};
// log_probs [N, C] and target int64 [N], or unbatched [C] and a 0-dim target (the result
// is then 0-dim whatever the reduction); targets in [0, C) or ignore_index, else a
// ValueError naming the loss (on sim at the next synchronisation). The mean is over the
// targets not ignored: all ignored gives NaN with a zero gradient, as PyTorch.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const NllLossOptions& options = {});
struct CrossEntropyOptions {
  Reduction reduction = Reduction::kMean;
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
};
Tensor cross_entropy(const Tensor& input, const Tensor& target,
                     const CrossEntropyOptions& options = {});
// input and target broadcast together; shapes that differ draw a warning (runtime/
// warning.h), as in PyTorch, where they are almost always a mistake.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::kMean);

// Operators.
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return add(b, a); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
inline Tensor operator-(double a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return div(a, b); }
inline Tensor operator/(double a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
// Comparisons: bool tensors, e.g. where(x > 0.0, x, y).
inline Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
inline Tensor operator==(const Tensor& a, double b) { return eq(a, b); }
inline Tensor operator==(double a, const Tensor& b) { return eq(b, a); }
inline Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
inline Tensor operator!=(const Tensor& a, double b) { return ne(a, b); }
inline Tensor operator!=(double a, const Tensor& b) { return ne(b, a); }
inline Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
inline Tensor operator<(const Tensor& a, double b) { return lt(a, b); }
inline Tensor operator<(double a, const Tensor& b) { return gt(b, a); }
inline Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
inline Tensor operator<=(const Tensor& a, double b) { return le(a, b); }
inline Tensor operator<=(double a, const Tensor& b) { return ge(b, a); }
inline Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
inline Tensor operator>(const Tensor& a, double b) { return gt(a, b); }
inline Tensor operator>(double a, const Tensor& b) { return lt(b, a); }
inline Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
inline Tensor operator>=(const Tensor& a, double b) { return ge(a, b); }
inline Tensor operator>=(double a, const Tensor& b) { return le(b, a); }

}  // namespace streamgrad

#endif  // STREAMGRAD_OPS_OPS_H_
