// gradcheck (gradcheck/gradcheck.h): the comparison of the analytical and numerical
// Jacobians, in slow (every element) and fast (random projections) mode. The Jacobians
// themselves are in jacobian.cc, the checks of inputs, of functions without differentiable
// outputs and of zero and undefined output gradients in inputs.cc, gradgradcheck in
// gradgradcheck.cc.
#include "gradcheck/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "engine/backward.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "gradcheck/internal.h"

namespace streamgrad {
namespace {

using namespace gradcheck_internal;  // NOLINT: gradcheck's own internals

// The result of a check run after `before` passed, with the error figures of both.
GradcheckResult then(const GradcheckResult& before, GradcheckResult next) {
  next.max_abs_err = std::max(next.max_abs_err, before.max_abs_err);
  next.max_rel_err = std::max(next.max_rel_err, before.max_rel_err);
  return next;
}

GradcheckResult finish(GradcheckResult r, const GradcheckOptions& o) {
  if (!r.passed && o.raise_exception) throw GradcheckError(r);
  return r;
}

// The first element where two runs differ by more than tol, or -1.
int64_t first_difference(const Jacobian& a, const Jacobian& b, double tol) {
  for (size_t e = 0; e < a.values.size(); ++e) {
    if (std::abs(a.values[e] - b.values[e]) > tol) return static_cast<int64_t>(e);
  }
  return -1;
}

// Marks r failed at element e of the (out, in) block with the two values it reports.
void fail_at(GradcheckResult& r, size_t out, size_t in, int64_t e, int64_t cols,
             double analytical, double numerical) {
  r.passed = false;
  r.output_index = static_cast<int>(out);
  r.input_index = static_cast<int>(in);
  r.output_element = e / cols;
  r.input_element = e % cols;
  r.analytical = analytical;
  r.numerical = numerical;
}

// Fills r with the first difference larger than nondet_tol between two backward runs.
bool nondeterministic(const Jacobian& a, const Jacobian& again, size_t out, size_t in,
                      const GradcheckOptions& o, GradcheckResult& r) {
  const int64_t e = first_difference(a, again, o.nondet_tol);
  if (e < 0) return false;
  fail_at(r, out, in, e, a.cols, a.values[e], again.values[e]);
  r.message = absl::StrFormat(
      "gradcheck: backward is not deterministic: two runs give %.10g and %.10g for "
      "d output %d [element %d] / d input %d [element %d] (nondet_tol %g)",
      a.values[e], again.values[e], out, r.output_element, in, r.input_element, o.nondet_tol);
  return true;
}

// Element-wise comparison of one (output, input) block; fills r on a mismatch.
void compare(const Jacobian& a, const Jacobian& n, size_t out, size_t in,
             const GradcheckOptions& o, GradcheckResult& r) {
  double worst = 0;
  int64_t worst_e = -1, first_e = -1;
  for (size_t e = 0; e < a.values.size(); ++e) {
    const double num = n.values[e];
    const double err = std::abs(a.values[e] - num);
    r.max_abs_err = std::max(r.max_abs_err, err);
    if (num != 0) r.max_rel_err = std::max(r.max_rel_err, err / std::abs(num));
    const double excess = err - (o.atol + o.rtol * std::abs(num));
    if (excess > 0 && first_e < 0) first_e = static_cast<int64_t>(e);
    if (excess > worst) {
      worst = excess;
      worst_e = static_cast<int64_t>(e);
    }
  }
  if (worst_e < 0 || !r.passed) return;
  const int64_t cols = a.cols;
  r.passed = false;
  r.output_index = static_cast<int>(out);
  r.input_index = static_cast<int>(in);
  r.output_element = worst_e / cols;
  r.input_element = worst_e % cols;
  r.analytical = a.values[worst_e];
  r.numerical = n.values[worst_e];
  r.first_output_element = first_e / cols;
  r.first_input_element = first_e % cols;
  r.first_analytical = a.values[first_e];
  r.first_numerical = n.values[first_e];
  if (a.values.size() <= kMaxStoredJacobian) {
    r.analytical_jacobian = a.values;
    r.numerical_jacobian = n.values;
  }
  r.message = absl::StrFormat(
      "gradcheck failed for output %d with respect to input %d: the first wrong "
      "Jacobian element is [%d, %d] (output element %d, input element %d): analytical "
      "%.10g, numerical %.10g; the worst is [%d, %d]: analytical %.10g, numerical "
      "%.10g (|difference| %.3g > atol %g + rtol %g * |numerical|)",
      out, in, r.first_output_element, r.first_input_element, r.first_output_element,
      r.first_input_element, r.first_analytical, r.first_numerical, r.output_element,
      r.input_element, r.analytical, r.numerical, std::abs(r.analytical - r.numerical),
      o.atol, o.rtol);
  if (a.values.size() <= 36) {
    absl::StrAppend(&r.message, "\nanalytical:\n", jacobian_text(a.values, a.rows, cols),
                    "\nnumerical:\n", jacobian_text(n.values, a.rows, cols));
  }
}

// The scale of the second analytical Jacobian: scaling by a power of two is exact in
// floating point, so a backward linear in its incoming gradient gives the unit-seeded rows
// bit for bit; negative, so that a backward ignoring the gradient's sign differs too.
constexpr double kLinearityScale = -2.0;

// A slow check's outcome. `nonlinear` (passed = false when found) is held back: the
// reference framework has no such check, so it is reported only when everything the
// reference checks passes.
struct SlowCheck {
  GradcheckResult result;
  GradcheckResult nonlinear;
};

void fill_nonlinear(const Jacobian& a, const Jacobian& scaled, const Jacobian& n, size_t out,
                    size_t in, int64_t e, const GradcheckOptions& o, GradcheckResult& r) {
  fail_at(r, out, in, e, a.cols, a.values[e], n.values[e]);
  r.message = absl::StrFormat(
      "gradcheck: backward is not linear in grad_output for output %d with respect to input "
      "%d: Jacobian element [%d, %d] is %.10g from backward(e) but %.10g from backward(%g e) / "
      "%g, while a repeated backward(e) gives %.10g again (nondet_tol %g); backward must scale "
      "its result with its incoming gradient (this one ignores the gradient's size or sign, "
      "or uses it non-linearly)",
      out, in, r.output_element, r.input_element, a.values[e], scaled.values[e],
      kLinearityScale, kLinearityScale, a.values[e], o.nondet_tol);
}

// Compares every (output, input) block; with undefined_grads, a backward that throws is
// a failed result (the caller tells it apart from a backward that always throws). The
// rows compared and reported are backward(e_j) themselves, as in the reference framework;
// the second run, scaled, checks determinism and linearity at once, and a third unit run
// (only when they differ) tells the two apart.
SlowCheck compare_all(const GradcheckFn& fn, const TensorList& inputs, const GradcheckOptions& o,
                      bool undefined_grads) {
  SlowCheck c;
  GradcheckResult& r = c.result;
  JacobianTable a, scaled, again;
  auto analytical = [&](double scale, JacobianTable& j) {
    try {
      j = analytical_jacobian(fn, inputs, undefined_grads, scale);
      return true;
    } catch (const Error& e) {
      if (!undefined_grads) throw;
      r.passed = false;
      r.message = e.what();
      return false;
    }
  };
  if (!analytical(1.0, a) || !analytical(kLinearityScale, scaled)) return c;
  const JacobianTable n = numerical_jacobian(fn, inputs, o.eps);
  SG_CHECK(n.size() == a.size(), ValueError, "gradcheck: the function returned ", a.size(),
           " outputs with grad mode on but ", n.size(), " without; it must return the same");
  for (size_t out = 0; out < a.size() && r.passed; ++out) {
    for (size_t in = 0; in < inputs.size() && r.passed; ++in) {
      if (a[out][in].cols == 0) continue;
      const int64_t e = first_difference(a[out][in], scaled[out][in], o.nondet_tol);
      if (e >= 0) {
        if (again.empty() && !analytical(1.0, again)) return c;
        if (nondeterministic(a[out][in], again[out][in], out, in, o, r)) break;
        if (c.nonlinear.passed) {
          fill_nonlinear(a[out][in], scaled[out][in], n[out][in], out, in, e, o, c.nonlinear);
        }
      }
      compare(a[out][in], n[out][in], out, in, o, r);
    }
  }
  return c;
}

// check_undefined_grad differentiates each output alone, so the backward of a node with
// several outputs sees undefined gradients for the others (the reference framework's
// check_undefined_grad exercises undefined output gradients likewise). When that fails
// but seeding the others with zeros passes, the undefined gradients are the culprit.
SlowCheck full_check(const GradcheckFn& fn, const TensorList& inputs, const GradcheckOptions& o) {
  SlowCheck c = compare_all(fn, inputs, o, o.check_undefined_grad);
  if (c.result.passed || !o.check_undefined_grad) return c;
  if (!compare_all(fn, inputs, o, /*undefined_grads=*/false).result.passed) return c;
  c.result.message = absl::StrCat(
      "gradcheck (check_undefined_grad): backward mishandles an undefined output gradient: "
      "differentiating one output at a time (the others' gradients undefined) fails, while "
      "with the others' gradients zero it passes; backward must treat an undefined gradient "
      "as zeros (or set check_undefined_grad = false). With undefined gradients: ",
      c.result.message);
  return c;
}

GradcheckResult fast_check(const GradcheckFn& fn, const TensorList& inputs,
                           const GradcheckOptions& o) {
  std::mt19937_64 rng(o.seed);
  const TensorList outs = call_checked(fn, inputs);
  const std::vector<OutputSignature> sig = signatures(outs);
  GradcheckResult r;
  for (size_t out = 0; out < outs.size() && r.passed; ++out) {
    if (!outs[out].requires_grad()) continue;
    const std::vector<double> u = random_vector(outs[out].numel(), rng);
    for (size_t in = 0; in < inputs.size() && r.passed; ++in) {
      const Tensor& x = inputs[in];
      if (!x.requires_grad()) continue;
      const std::vector<double> v = random_vector(x.numel(), rng);
      // Analytical: (u^T J) v, twice for the determinism check.
      double a[2] = {0, 0};
      for (double& value : a) {
        const TensorList fresh = call_checked(fn, inputs);
        SG_CHECK(fresh.size() == outs.size(), ValueError,
                 "gradcheck: the function returned ", outs.size(), " outputs, then ",
                 fresh.size(), "; it must return the same outputs on every call");
        TensorList roots{fresh[out]}, seeds{from_doubles(u, fresh[out])};
        for (size_t p = 0; p < fresh.size() && !o.check_undefined_grad; ++p) {
          if (p == out || !fresh[p].requires_grad()) continue;
          roots.push_back(fresh[p]);
          seeds.push_back(zeros_like(fresh[p]));
        }
        TensorList g;
        try {
          g = grad(roots, {x}, seeds, false, false, true);
        } catch (const Error& e) {
          if (!o.check_undefined_grad) throw;
          // The slow re-check tells an undefined-gradient failure from any other.
          r.passed = false;
          r.output_index = static_cast<int>(out);
          r.input_index = static_cast<int>(in);
          r.message = absl::StrCat("gradcheck (fast mode): backward of output ", out,
                                   " alone failed: ", e.what());
          return r;
        }
        if (!g[0].defined()) continue;
        const std::vector<double> row = as_doubles(g[0]);
        for (size_t e = 0; e < v.size(); ++e) value += row[e] * v[e];
      }
      // Numerical: u^T (f(x + eps v) - f(x - eps v)) / 2 eps.
      std::vector<double> orig(v.size());
      for (size_t e = 0; e < v.size(); ++e) orig[e] = get_element(x, e);
      auto perturbed = [&](double sign, const char* what) {
        for (size_t e = 0; e < v.size(); ++e) set_element(x, e, orig[e] + sign * o.eps * v[e]);
        try {
          auto y = evaluate(fn, inputs, &sig,
                            absl::StrCat("input ", in, " was perturbed by ", what, " (fast mode)"));
          for (size_t e = 0; e < v.size(); ++e) set_element(x, e, orig[e]);
          return y[out];
        } catch (...) {
          for (size_t e = 0; e < v.size(); ++e) set_element(x, e, orig[e]);
          throw;
        }
      };
      const std::vector<double> plus = perturbed(1, "+eps * v");
      const std::vector<double> minus = perturbed(-1, "-eps * v");
      double num = 0;
      for (size_t k = 0; k < u.size(); ++k) num += u[k] * (plus[k] - minus[k]) / (2 * o.eps);
      const double err = std::abs(a[0] - num);
      r.max_abs_err = std::max(r.max_abs_err, err);
      if (num != 0) r.max_rel_err = std::max(r.max_rel_err, err / std::abs(num));
      if (std::abs(a[0] - a[1]) > o.nondet_tol) {
        r.passed = false;
        r.message = absl::StrFormat(
            "gradcheck (fast mode): backward is not deterministic for output %d, input %d: "
            "two runs give u^T J v = %.10g and %.10g (nondet_tol %g)", out, in, a[0], a[1],
            o.nondet_tol);
      } else if (err > o.atol + o.rtol * std::abs(num)) {
        r.passed = false;
        r.message = absl::StrFormat(
            "gradcheck (fast mode) failed for output %d with respect to input %d: u^T J v is "
            "%.10g analytically but %.10g numerically (random projections, seed %d)",
            out, in, a[0], num, o.seed);
      }
      if (!r.passed) {
        r.output_index = static_cast<int>(out);
        r.input_index = static_cast<int>(in);
        r.analytical = a[0];
        r.numerical = num;
      }
    }
  }
  return r;
}

// The reference framework re-runs a failed fast check in slow mode to report the full
// Jacobians and the worst element; so does this.
GradcheckResult fast_check_confirmed(const GradcheckFn& fn, const TensorList& inputs,
                                     const GradcheckOptions& o) {
  GradcheckResult fast = fast_check(fn, inputs, o);
  if (fast.passed) return fast;
  const SlowCheck check = full_check(fn, inputs, o);
  if (check.result.passed) {
    absl::StrAppend(&fast.message,
                    "; re-checked in slow mode, every Jacobian element is within tolerance",
                    check.nonlinear.passed
                        ? ": only the random projection disagrees (try other atol / rtol or seed)"
                        : absl::StrCat(", but ", absl::StripPrefix(check.nonlinear.message,
                                                                   "gradcheck: ")));
    return fast;
  }
  GradcheckResult slow = check.result;
  slow.confirmed_in_slow_mode = true;
  slow.max_abs_err = std::max(slow.max_abs_err, fast.max_abs_err);
  slow.max_rel_err = std::max(slow.max_rel_err, fast.max_rel_err);
  slow.message = absl::StrCat(fast.message, "\nconfirmed in slow mode: ", slow.message);
  return slow;
}

}  // namespace

GradcheckResult gradcheck(const GradcheckFn& fn, const TensorList& inputs,
                          const GradcheckOptions& options) {
  validate(inputs, /*warn_precision=*/true);
  GradModeGuard grad_on(true);
  bool differentiable = false;
  for (const Tensor& out : call_checked(fn, inputs)) differentiable |= out.requires_grad();
  if (!differentiable) {
    return finish(check_no_differentiable_outputs(fn, inputs, options.eps), options);
  }
  GradcheckResult r, nonlinear;
  if (options.fast_mode) {
    r = fast_check_confirmed(fn, inputs, options);
  } else {
    SlowCheck c = full_check(fn, inputs, options);
    r = std::move(c.result);
    nonlinear = std::move(c.nonlinear);
  }
  // The reference framework's order: the comparison, backward with zero grad_outputs, then
  // with undefined ones. The later checks keep the comparison's error figures.
  if (r.passed) r = then(r, check_zero_grad_outputs(fn, inputs));
  if (r.passed && options.check_undefined_grad) {
    r = then(r, check_all_grads_undefined(fn, inputs));
  }
  if (r.passed) r = then(r, nonlinear);
  return finish(r, options);
}

}  // namespace streamgrad
