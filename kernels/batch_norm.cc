// batch_norm_forward and batch_norm_backward: the front door (kernels/nn_kernels.h).
// Checks here, then the implementation registered for the stream's device
// (kernels/host/batch_norm.cc on cpu and sim, kernels/cuda/nn.cu on cuda). 16-bit
// activations are normalised in float32 beside statistics and parameters of their dtype
// or float32 (mixed precision keeps those in float32), which every device's kernels take
// as they are (registered native_16bit); an implementation that is not would be widened
// whole by front::call_mixed.

#include "kernels/checks.h"
#include "kernels/dispatch/kernel_args.h"
#include "kernels/dispatch/launch.h"
#include "kernels/dispatch/registry.h"
#include "kernels/front.h"
#include "kernels/nn_kernels.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace kernels {
namespace {

using dispatch::KernelId;
using dispatch::LaunchSpec;
using front::Ptrs;
using NcsDims = NcsShape;

void check_nc_s(const char* kernel, const char* what, const View& v, const NcsDims& d) {
  cpu::check_view(kernel, what, v);
  SG_CHECK(v.dim() == 3 && v.is_contiguous() && v.sizes[0] == d.n && v.sizes[1] == d.c &&
               v.sizes[2] == d.s,
           ValueError, kernel, ": ", what, " must be a contiguous [", d.n, ", ", d.c, ", ", d.s,
           "] view, got ", cpu::describe(v));
}

// The statistics' and parameters' dtype, mean's: in's, or float32 beside 16-bit data
// where the device's kernel takes them so (native_16bit); a widened call sees float32
// throughout.
DType params_dtype(const char* kernel, bool native_16bit, const View& mean, const View& in) {
  const bool mixed = native_16bit && is_reduced_floating(in.dtype);
  SG_CHECK(mean.dtype == in.dtype || (mixed && mean.dtype == DType::kFloat32), ValueError,
           kernel, ": mean is ", cpu::describe(mean), "; expected ", dtype_name(in.dtype),
           mixed ? " or float32" : "", " beside in ", cpu::describe(in));
  return mean.dtype;
}

void check_channels(const char* kernel, const char* what, const View* v, DType params,
                    const NcsDims& d) {
  if (v == nullptr) return;
  cpu::check_view(kernel, what, *v);
  SG_CHECK(v->dtype == params, ValueError, kernel, ": ", what, " is ", cpu::describe(*v),
           "; expected ", dtype_name(params), " as the statistics");
  SG_CHECK(v->dim() == 1 && v->sizes[0] == d.c, ValueError, kernel, ": ", what,
           " must be [", d.c, "], one per channel, got ", cpu::describe(*v));
}

NcsDims check_input(const char* kernel, const View& in) {
  cpu::check_view(kernel, "in", in);
  cpu::check_floating(kernel, "in", in);
  SG_CHECK(in.dim() == 3 && in.is_contiguous(), ValueError, kernel,
           ": in must be a contiguous [N, C, S] view, got ", cpu::describe(in));
  return NcsDims{in.sizes[0], in.sizes[1], in.sizes[2]};
}

template <typename T>
T* data_or_null(const View* v) {
  return v == nullptr ? nullptr : static_cast<T*>(v->data);
}

void forward_views(const dispatch::Impl<KernelId::kBatchNorm>& impl, const Stream& stream,
                   const View& out, const View& mean, const View& var, const View& in,
                   const View* weight, const View* bias, double eps, const View* running_mean,
                   const View* running_var, double momentum) {
  const char* name = "batch_norm";
  const NcsDims d = check_input(name, in);
  check_nc_s(name, "out", out, d);
  cpu::check_same_dtype(name, "out", out, "in", in);
  cpu::check_disjoint(name, "out", out, "in", in);
  cpu::check_view(name, "mean", mean);
  const DType params = params_dtype(name, impl.options.native_16bit, mean, in);
  check_channels(name, "mean", &mean, params, d);
  check_channels(name, "var", &var, params, d);
  check_channels(name, "weight", weight, params, d);
  check_channels(name, "bias", bias, params, d);
  SG_CHECK(d.n * d.s > 0 || d.c == 0, ValueError, name, ": no values per channel in ",
           cpu::describe(in));
  RunningUpdate running;
  if (running_mean != nullptr) {
    // Written in place and read for the update: one value per channel, back to back.
    for (const auto& [what, v] : {std::pair<const char*, const View*>{"running_mean", running_mean},
                                  {"running_var", running_var}}) {
      check_channels(name, what, v, params, d);
      SG_CHECK(v->is_contiguous(), ValueError, name, ": ", what, " must be contiguous, got ",
               cpu::describe(*v));
      cpu::check_disjoint(name, what, *v, "mean", mean);
      cpu::check_disjoint(name, what, *v, "var", var);
    }
    cpu::check_disjoint(name, "running_mean", *running_mean, "running_var", *running_var);
    SG_CHECK(d.n * d.s > 1 || d.c == 0, ValueError, name,
             ": moving the running variance needs more than one value per channel, got ",
             cpu::describe(in));
    running = RunningUpdate{running_mean->data, running_var->data, momentum};
  }
  if (d.c == 0) return;
  impl.fn(stream,
          LaunchSpec(name, {&in, weight, bias, running_mean, running_var},
                     {&out, &mean, &var, running_mean, running_var}),
          in.dtype, params, d, eps, out.data, mean.data, var.data, in.data,
          data_or_null<const void>(weight), data_or_null<const void>(bias), running);
}

void backward_views(const dispatch::Impl<KernelId::kBatchNormBackward>& impl,
                    const Stream& stream, const View* grad_in, const View* grad_weight,
                    const View* grad_bias, const View& grad_out, const View& in,
                    const View& mean, const View& var, const View* weight, double eps) {
  const char* name = "batch_norm_backward";
  const NcsDims d = check_input(name, in);
  check_nc_s(name, "grad_out", grad_out, d);
  cpu::check_same_dtype(name, "grad_out", grad_out, "in", in);
  if (grad_in != nullptr) {
    check_nc_s(name, "grad_in", *grad_in, d);
    cpu::check_same_dtype(name, "grad_in", *grad_in, "in", in);
    cpu::check_disjoint(name, "grad_in", *grad_in, "in", in);
    cpu::check_disjoint(name, "grad_in", *grad_in, "grad_out", grad_out);
  }
  cpu::check_view(name, "mean", mean);
  const DType params = params_dtype(name, impl.options.native_16bit, mean, in);
  check_channels(name, "grad_weight", grad_weight, params, d);
  check_channels(name, "grad_bias", grad_bias, params, d);
  check_channels(name, "mean", &mean, params, d);
  check_channels(name, "var", &var, params, d);
  check_channels(name, "weight", weight, params, d);
  if (d.c == 0) return;
  impl.fn(stream,
          LaunchSpec(name, {&grad_out, &in, &mean, &var, weight},
                     {grad_in, grad_weight, grad_bias}),
          in.dtype, params, d, eps, data_or_null<void>(grad_in), data_or_null<void>(grad_weight),
          data_or_null<void>(grad_bias), grad_out.data, in.data, mean.data, var.data,
          data_or_null<const void>(weight));
}

}  // namespace

void batch_norm_forward(const Stream& stream, const View& out, const View& mean, const View& var,
                        const View& in, const View* weight, const View* bias, double eps,
                        const RunningStats* running) {
  const char* name = "batch_norm";
  const auto impl = dispatch::resolve<KernelId::kBatchNorm>(name, stream);
  const View* rm = running != nullptr ? &running->mean : nullptr;
  const View* rv = running != nullptr ? &running->var : nullptr;
  const double momentum = running != nullptr ? running->momentum : 0;
  front::call_mixed(impl, stream, name, Ptrs<5>{&out, &mean, &var, rm, rv},
                    Ptrs<3>{&in, weight, bias}, {&mean, &var, weight, bias, rm, rv},
                    [&](const Ptrs<5>& o, const Ptrs<3>& i, bool) {
                      forward_views(impl, stream, *o[0], *o[1], *o[2], *i[0], i[1], i[2], eps,
                                    o[3], o[4], momentum);
                    },
                    /*read_outs=*/{rm, rv});
}

void batch_norm_backward(const Stream& stream, const View* grad_in, const View* grad_weight,
                         const View* grad_bias, const View& grad_out, const View& in,
                         const View& mean, const View& var, const View* weight, double eps) {
  const char* name = "batch_norm_backward";
  const auto impl = dispatch::resolve<KernelId::kBatchNormBackward>(name, stream);
  front::call_mixed(impl, stream, name, Ptrs<3>{grad_in, grad_weight, grad_bias},
                    Ptrs<5>{&grad_out, &in, &mean, &var, weight},
                    {grad_weight, grad_bias, &mean, &var, weight},
                    [&](const Ptrs<3>& o, const Ptrs<5>& i, bool) {
                      backward_views(impl, stream, o[0], o[1], o[2], *i[0], *i[1], *i[2], *i[3],
                                     i[4], eps);
                    });
}

}  // namespace kernels
}  // namespace streamgrad
