// sgd_update and adam_update: every parameter of a list updated by one launch, element by
// element with the functors of kernels/functors/optim_ops.h; non_finite_check_and_unscale: every
// grad of a list unscaled and checked for Inf and NaN by one launch, likewise.
//
// The launch captures one compact layout per parameter (its operands' strides, merged as
// far as they allow), so a contiguous parameter is one row that the loops vectorise.
#include <cmath>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/checks.h"
#include "kernels/widen.h"
#include "kernels/dispatch/strided.h"
#include "kernels/foreach.h"
#include "kernels/functors/optim_ops.h"
#include "runtime/error.h"
#include "kernels/cuda/cuda_kernels.h"
#include "runtime/launch.h"

namespace streamgrad {
namespace kernels {
namespace {

using cpu::Layout;

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


// Calls f(std::true_type{}) or f(std::false_type{}): a runtime flag made a constant, so
// that the loops below are compiled once per combination of flags without branches in
// them (the functors test their flags per element; with constant flags the tests fold
// away and the contiguous loops vectorise).
template <typename F>
void with_flag(bool flag, F&& f) {
  if (flag) {
    f(std::true_type{});
  } else {
    f(std::false_type{});
  }
}

template <typename T, bool kDecay, bool kNesterov, bool kFresh>
void sgd_rows(SgdUpdate<T> op, const SgdItem& it) {
  op.decay = kDecay;
  op.nesterov = kNesterov;
  T* p0 = static_cast<T*>(it.param);
  const T* g0 = static_cast<const T*>(it.grad);
  T* b0 = static_cast<T*>(it.buf);
  cpu::for_each_row(it.layout, [&](const int64_t* off, int64_t n, const int64_t* st) {
    // A local copy with the flags set here: through the captured reference every store
    // to p might change the update's fields, which kept the loops scalar, testing the
    // flags per element.
    SgdUpdate<T> f = op;
    f.decay = kDecay;
    f.nesterov = kNesterov;
    T* p = p0 + off[0];
    const T* g = g0 + off[1];
    if (b0 == nullptr) {
      if (st[0] == 1 && st[1] == 1) {
        for (int64_t i = 0; i < n; ++i) p[i] = f(p[i], g[i]);
      } else {
        for (int64_t i = 0; i < n; ++i) p[i * st[0]] = f(p[i * st[0]], g[i * st[1]]);
      }
      return;
    }
    T* b = b0 + off[2];
    if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
      for (int64_t i = 0; i < n; ++i) p[i] = f(p[i], g[i], b[i], kFresh);
    } else {
      for (int64_t i = 0; i < n; ++i) {
        p[i * st[0]] = f(p[i * st[0]], g[i * st[1]], b[i * st[2]], kFresh);
      }
    }
  });
}

template <typename T>
void run_sgd(const SgdUpdate<T>& op, const SgdItem& it) {
  with_flag(op.decay, [&](auto decay) {
    with_flag(op.nesterov, [&](auto nesterov) {
      with_flag(it.fresh, [&](auto fresh) {
        sgd_rows<T, decltype(decay)::value, decltype(nesterov)::value, decltype(fresh)::value>(
            op, it);
      });
    });
  });
}


template <typename T, bool kDecay, bool kDecoupled>
void adam_rows(AdamUpdate<T> op, const AdamItem& it) {
  op.decay = kDecay;
  op.decoupled = kDecoupled;
  T* p0 = static_cast<T*>(it.param);
  const T* g0 = static_cast<const T*>(it.grad);
  T* m0 = static_cast<T*>(it.m);
  T* v0 = static_cast<T*>(it.v);
  const T inv = static_cast<T>(it.inv_sqrt_bias2);
  const T step = static_cast<T>(it.neg_step);
  if (it.fresh) {  // the moments start at 0; the update then reads what it wrote
    cpu::for_each_row(it.layout, [&](const int64_t* off, int64_t n, const int64_t* st) {
      for (int64_t i = 0; i < n; ++i) {
        m0[off[2] + i * st[2]] = T(0);
        v0[off[3] + i * st[3]] = T(0);
      }
    });
  }
  cpu::for_each_row(it.layout, [&](const int64_t* off, int64_t n, const int64_t* st) {
    AdamUpdate<T> f = op;  // a local copy with the flags set here, as in sgd_rows
    f.decay = kDecay;
    f.decoupled = kDecoupled;
    T* p = p0 + off[0];
    const T* g = g0 + off[1];
    T* m = m0 + off[2];
    T* v = v0 + off[3];
    if (st[0] == 1 && st[1] == 1 && st[2] == 1 && st[3] == 1) {
      for (int64_t i = 0; i < n; ++i) p[i] = f(p[i], g[i], m[i], v[i], inv, step);
    } else {
      for (int64_t i = 0; i < n; ++i) {
        p[i * st[0]] = f(p[i * st[0]], g[i * st[1]], m[i * st[2]], v[i * st[3]], inv, step);
      }
    }
  });
}

template <typename T>
void run_adam(const AdamUpdate<T>& op, const AdamItem& it) {
  with_flag(op.decay, [&](auto decay) {
    with_flag(op.decoupled, [&](auto decoupled) {
      adam_rows<T, decltype(decay)::value, decltype(decoupled)::value>(op, it);
    });
  });
}

// Unscales one grad in place; whether it held an Inf or NaN.
template <typename T>
bool unscale_rows(const UnscaleItem& it, T inv_scale) {
  T* g0 = static_cast<T*>(it.grad);
  int found = 0;
  cpu::for_each_row(it.layout, [&](const int64_t* off, int64_t n, const int64_t* st) {
    const NonFiniteCheckAndUnscale<T> f{inv_scale};  // local, as in sgd_rows
    int bad = 0;
    T* g = g0 + off[0];
    if (st[0] == 1) {
      for (int64_t i = 0; i < n; ++i) g[i] = f(g[i], bad);
    } else {
      for (int64_t i = 0; i < n; ++i) g[i * st[0]] = f(g[i * st[0]], bad);
    }
    found |= bad;
  });
  return found != 0;
}

}  // namespace

void sgd_update(const Stream& stream, const SgdHyper& h, const std::vector<SgdParam>& params) {
  const char* name = "sgd_update";
  cpu::check_stream(name, stream, /*has_cuda=*/true);
  if (params.empty()) return;
  std::vector<const View*> all;
  for (const SgdParam& e : params) {
    all.insert(all.end(), {&e.param, &e.grad});
    if (h.momentum != 0) all.push_back(&e.momentum_buffer);
  }
  if (cpu::Widen::applies(all)) {  // 16-bit parameters and state, updated in float32
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
  if (stream.device().type() == DeviceType::kCuda) {
    launch(stream, {name, reads, writes},
           [&] { cuda::sgd_update(stream, dtype, h, items); });
    return;
  }
  launch(stream, {name, reads, writes}, [items = std::move(items), dtype, h] {
    cpu::dispatch_floating(dtype, [&](auto t) {
      using T = decltype(t);
      const SgdUpdate<T> op = make_sgd_update<T>(h);
      for (const SgdItem& it : items) run_sgd(op, it);
    });
  });
}

void adam_update(const Stream& stream, const AdamHyper& h, const std::vector<AdamParam>& params) {
  const char* name = h.decoupled ? "adamw_update" : "adam_update";
  cpu::check_stream(name, stream, /*has_cuda=*/true);
  if (params.empty()) return;
  std::vector<const View*> all;
  for (const AdamParam& e : params) all.insert(all.end(), {&e.param, &e.grad, &e.exp_avg, &e.exp_avg_sq});
  if (cpu::Widen::applies(all)) {  // 16-bit parameters and moments, updated in float32
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
  if (stream.device().type() == DeviceType::kCuda) {
    launch(stream, {name, reads, writes},
           [&] { cuda::adam_update(stream, dtype, h, items); });
    return;
  }
  launch(stream, {name, reads, writes}, [items = std::move(items), dtype, h] {
    cpu::dispatch_floating(dtype, [&](auto t) {
      using T = decltype(t);
      const AdamUpdate<T> op = make_adam_update<T>(h);
      for (const AdamItem& it : items) run_adam(op, it);
    });
  });
}

void non_finite_check_and_unscale(const Stream& stream, const std::vector<View>& grads,
                                  const View& found_inf, double inv_scale) {
  const char* name = "non_finite_check_and_unscale";
  cpu::check_stream(name, stream, /*has_cuda=*/true);
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
  float* flag = static_cast<float*>(found_inf.data);
  if (stream.device().type() == DeviceType::kCuda) {
    launch(stream, {name, reads, writes},
           [&] { cuda::non_finite_check_and_unscale(stream, dtype, items, flag, inv_scale); });
    return;
  }
  launch(stream, {name, reads, writes}, [items = std::move(items), dtype, flag, inv_scale] {
    cpu::dispatch_floating(dtype, [&](auto t) {
      using T = decltype(t);
      const T inv = static_cast<T>(inv_scale);
      bool found = false;
      for (const UnscaleItem& it : items) found = unscale_rows(it, inv) || found;
      if (found) *flag = 1.0f;
    });
  });
}

}  // namespace kernels
}  // namespace streamgrad
