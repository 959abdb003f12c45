// layer_norm_forward, rms_norm_forward and their backwards: the front door
// (kernels/nn_kernels.h). Checks here, then the implementation registered for the stream's
// device (kernels/host/layer_norm.cc on cpu and sim, kernels/cuda/nn.cu on cuda): one
// kernel pair for both norms, NormRows::rms telling them apart.
//
// 16-bit views are normalised in float32 beside statistics and parameters of their dtype
// or float32 (front::call_mixed). Large ones are widened a chunk at a time, each chunk
// bitwise what the whole would give: the forward and grad_in by rows (rows are
// independent), grad_weight and grad_bias by columns (each column's sum over the rows
// is its own, in the same order whichever columns share the call).
#include <algorithm>

#include "kernels/checks.h"
#include "kernels/dispatch/kernel_args.h"
#include "kernels/dispatch/launch.h"
#include "kernels/dispatch/registry.h"
#include "kernels/front.h"
#include "kernels/nn_kernels.h"
#include "kernels/widen.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace kernels {
namespace {

using dispatch::KernelId;
using dispatch::LaunchSpec;
using front::Ptrs;

const char* forward_name(bool rms) { return rms ? "rms_norm" : "layer_norm"; }
const char* backward_name(bool rms) { return rms ? "rms_norm_backward" : "layer_norm_backward"; }

NormRows check_input(const char* kernel, const View& in, bool rms) {
  cpu::check_view(kernel, "in", in);
  cpu::check_floating(kernel, "in", in);
  SG_CHECK(in.dim() == 2 && in.is_contiguous(), ValueError, kernel,
           ": in must be a contiguous [M, N] view (rows to normalise), got ", cpu::describe(in));
  return NormRows{in.sizes[0], in.sizes[1], rms};
}

void check_rows(const char* kernel, const char* what, const View& v, const View& in,
                const NormRows& d) {
  cpu::check_view(kernel, what, v);
  cpu::check_same_dtype(kernel, what, v, "in", in);
  SG_CHECK(v.dim() == 2 && v.is_contiguous() && v.sizes[0] == d.m && v.sizes[1] == d.n,
           ValueError, kernel, ": ", what, " must be a contiguous [", d.m, ", ", d.n,
           "] view, got ", cpu::describe(v));
}

// A [length] vector beside in (statistics: one per row; parameters: one per column).
void check_vector(const char* kernel, const char* what, const View* v, const View& in,
                  int64_t length, const char* per) {
  if (v == nullptr) return;
  cpu::check_view(kernel, what, *v);
  cpu::check_same_dtype(kernel, what, *v, "in", in);
  SG_CHECK(v->dim() == 1 && v->is_contiguous() && v->sizes[0] == length, ValueError, kernel,
           ": ", what, " must be a contiguous [", length, "], one per ", per, ", got ",
           cpu::describe(*v));
}

template <typename T>
T* data_or_null(const View* v) {
  return v == nullptr ? nullptr : static_cast<T*>(v->data);
}

void forward_views(const dispatch::Impl<KernelId::kLayerNorm>& impl, const Stream& stream,
                   bool rms, const View& out, const View* mean, const View& rstd,
                   const View& in, const View* weight, const View* bias, double eps) {
  const char* name = forward_name(rms);
  const NormRows d = check_input(name, in, rms);
  check_rows(name, "out", out, in, d);
  cpu::check_disjoint(name, "out", out, "in", in);
  SG_CHECK(rms || mean != nullptr, ValueError, name, ": mean is required");
  check_vector(name, "mean", mean, in, d.m, "row");
  check_vector(name, "rstd", &rstd, in, d.m, "row");
  check_vector(name, "weight", weight, in, d.n, "column");
  check_vector(name, "bias", bias, in, d.n, "column");
  if (d.m == 0) return;
  impl.fn(stream, LaunchSpec(name, {&in, weight, bias}, {&out, mean, &rstd}), in.dtype, d, eps,
          out.data, data_or_null<void>(mean), rstd.data, in.data,
          data_or_null<const void>(weight), data_or_null<const void>(bias));
}

void backward_views(const dispatch::Impl<KernelId::kLayerNormBackward>& impl,
                    const Stream& stream, bool rms, const View* grad_in,
                    const View* grad_weight, const View* grad_bias, const View& grad_out,
                    const View& in, const View* mean, const View& rstd, const View* weight) {
  const char* name = backward_name(rms);
  const NormRows d = check_input(name, in, rms);
  check_rows(name, "grad_out", grad_out, in, d);
  if (grad_in != nullptr) {
    check_rows(name, "grad_in", *grad_in, in, d);
    cpu::check_disjoint(name, "grad_in", *grad_in, "in", in);
    cpu::check_disjoint(name, "grad_in", *grad_in, "grad_out", grad_out);
  }
  SG_CHECK(rms || mean != nullptr, ValueError, name, ": mean is required");
  check_vector(name, "mean", mean, in, d.m, "row");
  check_vector(name, "rstd", &rstd, in, d.m, "row");
  check_vector(name, "weight", weight, in, d.n, "column");
  check_vector(name, "grad_weight", grad_weight, in, d.n, "column");
  check_vector(name, "grad_bias", grad_bias, in, d.n, "column");
  // With no rows the parameter gradients are still written (zeros).
  if (grad_weight == nullptr && grad_bias == nullptr && d.m == 0) return;
  if (grad_in == nullptr && grad_weight == nullptr && grad_bias == nullptr) return;
  impl.fn(stream,
          LaunchSpec(name, {&grad_out, &in, mean, &rstd, weight},
                     {grad_in, grad_weight, grad_bias}),
          in.dtype, d, data_or_null<void>(grad_in), data_or_null<void>(grad_weight),
          data_or_null<void>(grad_bias), grad_out.data, in.data,
          data_or_null<const void>(mean), rstd.data, data_or_null<const void>(weight));
}

// Whether the views have the shapes the kernels want, so that chunks can be cut from
// them (a malformed call goes whole to the checks, which name what is wrong).
bool well_shaped(const View& in, std::initializer_list<const View*> rows,
                 std::initializer_list<const View*> per_row,
                 std::initializer_list<const View*> per_column) {
  if (in.dim() != 2) return false;
  const bool rows_ok = std::all_of(rows.begin(), rows.end(), [&](const View* v) {
    return v == nullptr || (v->dim() == 2 && v->sizes[0] == in.sizes[0] &&
                            v->sizes[1] == in.sizes[1]);
  });
  auto vector_of = [](int64_t n) {
    return [n](const View* v) { return v == nullptr || (v->dim() == 1 && v->sizes[0] == n); };
  };
  return rows_ok && std::all_of(per_row.begin(), per_row.end(), vector_of(in.sizes[0])) &&
         std::all_of(per_column.begin(), per_column.end(), vector_of(in.sizes[1]));
}

// [begin, begin + n) of an optional view along `dim`, kept alive by the caller.
View part(const View* v, int64_t dim, int64_t begin, int64_t n) {
  return v != nullptr ? cpu::slice_of(*v, dim, begin, n) : View();
}
const View* ptr(const View* original, const View& part) {
  return original != nullptr ? &part : nullptr;
}

void norm_forward(const Stream& stream, bool rms, const View& out, const View* mean,
                  const View& rstd, const View& in, const View* weight, const View* bias,
                  double eps) {
  const char* name = forward_name(rms);
  const auto impl = dispatch::resolve<KernelId::kLayerNorm>(name, stream);
  if (front::widens_mixed(impl.options, {&out, &in}, {mean, &rstd, weight, bias}) &&
      well_shaped(in, {&out}, {mean, &rstd}, {weight, bias})) {
    const int64_t m = in.sizes[0];
    const int64_t chunk = cpu::batch_chunk(stream, 2 * in.sizes[1]);
    if (chunk < m) {
      for (int64_t r = 0; r < m; r += chunk) {
        const int64_t k = std::min(chunk, m - r);
        const View mc = part(mean, 0, r, k);
        norm_forward(stream, rms, cpu::slice_of(out, 0, r, k), ptr(mean, mc),
                     cpu::slice_of(rstd, 0, r, k), cpu::slice_of(in, 0, r, k), weight, bias,
                     eps);
      }
      return;
    }
  }
  front::call_mixed(impl, stream, name, Ptrs<3>{&out, mean, &rstd}, Ptrs<3>{&in, weight, bias},
                    {mean, &rstd, weight, bias},
                    [&](const Ptrs<3>& o, const Ptrs<3>& i, bool) {
                      forward_views(impl, stream, rms, *o[0], o[1], *o[2], *i[0], i[1], i[2],
                                    eps);
                    });
}

void norm_backward(const Stream& stream, bool rms, const View* grad_in, const View* grad_weight,
                   const View* grad_bias, const View& grad_out, const View& in,
                   const View* mean, const View& rstd, const View* weight) {
  const char* name = backward_name(rms);
  const auto impl = dispatch::resolve<KernelId::kLayerNormBackward>(name, stream);
  if (front::widens_mixed(impl.options, {grad_in, &grad_out, &in},
                          {grad_weight, grad_bias, mean, &rstd, weight}) &&
      well_shaped(in, {grad_in, &grad_out}, {mean, &rstd}, {weight, grad_weight, grad_bias})) {
    const int64_t m = in.sizes[0], n = in.sizes[1];
    const int64_t row_chunk = cpu::batch_chunk(stream, 3 * n);
    const int64_t column_chunk = cpu::batch_chunk(stream, 2 * m);
    const bool params = grad_weight != nullptr || grad_bias != nullptr;
    if ((grad_in != nullptr && row_chunk < m) || (params && column_chunk < n)) {
      for (int64_t r = 0; grad_in != nullptr && r < m; r += row_chunk) {
        const int64_t k = std::min(row_chunk, m - r);
        const View gi = cpu::slice_of(*grad_in, 0, r, k), mc = part(mean, 0, r, k);
        norm_backward(stream, rms, &gi, nullptr, nullptr, cpu::slice_of(grad_out, 0, r, k),
                      cpu::slice_of(in, 0, r, k), ptr(mean, mc), cpu::slice_of(rstd, 0, r, k),
                      weight);
      }
      for (int64_t c = 0; params && c < n; c += column_chunk) {
        const int64_t k = std::min(column_chunk, n - c);
        const View gw = part(grad_weight, 0, c, k), gb = part(grad_bias, 0, c, k);
        norm_backward(stream, rms, nullptr, ptr(grad_weight, gw), ptr(grad_bias, gb),
                      cpu::slice_of(grad_out, 1, c, k), cpu::slice_of(in, 1, c, k), mean, rstd,
                      nullptr);
      }
      return;
    }
  }
  front::call_mixed(impl, stream, name, Ptrs<3>{grad_in, grad_weight, grad_bias},
                    Ptrs<5>{&grad_out, &in, mean, &rstd, weight},
                    {grad_weight, grad_bias, mean, &rstd, weight},
                    [&](const Ptrs<3>& o, const Ptrs<5>& i, bool) {
                      backward_views(impl, stream, rms, o[0], o[1], o[2], *i[0], *i[1], i[2],
                                     *i[3], i[4]);
                    });
}

}  // namespace

void layer_norm_forward(const Stream& stream, const View& out, const View& mean,
                        const View& rstd, const View& in, const View* weight, const View* bias,
                        double eps) {
  norm_forward(stream, /*rms=*/false, out, &mean, rstd, in, weight, bias, eps);
}

void rms_norm_forward(const Stream& stream, const View& out, const View& rstd, const View& in,
                      const View* weight, double eps) {
  norm_forward(stream, /*rms=*/true, out, nullptr, rstd, in, weight, nullptr, eps);
}

void layer_norm_backward(const Stream& stream, const View* grad_in, const View* grad_weight,
                         const View* grad_bias, const View& grad_out, const View& in,
                         const View& mean, const View& rstd, const View* weight) {
  norm_backward(stream, /*rms=*/false, grad_in, grad_weight, grad_bias, grad_out, in, &mean,
                rstd, weight);
}

void rms_norm_backward(const Stream& stream, const View* grad_in, const View* grad_weight,
                       const View& grad_out, const View& in, const View& rstd,
                       const View* weight) {
  norm_backward(stream, /*rms=*/true, grad_in, grad_weight, nullptr, grad_out, in, nullptr,
                rstd, weight);
}

}  // namespace kernels
}  // namespace streamgrad
