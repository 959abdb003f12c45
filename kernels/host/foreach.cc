// sgd_update, adam_update and non_finite_check_and_unscale on the host: every item of a
// list in one task, element by element with the functors of kernels/functors/optim_ops.h.
// Each item's layout merges its operands' strides as far as they allow, so a contiguous
// parameter is one row that the loops vectorise.
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/functors/optim_ops.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/loops.h"

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace {

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
  for_each_row(it.layout, [&](const int64_t* off, int64_t n, const int64_t* st) {
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


// Whether n elements at p and at q share no byte.
template <typename T, typename U>
bool apart(const T* p, const U* q, int64_t n) {
  const auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(q);
  const auto bytes = static_cast<uintptr_t>(n) * sizeof(T);
  return a + bytes <= b || b + bytes <= a;
}

// Contiguous, pairwise disjoint rows go to the level's vector loop (`nl`, the level of
// the launch); others run here element by element, in order.
template <typename T, bool kDecay, bool kDecoupled>
void adam_rows(AdamUpdate<T> op, const AdamItem& it, const NnLoops& nl) {
  op.decay = kDecay;
  op.decoupled = kDecoupled;
  T* p0 = static_cast<T*>(it.param);
  const T* g0 = static_cast<const T*>(it.grad);
  T* m0 = static_cast<T*>(it.m);
  T* v0 = static_cast<T*>(it.v);
  const T inv = static_cast<T>(it.inv_sqrt_bias2);
  const T step = static_cast<T>(it.neg_step);
  if (it.fresh) {  // the moments start at 0; the update then reads what it wrote
    for_each_row(it.layout, [&](const int64_t* off, int64_t n, const int64_t* st) {
      for (int64_t i = 0; i < n; ++i) {
        m0[off[2] + i * st[2]] = T(0);
        v0[off[3] + i * st[3]] = T(0);
      }
    });
  }
  for_each_row(it.layout, [&](const int64_t* off, int64_t n, const int64_t* st) {
    AdamUpdate<T> f = op;  // a local copy with the flags set here, as in sgd_rows
    f.decay = kDecay;
    f.decoupled = kDecoupled;
    T* p = p0 + off[0];
    const T* g = g0 + off[1];
    T* m = m0 + off[2];
    T* v = v0 + off[3];
    const bool disjoint = apart(p, g, n) && apart(p, m, n) && apart(p, v, n) &&
                          apart(g, m, n) && apart(g, v, n) && apart(m, v, n);
    if (st[0] == 1 && st[1] == 1 && st[2] == 1 && st[3] == 1 && disjoint) {
      nl.adam_row(std::is_same<T, float>::value ? DType::kFloat32 : DType::kFloat64, &f, p, g, m,
                  v, n, it.inv_sqrt_bias2, it.neg_step);
    } else if (st[0] == 1 && st[1] == 1 && st[2] == 1 && st[3] == 1) {
      for (int64_t i = 0; i < n; ++i) p[i] = f(p[i], g[i], m[i], v[i], inv, step);
    } else {
      for (int64_t i = 0; i < n; ++i) {
        p[i * st[0]] = f(p[i * st[0]], g[i * st[1]], m[i * st[2]], v[i * st[3]], inv, step);
      }
    }
  });
}

template <typename T>
void run_adam(const AdamUpdate<T>& op, const AdamItem& it, const NnLoops& nl) {
  with_flag(op.decay, [&](auto decay) {
    with_flag(op.decoupled, [&](auto decoupled) {
      adam_rows<T, decltype(decay)::value, decltype(decoupled)::value>(op, it, nl);
    });
  });
}

// Unscales one grad in place; whether it held an Inf or NaN.
template <typename T>
bool unscale_rows(const UnscaleItem& it, T inv_scale) {
  T* g0 = static_cast<T*>(it.grad);
  int found = 0;
  for_each_row(it.layout, [&](const int64_t* off, int64_t n, const int64_t* st) {
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

void sgd_update(const Stream& stream, const LaunchSpec& spec, DType dtype, const SgdHyper& h,
                const std::vector<SgdItem>& items) {
  dispatch::enqueue(
      stream, spec,
      [dtype](const SgdHyper& hyper, const std::vector<SgdItem>& list) {
        dispatch_floating(dtype, [&](auto t) {
          using T = decltype(t);
          const SgdUpdate<T> op = make_sgd_update<T>(hyper);
          for (const SgdItem& it : list) run_sgd(op, it);
        });
      },
      h, items);
}

void adam_update(const Stream& stream, const LaunchSpec& spec, DType dtype, const AdamHyper& h,
                 const std::vector<AdamItem>& items) {
  dispatch::enqueue(
      stream, spec,
      [dtype, nl = &nn_loops()](const AdamHyper& hyper, const std::vector<AdamItem>& list) {
        dispatch_floating(dtype, [&](auto t) {
          using T = decltype(t);
          const AdamUpdate<T> op = make_adam_update<T>(hyper);
          for (const AdamItem& it : list) run_adam(op, it, *nl);
        });
      },
      h, items);
}

void non_finite_check_and_unscale(const Stream& stream, const LaunchSpec& spec, DType dtype,
                                  const std::vector<UnscaleItem>& items, float* flag,
                                  double inv_scale) {
  dispatch::enqueue(
      stream, spec,
      [dtype, flag, inv_scale](const std::vector<UnscaleItem>& list) {
        dispatch_floating(dtype, [&](auto t) {
          using T = decltype(t);
          const T inv = static_cast<T>(inv_scale);
          bool found = false;
          for (const UnscaleItem& it : list) found = unscale_rows(it, inv) || found;
          if (found) *flag = 1.0f;
        });
      },
      items);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad
