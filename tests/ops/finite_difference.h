// Helpers shared by the op tests: gradient checks of first and second order (analytical
// gradients against the library's central differences, gradcheck/gradcheck.h) and input
// factories.
//
// Offers:
//   test_device()        Catch2 GENERATE over cpu and sim:0.
//   input(values, shape, device)   a float64 leaf that requires grad.
//   random_input(shape, device, seed, lo, hi)   the same with seeded uniform values; with
//                        `gap` > 0 the values are also at least `gap` away from 0 and from
//                        each other (for relu/abs/max kinks).
//   check_gradients(f, inputs)    analytical gradients of sum(f(x) * w) for a fixed
//                        random w, by grad(), against central differences; every
//                        element of every input.
//   check_second_order(f, inputs) the gradient of sum_i sum(grad_i * v_i) (first
//                        gradients taken with create_graph) against central differences
//                        of that same scalar.
//   values(t)            a float64 tensor's values on the host.
//   check_values(t, want, tol), check_same(got, want, tol)   values within a relative
//                        tolerance of a list / of another tensor of the same shape.
//   KernelNames          the names of the kernels launched while it lives (fusion tests).
//
// Thread-safety: test thread only. Failure: Catch2 assertions naming the input, element,
// analytical and numerical values.
#ifndef STREAMGRAD_TESTS_OPS_FINITE_DIFFERENCE_H_
#define STREAMGRAD_TESTS_OPS_FINITE_DIFFERENCE_H_

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "engine/backward.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "gradcheck/gradcheck.h"
#include "ops/ops.h"
#include "runtime/runtime.h"
#include "tests/device_names.h"

namespace streamgrad {
namespace testing {

using Fn = std::function<Tensor(const TensorList&)>;

inline Device test_device() { return Device(GENERATE(from_range(device_names()))); }

inline TensorOptions f64(Device d) { return TensorOptions().dtype(DType::kFloat64).device(d); }

inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

inline Tensor input(const std::vector<double>& v, const Shape& shape, Device d,
                    bool requires_grad = true) {
  Tensor t = from_vector<double>(v, shape, f64(d));
  if (requires_grad) t.requires_grad_();
  return t;
}

inline std::vector<double> random_values(int64_t n, uint64_t seed, double lo = -1, double hi = 1,
                                         double gap = 0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v;
  while (static_cast<int64_t>(v.size()) < n) {
    const double x = u(rng);
    bool ok = std::abs(x) >= gap;
    for (double y : v) ok = ok && std::abs(x - y) >= gap;
    if (ok || gap == 0) v.push_back(x);
  }
  return v;
}

inline Tensor random_input(const Shape& shape, Device d, uint64_t seed, double lo = -1,
                           double hi = 1, double gap = 0) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return input(random_values(n, seed, lo, hi, gap), shape, d);
}

namespace detail {

inline Tensor weighted_sum(const Tensor& y, const Tensor& w) { return sum(mul(y, w)); }

inline bool close(double got, double want, double atol, double rtol) {
  return std::abs(got - want) <= atol + rtol * std::abs(want);
}

// The derivatives of the scalar function `scalar` with respect to every element of every
// input, by the library's one central-difference checker (gradcheck/gradcheck.h), which
// perturbs the inputs in place and evaluates without recording; `with_grad` turns
// recording back on inside (a scalar made of first gradients, for second order).
inline std::vector<std::vector<double>> numerical(
    const std::function<Tensor(const TensorList&)>& scalar, const TensorList& inputs,
    bool with_grad, double eps) {
  const GradcheckFn fn = [&](const TensorList& x) {
    GradModeGuard grad_mode(with_grad);
    return TensorList{scalar(x).detach()};
  };
  const JacobianTable j = numerical_jacobian(fn, inputs, eps);
  std::vector<std::vector<double>> out;
  for (const Jacobian& d : j[0]) out.push_back(d.values);  // one row: the scalar's
  return out;
}

inline void compare(const TensorList& analytical, const std::vector<std::vector<double>>& num,
                    const TensorList& inputs, const char* what, double atol, double rtol) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<double> a(num[i].size(), 0.0);
    if (analytical[i].defined()) {
      REQUIRE(analytical[i].sizes() == inputs[i].sizes());
      REQUIRE(analytical[i].device() == inputs[i].device());
      a = values(analytical[i]);
    }
    for (size_t j = 0; j < a.size(); ++j) {
      INFO(what << ": input " << i << " (" << inputs[i].describe() << ") element " << j
                << ": analytical " << a[j] << ", numerical " << num[i][j]);
      CHECK(close(a[j], num[i][j], atol, rtol));
    }
  }
}

}  // namespace detail

// A fixed random weight for f's output (so that every output element matters).
inline Tensor weight_for(const Tensor& y, uint64_t seed) {
  return input(random_values(y.numel(), seed, 0.5, 1.5), y.sizes(), y.device(), false);
}

inline void check_gradients(const Fn& f, const TensorList& inputs, double eps = 1e-6,
                            double atol = 1e-6, double rtol = 1e-6) {
  const Tensor y = f(inputs);
  REQUIRE(y.defined());
  const Tensor w = weight_for(y, 1234);
  const TensorList analytical = grad({detail::weighted_sum(y, w)}, inputs, {}, false, false,
                                     /*allow_unused=*/true);
  const auto scalar = [&](const TensorList& x) { return detail::weighted_sum(f(x), w); };
  detail::compare(analytical, detail::numerical(scalar, inputs, false, eps), inputs, "first order",
                  atol, rtol);
}

// sum_i sum(d/dx_i sum(f(x) * w) * v_i): the first gradients with create_graph.
inline Tensor gradient_projection(const Fn& f, const TensorList& x, const Tensor& w,
                                  const TensorList& v) {
  const Tensor y = f(x);
  const TensorList g = grad({detail::weighted_sum(y, w)}, x, {}, true, /*create_graph=*/true, true);
  Tensor s;
  for (size_t i = 0; i < g.size(); ++i) {
    if (!g[i].defined()) continue;
    const Tensor term = sum(mul(g[i], v[i]));
    s = s.defined() ? add(s, term) : term;
  }
  return s;
}

inline void check_second_order(const Fn& f, const TensorList& inputs, double eps = 1e-6,
                               double atol = 1e-6, double rtol = 1e-6) {
  const Tensor w = weight_for(f(inputs), 1234);
  TensorList v;
  for (size_t i = 0; i < inputs.size(); ++i) v.push_back(weight_for(inputs[i], 99 + i));
  const Tensor s = gradient_projection(f, inputs, w, v);
  TensorList analytical(inputs.size());
  if (s.defined() && s.requires_grad()) {
    analytical = grad({s}, inputs, {}, false, false, /*allow_unused=*/true);
  }
  const auto scalar = [&](const TensorList& x) {
    const Tensor p = gradient_projection(f, x, w, v);
    return p.defined() ? p : zeros({}, f64(x[0].device()));
  };
  detail::compare(analytical, detail::numerical(scalar, inputs, true, eps), inputs, "second order",
                  atol, rtol);
}

// Expects `fn` to throw ErrorT whose message contains every one of `parts`.
template <typename ErrorT, typename F>
void expect_error(F fn, const std::vector<std::string>& parts) {
  try {
    fn();
    FAIL("expected an exception");
  } catch (const ErrorT& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) {
      INFO("message: " << msg << "\nexpected to contain: " << p);
      CHECK(msg.find(p) != std::string::npos);
    }
  }
}

inline void check_values(const Tensor& t, const std::vector<double>& want, double tol = 1e-12) {
  const std::vector<double> got = values(t);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
    CHECK(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])));
  }
}

// check_values against another float64 tensor, which must have got's shape.
inline void check_same(const Tensor& got, const Tensor& want, double tol = 1e-12) {
  REQUIRE(got.sizes() == want.sizes());
  check_values(got, values(want), tol);
}

// Records the names of the kernels launched while it lives.
class KernelNames final : public LaunchObserver {
 public:
  KernelNames() { add_launch_observer(this); }
  ~KernelNames() override { remove_launch_observer(this); }
  void on_launch(const Stream&, const LaunchDesc& desc) override {
    if (desc.kind == LaunchKind::kKernel) names.push_back(desc.name);
  }
  std::vector<std::string> names;
};

}  // namespace testing
}  // namespace streamgrad

#endif  // STREAMGRAD_TESTS_OPS_FINITE_DIFFERENCE_H_
