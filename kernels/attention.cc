// attention_forward and attention_backward: the front door (kernels/nn_kernels.h). Checks
// here, then the implementation registered for the stream's device (kernels/host/
// attention.cc on cpu and sim, kernels/cuda/attention.cu on cuda). 16-bit q, k, v (and
// grads) are computed in float32 beside a float32 lse and mask (front::call_mixed).
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

void check_3d(const char* kernel, const char* what, const View& v, int64_t b, int64_t r,
              int64_t c) {
  cpu::check_view(kernel, what, v);
  SG_CHECK(v.dim() == 3 && v.is_contiguous() && v.sizes[0] == b && v.sizes[1] == r &&
               (c < 0 || v.sizes[2] == c),
           ValueError, kernel, ": ", what, " must be a contiguous [", b, ", ", r, ", ",
           c < 0 ? std::string("D") : std::to_string(c), "] view, got ", cpu::describe(v));
}

// The shape of a call from q, k and v, checked.
AttentionShape shape_of(const char* kernel, const View& q, const View& k, const View& v,
                        const View* mask, bool causal, double scale) {
  cpu::check_view(kernel, "q", q);
  cpu::check_floating(kernel, "q", q);
  SG_CHECK(q.dim() == 3 && q.is_contiguous(), ValueError, kernel,
           ": q must be a contiguous [BH, Tq, D] view, got ", cpu::describe(q));
  const int64_t bh = q.sizes[0], tq = q.sizes[1], d = q.sizes[2];
  cpu::check_view(kernel, "k", k);
  SG_CHECK(k.dim() == 3, ValueError, kernel, ": k must be a contiguous [", bh, ", Tk, ", d,
           "] view, got ", cpu::describe(k));
  check_3d(kernel, "k", k, bh, k.sizes[1], d);
  cpu::check_same_dtype(kernel, "k", k, "q", q);
  const int64_t tk = k.sizes[1];
  check_3d(kernel, "v", v, bh, tk, -1);
  cpu::check_same_dtype(kernel, "v", v, "q", q);
  bool batched = false;
  if (mask != nullptr) {
    cpu::check_view(kernel, "mask", *mask);
    batched = mask->dim() == 3;
    SG_CHECK(mask->is_contiguous() &&
                 ((mask->dim() == 2 && mask->sizes[0] == tq && mask->sizes[1] == tk) ||
                  (batched && mask->sizes[0] == bh && mask->sizes[1] == tq &&
                   mask->sizes[2] == tk)),
             ValueError, kernel, ": mask must be a contiguous [", tq, ", ", tk, "] or [", bh,
             ", ", tq, ", ", tk, "] view, got ", cpu::describe(*mask));
  }
  SG_CHECK(scale == scale, ValueError, kernel, ": scale is NaN");
  return AttentionShape{bh, tq, tk, d, v.sizes[2], causal, scale, batched};
}

// lse, and a mask, have q's dtype, or float32 beside a 16-bit q.
void check_side(const char* kernel, const char* what, const View& v, const View& q) {
  const bool ok =
      v.dtype == q.dtype || (v.dtype == DType::kFloat32 && is_reduced_floating(q.dtype));
  SG_CHECK(ok, ValueError, kernel, ": ", what, " must be ", dtype_name(q.dtype),
           is_reduced_floating(q.dtype) ? " or float32" : "", " beside q ", cpu::describe(q),
           ", got ", cpu::describe(v));
}

const void* data_or_null(const View* v) { return v == nullptr ? nullptr : v->data; }
void* out_or_null(const View* v) { return v == nullptr ? nullptr : v->data; }

}  // namespace

void attention_forward(const Stream& stream, const View& out, const View& lse, const View& q,
                       const View& k, const View& v, const View* mask, bool causal,
                       double scale) {
  const char* name = "attention";
  const auto impl = dispatch::resolve<KernelId::kAttention>(name, stream);
  const AttentionShape s = shape_of(name, q, k, v, mask, causal, scale);
  check_3d(name, "out", out, s.bh, s.tq, s.dv);
  cpu::check_same_dtype(name, "out", out, "q", q);
  cpu::check_view(name, "lse", lse);
  SG_CHECK(lse.dim() == 2 && lse.is_contiguous() && lse.sizes[0] == s.bh && lse.sizes[1] == s.tq,
           ValueError, name, ": lse must be a contiguous [", s.bh, ", ", s.tq, "] view, got ",
           cpu::describe(lse));
  check_side(name, "lse", lse, q);
  if (mask != nullptr) check_side(name, "mask", *mask, q);
  for (const View* in : {&q, &k, &v}) cpu::check_disjoint(name, "out", out, "an input", *in);
  if (s.bh * s.tq == 0) return;
  front::call_mixed(impl, stream, name, Ptrs<2>{&out, &lse}, Ptrs<4>{&q, &k, &v, mask},
                    {&lse, mask}, [&](const Ptrs<2>& o, const Ptrs<4>& i, bool) {
                      impl.fn(stream, LaunchSpec(name, {i[0], i[1], i[2], i[3]}, {o[0], o[1]}),
                              i[0]->dtype, s, o[0]->data, o[1]->data, i[0]->data, i[1]->data,
                              i[2]->data, data_or_null(i[3]));
                    });
}

void attention_backward(const Stream& stream, const View* grad_q, const View* grad_k,
                        const View* grad_v, const View& grad_out, const View& q, const View& k,
                        const View& v, const View& out, const View& lse, const View* mask,
                        bool causal, double scale) {
  const char* name = "attention_backward";
  const auto impl = dispatch::resolve<KernelId::kAttentionBackward>(name, stream);
  const AttentionShape s = shape_of(name, q, k, v, mask, causal, scale);
  check_3d(name, "out", out, s.bh, s.tq, s.dv);
  check_3d(name, "grad_out", grad_out, s.bh, s.tq, s.dv);
  for (const View* t : {&out, &grad_out}) cpu::check_same_dtype(name, "out", *t, "q", q);
  check_side(name, "lse", lse, q);
  if (mask != nullptr) check_side(name, "mask", *mask, q);
  const View* grads[3] = {grad_q, grad_k, grad_v};
  const View* of[3] = {&q, &k, &v};
  const char* names[3] = {"grad_q", "grad_k", "grad_v"};
  for (int i = 0; i < 3; ++i) {
    if (grads[i] == nullptr) continue;
    check_3d(name, names[i], *grads[i], of[i]->sizes[0], of[i]->sizes[1], of[i]->sizes[2]);
    cpu::check_same_dtype(name, names[i], *grads[i], "q", q);
    for (const View* in : {&q, &k, &v, &out, &grad_out}) {
      cpu::check_disjoint(name, names[i], *grads[i], "an input", *in);
    }
  }
  if (s.bh == 0 || (grad_q == nullptr && grad_k == nullptr && grad_v == nullptr)) return;
  front::call_mixed(impl, stream, name, Ptrs<3>{grad_q, grad_k, grad_v},
                    Ptrs<7>{&grad_out, &q, &k, &v, &out, &lse, mask}, {&lse, mask},
                    [&](const Ptrs<3>& o, const Ptrs<7>& i, bool) {
                      impl.fn(stream,
                              LaunchSpec(name, {i[0], i[1], i[2], i[3], i[4], i[5], i[6]},
                                         {o[0], o[1], o[2]}),
                              i[1]->dtype, s, out_or_null(o[0]), out_or_null(o[1]),
                              out_or_null(o[2]), i[0]->data, i[1]->data, i[2]->data,
                              i[3]->data, i[4]->data, i[5]->data, data_or_null(i[6]));
                    });
}

}  // namespace kernels
}  // namespace streamgrad
