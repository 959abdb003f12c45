// batch_norm_forward and batch_norm_backward on cpu and sim streams (kernels/nn_kernels.h).
//
// One channel at a time: its N rows of S contiguous values are read twice for the
// statistics (mean, then the centred sum of squares, as the composite op computed them)
// and once more to write, each pass a loop of the level in use (loops_nn.cc). Sums
// accumulate in double, in fixed lanes, so every level gives the same bits.
#include <algorithm>

#include "kernels/checks.h"
#include "kernels/widen.h"
#include "kernels/launch_kernel.h"
#include "kernels/dispatch/strided.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/nn_kernels.h"
#include "kernels/functors/norm_ops.h"
#include "runtime/error.h"

namespace streamgrad {
namespace kernels {
namespace {

using NcsDims = NcsShape;

void check_nc_s(const char* kernel, const char* what, const View& v, const NcsDims& d) {
  cpu::check_view(kernel, what, v);
  SG_CHECK(v.dim() == 3 && v.is_contiguous() && v.sizes[0] == d.n && v.sizes[1] == d.c &&
               v.sizes[2] == d.s,
           ValueError, kernel, ": ", what, " must be a contiguous [", d.n, ", ", d.c, ", ", d.s,
           "] view, got ", cpu::describe(v));
}

void check_channels(const char* kernel, const char* what, const View* v, const View& in,
                    const NcsDims& d) {
  if (v == nullptr) return;
  cpu::check_view(kernel, what, *v);
  cpu::check_same_dtype(kernel, what, *v, "in", in);
  SG_CHECK(v->dim() == 1 && v->sizes[0] == d.c, ValueError, kernel, ": ", what,
           " must be [", d.c, "], one per channel, got ", cpu::describe(*v));
}

NcsDims check_input(const char* kernel, const Stream& stream, const View& in) {
  cpu::check_stream(kernel, stream, /*has_cuda=*/true);
  cpu::check_view(kernel, "in", in);
  cpu::check_floating(kernel, "in", in);
  SG_CHECK(in.dim() == 3 && in.is_contiguous(), ValueError, kernel,
           ": in must be a contiguous [N, C, S] view, got ", cpu::describe(in));
  return NcsDims{in.sizes[0], in.sizes[1], in.sizes[2]};
}

// The level's loops, captured at launch: a sim stream runs the level it was launched with.
struct Levels {
  const cpu::Loops* loops;
  const cpu::NnLoops* nn;
};

Levels levels_now() { return {&cpu::loops(), &cpu::nn_loops()}; }

// The sum of n contiguous elements in kSumBlock blocks, added in order (as reduce() sums
// a row).
template <typename T>
double row_sum(const cpu::Loops& lp, DType dt, const T* p, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i += cpu::kSumBlock) {
    s += lp.sum_block(dt, p + i, n - i < cpu::kSumBlock ? n - i : cpu::kSumBlock);
  }
  return s;
}

template <typename T>
void forward_channel(const Levels& lv, DType dt, const NcsDims& d, int64_t c, T* out, T* mean,
                     T* var, const T* in, const T* weight, const T* bias, double eps) {
  const double m = static_cast<double>(d.n * d.s);
  const int64_t row_step = d.c * d.s;
  const T* first = in + c * d.s;
  double sum = 0;
  for (int64_t i = 0; i < d.n; ++i) sum += row_sum(*lv.loops, dt, first + i * row_step, d.s);
  const T mu = static_cast<T>(sum / m);
  double sq = 0;
  for (int64_t i = 0; i < d.n; ++i) sq += lv.nn->centred_squares(dt, first + i * row_step, d.s, mu);
  const T v = static_cast<T>(sq / m);
  mean[c] = mu;
  var[c] = v;
  const double coeffs[4] = {mu, batch_norm_invstd(v, eps), weight ? weight[c] : T(1),
                            bias ? bias[c] : T(0)};
  for (int64_t i = 0; i < d.n; ++i) {
    const int64_t at = c * d.s + i * row_step;
    lv.nn->batch_norm_apply(dt, out + at, in + at, d.s, coeffs);
  }
}

template <typename T>
void backward_channel(const Levels& lv, DType dt, const NcsDims& d, int64_t c, T* gin, T* gw,
                      T* gb, const T* g, const T* in, const T* mean, const T* var,
                      const T* weight, double eps) {
  const double m = static_cast<double>(d.n * d.s);
  const int64_t row_step = d.c * d.s;
  const T mu = mean[c];
  const T invstd = batch_norm_invstd(var[c], eps);
  double sum_g = 0, sum_gc = 0;
  for (int64_t i = 0; i < d.n; ++i) {
    const int64_t at = c * d.s + i * row_step;
    lv.nn->grad_sums(dt, g + at, in + at, d.s, mu, &sum_g, &sum_gc);
  }
  if (gb != nullptr) gb[c] = static_cast<T>(sum_g);
  if (gw != nullptr) gw[c] = static_cast<T>(sum_gc * invstd);
  if (gin == nullptr) return;
  const double coeffs[5] = {mu, invstd, weight ? weight[c] : T(1), static_cast<T>(sum_g / m),
                            static_cast<T>(sum_gc / m * invstd * invstd)};
  for (int64_t i = 0; i < d.n; ++i) {
    const int64_t at = c * d.s + i * row_step;
    lv.nn->batch_norm_input_grad(dt, gin + at, g + at, in + at, d.s, coeffs);
  }
}

template <typename T>
T* data_or_null(const View* v) {
  return v == nullptr ? nullptr : static_cast<T*>(v->data);
}

}  // namespace

void batch_norm_forward(const Stream& stream, const View& out, const View& mean, const View& var,
                        const View& in, const View* weight, const View* bias, double eps) {
  // 16-bit in and out; statistics and parameters of that dtype or float32 (mixed
  // precision keeps them in float32).
  if (cpu::Widen::applies_mixed({&out, &in}, {&mean, &var, weight, bias})) {
    // Channels are independent: large inputs are normalised a few channels at a time,
    // each chunk widened on its own.
    const int64_t channels = in.dim() == 3 && out.dim() == 3 ? in.sizes[1] : 0;
    const int64_t chunk = channels > 0 ? cpu::batch_chunk(3 * in.numel() / channels) : 0;
    if (channels > 0 && chunk < channels) {
      for (int64_t c = 0; c < channels; c += chunk) {
        const int64_t n = std::min(chunk, channels - c);
        const View wc = weight != nullptr ? cpu::slice_of(*weight, 0, c, n) : View();
        const View bc = bias != nullptr ? cpu::slice_of(*bias, 0, c, n) : View();
        batch_norm_forward(stream, cpu::slice_of(out, 1, c, n), cpu::slice_of(mean, 0, c, n),
                           cpu::slice_of(var, 0, c, n), cpu::slice_of(in, 1, c, n),
                           weight != nullptr ? &wc : nullptr, bias != nullptr ? &bc : nullptr,
                           eps);
      }
      return;
    }
    cpu::Widen w(stream, "batch_norm");
    batch_norm_forward(stream, w.out(out), w.out(mean), w.out(var), w.in(in), w.in(weight),
                       w.in(bias), eps);
    return w.finish();
  }
  const char* name = "batch_norm";
  const NcsDims d = check_input(name, stream, in);
  check_nc_s(name, "out", out, d);
  cpu::check_same_dtype(name, "out", out, "in", in);
  cpu::check_disjoint(name, "out", out, "in", in);
  check_channels(name, "mean", &mean, in, d);
  check_channels(name, "var", &var, in, d);
  check_channels(name, "weight", weight, in, d);
  check_channels(name, "bias", bias, in, d);
  SG_CHECK(d.n * d.s > 0 || d.c == 0, ValueError, name, ": no values per channel in ",
           cpu::describe(in));
  if (d.c == 0) return;
  cpu::launch_kernel_or_cuda(
      stream, name, {&in, weight, bias}, {&out, &mean, &var},
      [d, o = out.data, mn = mean.data, vr = var.data, x = in.data,
       w = data_or_null<void>(weight), b = data_or_null<void>(bias), eps, dt = in.dtype,
       lv = levels_now()] {
        cpu::dispatch_floating(dt, [&](auto t) {
          using T = decltype(t);
          for (int64_t c = 0; c < d.c; ++c) {
            forward_channel<T>(lv, dt, d, c, static_cast<T*>(o), static_cast<T*>(mn),
                               static_cast<T*>(vr), static_cast<const T*>(x),
                               static_cast<const T*>(w), static_cast<const T*>(b), eps);
          }
        });
      },
      [stream, d, o = out.data, mn = mean.data, vr = var.data, x = in.data,
       w = data_or_null<void>(weight), b = data_or_null<void>(bias), eps, dt = in.dtype] {
        cuda::batch_norm_forward(stream, dt, d, eps, o, mn, vr, x, w, b);
      });
}

void batch_norm_backward(const Stream& stream, const View* grad_in, const View* grad_weight,
                      const View* grad_bias, const View& grad_out, const View& in,
                      const View& mean, const View& var, const View* weight, double eps) {
  if (cpu::Widen::applies_mixed({grad_in, &grad_out, &in},
                                {grad_weight, grad_bias, &mean, &var, weight})) {
    const int64_t channels = in.dim() == 3 && grad_out.dim() == 3 ? in.sizes[1] : 0;
    const int64_t chunk = channels > 0 ? cpu::batch_chunk(3 * in.numel() / channels) : 0;
    if (channels > 0 && chunk < channels) {
      auto part = [](const View* v, int64_t dim, int64_t c, int64_t n) {
        return v != nullptr ? cpu::slice_of(*v, dim, c, n) : View();
      };
      for (int64_t c = 0; c < channels; c += chunk) {
        const int64_t n = std::min(chunk, channels - c);
        const View gi = part(grad_in, 1, c, n), gw = part(grad_weight, 0, c, n),
                   gb = part(grad_bias, 0, c, n), wt = part(weight, 0, c, n);
        batch_norm_backward(stream, grad_in != nullptr ? &gi : nullptr,
                            grad_weight != nullptr ? &gw : nullptr,
                            grad_bias != nullptr ? &gb : nullptr, cpu::slice_of(grad_out, 1, c, n),
                            cpu::slice_of(in, 1, c, n), cpu::slice_of(mean, 0, c, n),
                            cpu::slice_of(var, 0, c, n), weight != nullptr ? &wt : nullptr, eps);
      }
      return;
    }
    cpu::Widen w(stream, "batch_norm_backward");
    batch_norm_backward(stream, w.out(grad_in), w.out(grad_weight), w.out(grad_bias),
                        w.in(grad_out), w.in(in), w.in(mean), w.in(var), w.in(weight), eps);
    return w.finish();
  }
  const char* name = "batch_norm_backward";
  const NcsDims d = check_input(name, stream, in);
  check_nc_s(name, "grad_out", grad_out, d);
  cpu::check_same_dtype(name, "grad_out", grad_out, "in", in);
  if (grad_in != nullptr) {
    check_nc_s(name, "grad_in", *grad_in, d);
    cpu::check_same_dtype(name, "grad_in", *grad_in, "in", in);
    cpu::check_disjoint(name, "grad_in", *grad_in, "in", in);
    cpu::check_disjoint(name, "grad_in", *grad_in, "grad_out", grad_out);
  }
  check_channels(name, "grad_weight", grad_weight, in, d);
  check_channels(name, "grad_bias", grad_bias, in, d);
  check_channels(name, "mean", &mean, in, d);
  check_channels(name, "var", &var, in, d);
  check_channels(name, "weight", weight, in, d);
  if (d.c == 0) return;
  cpu::launch_kernel_or_cuda(
      stream, name, {&grad_out, &in, &mean, &var, weight}, {grad_in, grad_weight, grad_bias},
      [d, gi = data_or_null<void>(grad_in), gw = data_or_null<void>(grad_weight),
       gb = data_or_null<void>(grad_bias), g = grad_out.data, x = in.data, mn = mean.data,
       vr = var.data, w = data_or_null<void>(weight), eps, dt = in.dtype, lv = levels_now()] {
        cpu::dispatch_floating(dt, [&](auto t) {
          using T = decltype(t);
          for (int64_t c = 0; c < d.c; ++c) {
            backward_channel<T>(lv, dt, d, c, static_cast<T*>(gi), static_cast<T*>(gw),
                                static_cast<T*>(gb), static_cast<const T*>(g),
                                static_cast<const T*>(x), static_cast<const T*>(mn),
                                static_cast<const T*>(vr), static_cast<const T*>(w), eps);
          }
        });
      },
      [stream, d, gi = data_or_null<void>(grad_in), gw = data_or_null<void>(grad_weight),
       gb = data_or_null<void>(grad_bias), g = grad_out.data, x = in.data, mn = mean.data,
       vr = var.data, w = data_or_null<void>(weight), eps, dt = in.dtype] {
        cuda::batch_norm_backward(stream, dt, d, eps, gi, gw, gb, g, x, mn, vr, w);
      });
}

}  // namespace kernels
}  // namespace streamgrad
