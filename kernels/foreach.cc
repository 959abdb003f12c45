// sgd_update and adam_update: every parameter of a list updated by one launch;
// non_finite_check_and_unscale: every grad of a list unscaled and checked for Inf and NaN
// by one launch. The front door: the checks, the items (one compact layout per parameter,
// its operands' strides merged as far as they allow) and the ranges read and written are
// worked out here; the implementation registered for the stream's device runs them
// (kernels/host/foreach.cc on cpu and sim, kernels/cuda/foreach.cu on cuda). The lists
// have any number of operands, so 16-bit ones are widened here, with cpu::Widen, when
// front::widens says so.
#include <cmath>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/checks.h"
#include "kernels/dispatch/kernel_args.h"
#include "kernels/dispatch/launch.h"
#include "kernels/dispatch/registry.h"
#include "kernels/dispatch/strided.h"
#include "kernels/foreach.h"
#include "kernels/front.h"
#include "kernels/widen.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace kernels {
namespace {

using dispatch::KernelId;
using dispatch::LaunchSpec;

bool intersect(const View& a, const View& b) {
  const MemRange ra = a.byte_range(), rb = b.byte_range();
  if (ra.bytes == 0 || rb.bytes == 0) return false;
  const char* pa = static_cast<const char*>(ra.ptr);
  const char* pb = static_cast<const char*>(rb.ptr);
  return pa < pb + rb.bytes && pb < pa + ra.bytes;
}

// Whether `v` passes every check below, decided without formatting a message: a step
// checks every view of every parameter, so the common case must not build strings.
bool well_formed(const View& v, bool written) {
  if (v.strides.size() != v.sizes.size() || v.dim() > cpu::kMaxDims) return false;
  const int64_t n = v.numel();
  for (int64_t d = 0; d < v.dim(); ++d) {
    if (v.sizes[d] < 0 || v.strides[d] < 0) return false;
    if (written && n > 0 && v.strides[d] == 0 && v.sizes[d] > 1) return false;
  }
  return v.data != nullptr || n == 0;
}

// Checks one view of entry i against its parameter: well formed, the parameter's dtype
// and sizes, disjoint from the views checked before it in that entry.
void check_operand(const char* kernel, size_t i, const char* what, const View& v,
                   const View& param, std::initializer_list<const View*> earlier,
                   bool written) {
  bool ok = well_formed(v, written) && v.dtype == param.dtype && v.sizes == param.sizes;
  for (const View* e : earlier) ok = ok && !intersect(v, *e);
  if (ok) return;
  const std::string label = absl::StrCat("parameter ", i, "'s ", what);
  if (written) {
    cpu::check_output(kernel, label.c_str(), v);
  } else {
    cpu::check_view(kernel, label.c_str(), v);
  }
  cpu::check_same_dtype(kernel, absl::StrCat("parameter ", i).c_str(), param, label.c_str(), v);
  cpu::check_same_sizes(kernel, absl::StrCat("parameter ", i).c_str(), param, label.c_str(), v);
  for (const View* e : earlier) cpu::check_disjoint(kernel, label.c_str(), v, "another view", *e);
}

// The checks every entry starts with: its first view (`what` i: "parameter", "grad") is
// written, floating and of the list's dtype (that of entry 0).
void check_entry(const char* kernel, const char* what, size_t i, const View& v, DType dtype) {
  if (well_formed(v, true) && is_floating(v.dtype) && v.dtype == dtype) return;
  const std::string label = absl::StrCat(what, " ", i);
  cpu::check_output(kernel, label.c_str(), v);
  cpu::check_floating(kernel, label.c_str(), v);
  SG_CHECK(v.dtype == dtype, ValueError, kernel, ": ", label, " is ", cpu::describe(v), " but ",
           what, " 0 is ", dtype_name(dtype), "; one call takes one dtype (group the ", what,
           "s by device and dtype)");
}

void check_param(const char* kernel, size_t i, const View& param, DType dtype) {
  check_entry(kernel, "parameter", i, param, dtype);
}


}  // namespace

void sgd_update(const Stream& stream, const SgdHyper& h, const std::vector<SgdParam>& params) {
  const char* name = "sgd_update";
  const auto impl = dispatch::resolve<KernelId::kSgdUpdate>(name, stream);
  if (params.empty()) return;
  std::vector<const View*> all;
  for (const SgdParam& e : params) {
    all.insert(all.end(), {&e.param, &e.grad});
    if (h.momentum != 0) all.push_back(&e.momentum_buffer);
  }
  if (front::widens(impl.options, all)) {  // 16-bit parameters and state, updated in float32
    cpu::Widen w(stream, name);
    std::vector<SgdParam> wide = params;
    for (SgdParam& e : wide) {
      e.param = w.out(e.param, /*keep_values=*/true);
      e.grad = w.in(e.grad);
      if (h.momentum != 0) e.momentum_buffer = w.out(e.momentum_buffer, !e.fresh_buffer);
    }
    sgd_update(stream, h, wide);
    return w.finish();
  }
  const DType dtype = params[0].param.dtype;
  const bool momentum = h.momentum != 0;
  std::vector<SgdItem> items;
  std::vector<MemRange> reads, writes;
  items.reserve(params.size());
  reads.reserve(3 * params.size());
  writes.reserve(2 * params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const SgdParam& e = params[i];
    check_param(name, i, e.param, dtype);
    check_operand(name, i, "grad", e.grad, e.param, {&e.param}, false);
    if (momentum) {
      check_operand(name, i, "momentum buffer", e.momentum_buffer, e.param,
                    {&e.param, &e.grad}, true);
    }
    if (e.param.numel() == 0) continue;
    const View& b = momentum ? e.momentum_buffer : e.param;
    SgdItem it;
    it.layout = cpu::make_layout<3>(e.param.sizes, {e.param.strides.data(), e.grad.strides.data(),
                                                     b.strides.data()});
    it.param = e.param.data;
    it.grad = e.grad.data;
    it.buf = momentum ? e.momentum_buffer.data : nullptr;
    it.fresh = e.fresh_buffer;
    items.push_back(it);
    reads.push_back(e.grad.byte_range());
    reads.push_back(e.param.byte_range());
    writes.push_back(e.param.byte_range());
    if (momentum) {
      // A fresh buffer is only written; reading it would be a read of uninitialised memory.
      if (!e.fresh_buffer) reads.push_back(b.byte_range());
      writes.push_back(b.byte_range());
    }
  }
  if (items.empty()) return;
  impl.fn(stream, LaunchSpec(name, reads, writes), dtype, h, items);
}

void adam_update(const Stream& stream, const AdamHyper& h, const std::vector<AdamParam>& params) {
  const char* name = h.decoupled ? "adamw_update" : "adam_update";
  const auto impl = dispatch::resolve<KernelId::kAdamUpdate>(name, stream);
  if (params.empty()) return;
  std::vector<const View*> all;
  for (const AdamParam& e : params) all.insert(all.end(), {&e.param, &e.grad, &e.exp_avg, &e.exp_avg_sq});
  if (front::widens(impl.options, all)) {  // 16-bit parameters and moments, in float32
    cpu::Widen w(stream, name);
    std::vector<AdamParam> wide = params;
    for (AdamParam& e : wide) {
      e.param = w.out(e.param, /*keep_values=*/true);
      e.grad = w.in(e.grad);
      e.exp_avg = w.out(e.exp_avg, !e.fresh_state);
      e.exp_avg_sq = w.out(e.exp_avg_sq, !e.fresh_state);
    }
    adam_update(stream, h, wide);
    return w.finish();
  }
  const DType dtype = params[0].param.dtype;
  std::vector<AdamItem> items;
  std::vector<MemRange> reads, writes;
  items.reserve(params.size());
  reads.reserve(4 * params.size());
  writes.reserve(3 * params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const AdamParam& e = params[i];
    check_param(name, i, e.param, dtype);
    check_operand(name, i, "grad", e.grad, e.param, {&e.param}, false);
    check_operand(name, i, "exp_avg", e.exp_avg, e.param, {&e.param, &e.grad}, true);
    check_operand(name, i, "exp_avg_sq", e.exp_avg_sq, e.param, {&e.param, &e.grad, &e.exp_avg},
                  true);
    SG_CHECK(e.step >= 1 && std::isfinite(e.step), ValueError, name, ": parameter ", i,
             " has step ", e.step, "; steps count from 1");
    if (e.param.numel() == 0) continue;
    AdamItem it;
    it.layout = cpu::make_layout<4>(e.param.sizes, {e.param.strides.data(), e.grad.strides.data(),
                                                     e.exp_avg.strides.data(),
                                                     e.exp_avg_sq.strides.data()});
    it.param = e.param.data;
    it.grad = e.grad.data;
    it.m = e.exp_avg.data;
    it.v = e.exp_avg_sq.data;
    // As the per-tensor path computes them: in double, rounded to T once.
    const double bias1 = 1 - std::pow(h.beta1, e.step), bias2 = 1 - std::pow(h.beta2, e.step);
    it.inv_sqrt_bias2 = 1.0 / std::sqrt(bias2);
    it.neg_step = -h.lr / bias1;
    it.fresh = e.fresh_state;
    items.push_back(it);
    reads.push_back(e.grad.byte_range());
    reads.push_back(e.param.byte_range());
    writes.push_back(e.param.byte_range());
    for (const View* s : {&e.exp_avg, &e.exp_avg_sq}) {
      if (!e.fresh_state) reads.push_back(s->byte_range());
      writes.push_back(s->byte_range());
    }
  }
  if (items.empty()) return;
  impl.fn(stream, LaunchSpec(name, reads, writes), dtype, h, items);
}

void non_finite_check_and_unscale(const Stream& stream, const std::vector<View>& grads,
                                  const View& found_inf, double inv_scale) {
  const char* name = "non_finite_check_and_unscale";
  const auto impl = dispatch::resolve<KernelId::kNonFiniteCheckAndUnscale>(name, stream);
  if (!well_formed(found_inf, true) || found_inf.dtype != DType::kFloat32 ||
      found_inf.numel() != 1) {
    cpu::check_output(name, "found_inf", found_inf);
    cpu::check_dtype(name, "found_inf", found_inf, DType::kFloat32);
    SG_CHECK(found_inf.numel() == 1, ValueError, name, ": found_inf is ",
             cpu::describe(found_inf), "; it must be one float32 element (the flag)");
  }
  if (grads.empty()) return;
  const DType dtype = grads[0].dtype;
  SG_CHECK(!is_reduced_floating(dtype), ValueError, name, ": grad 0 is ", cpu::describe(grads[0]),
           "; the grads a loss scaler unscales are float32 or float64");
  std::vector<UnscaleItem> items;
  std::vector<MemRange> reads, writes;
  items.reserve(grads.size());
  reads.reserve(grads.size() + 1);
  writes.reserve(grads.size() + 1);
  for (size_t i = 0; i < grads.size(); ++i) {
    const View& g = grads[i];
    check_entry(name, "grad", i, g, dtype);
    if (intersect(g, found_inf)) {
      cpu::check_disjoint(name, absl::StrCat("grad ", i).c_str(), g, "found_inf", found_inf);
    }
    if (g.numel() == 0) continue;
    items.push_back(UnscaleItem{cpu::make_layout<1>(g.sizes, {g.strides.data()}), g.data});
    reads.push_back(g.byte_range());
    writes.push_back(g.byte_range());
  }
  if (items.empty()) return;
  // Read too: the flag's final value depends on what the caller wrote into it before.
  reads.push_back(found_inf.byte_range());
  writes.push_back(found_inf.byte_range());
  impl.fn(stream, LaunchSpec(name, reads, writes), dtype, items,
          static_cast<float*>(found_inf.data), inv_scale);
}

}  // namespace kernels
}  // namespace streamgrad
