#include "engine/gradcheck.h"

#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/backward.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "runtime/copy.h"

namespace streamgrad {
namespace {

constexpr size_t kMaxStoredJacobian = 4096;

// Flat row-major index -> byte address of that element of a strided tensor.
char* element_ptr(const Tensor& t, int64_t flat) {
  int64_t offset = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    const int64_t size = t.sizes()[d];
    offset += (flat % size) * t.strides()[d];
    flat /= size;
  }
  return static_cast<char*>(t.data_ptr()) + offset * static_cast<int64_t>(element_size(t.dtype()));
}

// Perturbations go straight into the input's memory (no version bump: they are undone
// before anyone could observe them), ordered on the device's current stream.
double get_element(const Tensor& t, int64_t flat) {
  double v = 0;
  copy_bytes(&v, Device("cpu"), element_ptr(t, flat), t.device(), sizeof(double));
  return v;
}
void set_element(const Tensor& t, int64_t flat, double v) {
  copy_bytes(element_ptr(t, flat), t.device(), &v, Device("cpu"), sizeof(double));
}

std::vector<double> as_doubles(const Tensor& t) {
  if (t.dtype() == DType::kFloat64) return t.to_vector<double>();
  const std::vector<float> f = t.to_vector<float>();
  return std::vector<double>(f.begin(), f.end());
}

TensorList call_checked(const GradcheckFn& fn, const TensorList& inputs) {
  TensorList outs = fn(inputs);
  SG_CHECK(!outs.empty(), ValueError, "gradcheck: the function returned no tensors");
  for (size_t o = 0; o < outs.size(); ++o) {
    SG_CHECK(outs[o].defined(), ValueError, "gradcheck: output ", o,
             " of the function is an undefined tensor; return floating tensors only");
    SG_CHECK(is_floating(outs[o].dtype()), ValueError, "gradcheck: output ", o, " is ",
             outs[o].describe(), "; only floating outputs can be differentiated");
  }
  return outs;
}

std::vector<std::vector<double>> evaluate(const GradcheckFn& fn, const TensorList& inputs) {
  NoGradGuard no_grad;
  std::vector<std::vector<double>> out;
  for (const Tensor& t : call_checked(fn, inputs)) out.push_back(as_doubles(t));
  return out;
}

Tensor from_doubles(const std::vector<double>& v, const Tensor& like) {
  return from_vector<double>(v, like.sizes(),
                             TensorOptions().dtype(like.dtype()).device(like.device()));
}

void validate(const TensorList& inputs) {
  SG_CHECK(!inputs.empty(), ValueError, "gradcheck: no inputs");
  bool any = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    SG_CHECK(t.defined(), ValueError, "gradcheck: input ", i, " is undefined");
    if (t.dtype() == DType::kFloat32) {
      throw ValueError(absl::StrCat(
          "gradcheck: input ", i, " is ", t.describe(),
          "; pass float64 inputs (to(x, DType::kFloat64)): central differences in float32 "
          "are too coarse to tell a right gradient from a wrong one"));
    }
    if (t.requires_grad()) any = true;
  }
  SG_CHECK(any, ValueError,
           "gradcheck: no input requires grad; call requires_grad_() on the inputs to check "
           "(inputs that do not require grad are treated as constants)");
}

struct Jacobians {
  // [output][input] -> row-major [out numel][in numel]
  std::vector<std::vector<std::vector<double>>> j;
};

Jacobians numerical(const GradcheckFn& fn, const TensorList& inputs, double eps) {
  const auto base = evaluate(fn, inputs);
  Jacobians r;
  r.j.assign(base.size(), std::vector<std::vector<double>>(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.requires_grad()) continue;
    const int64_t n = x.numel();
    for (size_t o = 0; o < base.size(); ++o) r.j[o][i].assign(base[o].size() * n, 0.0);
    for (int64_t e = 0; e < n; ++e) {
      const double orig = get_element(x, e);
      set_element(x, e, orig + eps);
      const auto plus = evaluate(fn, inputs);
      set_element(x, e, orig - eps);
      const auto minus = evaluate(fn, inputs);
      set_element(x, e, orig);
      for (size_t o = 0; o < base.size(); ++o) {
        for (size_t k = 0; k < base[o].size(); ++k) {
          r.j[o][i][k * n + e] = (plus[o][k] - minus[o][k]) / (2 * eps);
        }
      }
    }
  }
  return r;
}

// One backward per output element; each output alone is the root when
// check_undefined_grad is on, so the others' gradients reach backward undefined.
Jacobians analytical(const GradcheckFn& fn, const TensorList& inputs, bool undefined_grads) {
  const TensorList outs = call_checked(fn, inputs);
  TensorList diff;
  std::vector<size_t> diff_index;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].requires_grad()) {
      diff.push_back(inputs[i]);
      diff_index.push_back(i);
    }
  }
  Jacobians r;
  r.j.assign(outs.size(), std::vector<std::vector<double>>(inputs.size()));
  for (size_t o = 0; o < outs.size(); ++o) {
    const int64_t m = outs[o].numel();
    for (size_t d = 0; d < diff.size(); ++d) {
      r.j[o][diff_index[d]].assign(m * diff[d].numel(), 0.0);
    }
    if (!outs[o].requires_grad()) continue;
    for (int64_t k = 0; k < m; ++k) {
      std::vector<double> onehot(m, 0.0);
      onehot[k] = 1.0;
      TensorList roots{outs[o]}, seeds{from_doubles(onehot, outs[o])};
      if (!undefined_grads) {
        for (size_t p = 0; p < outs.size(); ++p) {
          if (p == o || !outs[p].requires_grad()) continue;
          roots.push_back(outs[p]);
          seeds.push_back(zeros_like(outs[p]));
        }
      }
      TensorList g;
      try {
        g = grad(roots, diff, seeds, /*retain_graph=*/true, false, /*allow_unused=*/true);
      } catch (const Error& e) {
        throw Error(absl::StrCat("gradcheck: backward of output ", o, " failed",
                                 undefined_grads
                                     ? " (the other outputs' gradients were undefined: "
                                       "backward must treat them as zeros)"
                                     : "",
                                 ": ", e.what()));
      }
      for (size_t d = 0; d < diff.size(); ++d) {
        if (!g[d].defined()) continue;
        const std::vector<double> row = as_doubles(g[d]);
        const int64_t n = diff[d].numel();
        for (int64_t e = 0; e < n; ++e) r.j[o][diff_index[d]][k * n + e] = row[e];
      }
    }
  }
  return r;
}

std::string jacobian_text(const std::vector<double>& j, int64_t rows, int64_t cols) {
  std::string s;
  for (int64_t r = 0; r < rows; ++r) {
    absl::StrAppend(&s, r == 0 ? "[[" : " [");
    for (int64_t c = 0; c < cols; ++c) {
      absl::StrAppend(&s, c ? ", " : "", absl::StrFormat("%.6g", j[r * cols + c]));
    }
    absl::StrAppend(&s, r + 1 == rows ? "]]" : "]\n");
  }
  return s;
}

GradcheckResult finish(GradcheckResult r, const GradcheckOptions& o) {
  if (!r.passed && o.raise_exception) throw GradcheckError(r);
  return r;
}

GradcheckResult full_check(const GradcheckFn& fn, const TensorList& inputs,
                           const GradcheckOptions& o) {
  const Jacobians a = analytical(fn, inputs, o.check_undefined_grad);
  const Jacobians again = analytical(fn, inputs, o.check_undefined_grad);
  const Jacobians n = numerical(fn, inputs, o.eps);
  GradcheckResult r;
  for (size_t out = 0; out < a.j.size(); ++out) {
    for (size_t in = 0; in < inputs.size(); ++in) {
      const auto& aj = a.j[out][in];
      if (aj.empty()) continue;
      const int64_t cols = inputs[in].numel();
      const int64_t rows = static_cast<int64_t>(aj.size()) / std::max<int64_t>(cols, 1);
      for (size_t e = 0; e < aj.size(); ++e) {
        const double diff = std::abs(aj[e] - again.j[out][in][e]);
        if (diff > o.nondet_tol && r.passed) {
          r.passed = false;
          r.output_index = static_cast<int>(out);
          r.input_index = static_cast<int>(in);
          r.output_element = static_cast<int64_t>(e) / cols;
          r.input_element = static_cast<int64_t>(e) % cols;
          r.analytical = aj[e];
          r.numerical = again.j[out][in][e];
          r.message = absl::StrFormat(
              "gradcheck: backward is not deterministic: two runs give %.10g and %.10g for "
              "d output %d [element %d] / d input %d [element %d] (nondet_tol %g)",
              aj[e], again.j[out][in][e], out, r.output_element, in, r.input_element,
              o.nondet_tol);
        }
      }
      if (!r.passed) return finish(r, o);
      double worst = 0;
      int64_t worst_e = -1, first_e = -1;
      for (size_t e = 0; e < aj.size(); ++e) {
        const double num = n.j[out][in][e];
        const double err = std::abs(aj[e] - num);
        r.max_abs_err = std::max(r.max_abs_err, err);
        if (num != 0) r.max_rel_err = std::max(r.max_rel_err, err / std::abs(num));
        const double excess = err - (o.atol + o.rtol * std::abs(num));
        if (excess > 0 && first_e < 0) first_e = static_cast<int64_t>(e);
        if (excess > worst) {
          worst = excess;
          worst_e = static_cast<int64_t>(e);
        }
      }
      if (worst_e >= 0 && r.passed) {
        r.passed = false;
        r.output_index = static_cast<int>(out);
        r.input_index = static_cast<int>(in);
        r.output_element = worst_e / cols;
        r.input_element = worst_e % cols;
        r.analytical = aj[worst_e];
        r.numerical = n.j[out][in][worst_e];
        r.first_output_element = first_e / cols;
        r.first_input_element = first_e % cols;
        r.first_analytical = aj[first_e];
        r.first_numerical = n.j[out][in][first_e];
        if (aj.size() <= kMaxStoredJacobian) {
          r.analytical_jacobian = aj;
          r.numerical_jacobian = n.j[out][in];
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
        if (aj.size() <= 36) {
          absl::StrAppend(&r.message, "\nanalytical:\n", jacobian_text(aj, rows, cols),
                          "\nnumerical:\n", jacobian_text(n.j[out][in], rows, cols));
        }
      }
    }
  }
  return finish(r, o);
}

GradcheckResult fast_check(const GradcheckFn& fn, const TensorList& inputs,
                           const GradcheckOptions& o) {
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<double> normal;
  const TensorList outs = call_checked(fn, inputs);
  GradcheckResult r;
  for (size_t out = 0; out < outs.size() && r.passed; ++out) {
    if (!outs[out].requires_grad()) continue;
    std::vector<double> u(outs[out].numel());
    for (double& x : u) x = normal(rng);
    for (size_t in = 0; in < inputs.size() && r.passed; ++in) {
      const Tensor& x = inputs[in];
      if (!x.requires_grad()) continue;
      std::vector<double> v(x.numel());
      for (double& e : v) e = normal(rng);
      // Analytical: (u^T J) v, twice for the determinism check.
      double a[2] = {0, 0};
      for (double& value : a) {
        const TensorList fresh = call_checked(fn, inputs);
        TensorList g = grad({fresh[out]}, {x}, {from_doubles(u, fresh[out])}, false, false, true);
        if (!g[0].defined()) continue;
        const std::vector<double> row = as_doubles(g[0]);
        for (size_t e = 0; e < v.size(); ++e) value += row[e] * v[e];
      }
      // Numerical: u^T (f(x + eps v) - f(x - eps v)) / 2 eps.
      std::vector<double> orig(v.size());
      for (size_t e = 0; e < v.size(); ++e) orig[e] = get_element(x, e);
      for (size_t e = 0; e < v.size(); ++e) set_element(x, e, orig[e] + o.eps * v[e]);
      const auto plus = evaluate(fn, inputs)[out];
      for (size_t e = 0; e < v.size(); ++e) set_element(x, e, orig[e] - o.eps * v[e]);
      const auto minus = evaluate(fn, inputs)[out];
      for (size_t e = 0; e < v.size(); ++e) set_element(x, e, orig[e]);
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
            "%.10g analytically but %.10g numerically (random projections, seed %d); rerun "
            "without fast_mode for the worst element",
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
  return finish(r, o);
}

}  // namespace

GradcheckResult gradcheck(const GradcheckFn& fn, const TensorList& inputs,
                          const GradcheckOptions& options) {
  validate(inputs);
  GradModeGuard grad_on(true);
  return options.fast_mode ? fast_check(fn, inputs, options) : full_check(fn, inputs, options);
}

GradcheckResult gradgradcheck(const GradcheckFn& fn, const TensorList& inputs,
                              const GradcheckOptions& options) {
  validate(inputs);
  GradModeGuard grad_on(true);
  // Fixed random weights per output, so that the checked function is deterministic.
  std::mt19937_64 rng(options.seed + 1);
  std::normal_distribution<double> normal;
  TensorList weights;
  for (const Tensor& out : call_checked(fn, inputs)) {
    std::vector<double> w(out.numel());
    for (double& x : w) x = normal(rng);
    weights.push_back(from_doubles(w, out));
  }
  GradcheckFn first = [fn, weights](const TensorList& in) {
    GradModeGuard grad_on(true);  // also when gradcheck evaluates it for finite differences
    TensorList diff, roots, seeds;
    for (const Tensor& t : in) {
      if (t.requires_grad()) diff.push_back(t);
    }
    const TensorList outs = fn(in);
    for (size_t o = 0; o < outs.size(); ++o) {
      if (!outs[o].requires_grad()) continue;
      roots.push_back(outs[o]);
      seeds.push_back(weights[o]);
    }
    TensorList result;
    if (roots.empty()) return result;
    for (Tensor& g : grad(roots, diff, seeds, true, /*create_graph=*/true, true)) {
      if (g.defined()) result.push_back(g);
    }
    SG_CHECK(!result.empty(), ValueError, "gradgradcheck: no input gets a gradient");
    return result;
  };
  return gradcheck(first, inputs, options);
}

}  // namespace streamgrad
