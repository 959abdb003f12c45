// The checks gradcheck runs besides the Jacobian comparison: inputs it can perturb
// soundly (and a warning for those not in float64), functions without differentiable
// outputs, and backward with every output's gradient zero or undefined.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/backward.h"
#include "engine/factories.h"
#include "engine/node.h"
#include "gradcheck/internal.h"
#include "runtime/base/warning.h"

namespace streamgrad {
namespace gradcheck_internal {
namespace {

// True when two elements of `t` share memory (exact: gradcheck inputs are small).
bool overlaps_itself(const Tensor& t) {
  std::vector<int64_t> offsets;
  offsets.reserve(t.numel());
  for (int64_t flat = 0; flat < t.numel(); ++flat) {
    int64_t rest = flat, offset = 0;
    for (int64_t d = t.dim() - 1; d >= 0; --d) {
      offset += (rest % t.sizes()[d]) * t.strides()[d];
      rest /= t.sizes()[d];
    }
    offsets.push_back(offset);
  }
  std::sort(offsets.begin(), offsets.end());
  return std::adjacent_find(offsets.begin(), offsets.end()) != offsets.end();
}

}  // namespace

void validate(const TensorList& inputs, bool warn_precision) {
  SG_CHECK(!inputs.empty(), ValueError, "gradcheck: no inputs");
  bool any = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    SG_CHECK(t.defined(), ValueError, "gradcheck: input ", i, " is undefined");
    if (!t.requires_grad()) continue;
    any = true;
    // The reference framework warns and runs the check, so does this: the default eps and
    // tolerances are meant for float64, where central differences are fine enough.
    if (warn_precision && t.dtype() != DType::kFloat64) {
      SG_WARN("gradcheck: input ", i, " (", t.describe(),
              ") requires grad and is not float64; central differences in lower precision "
              "are coarse, so the check will likely fail unless the inputs are float64 "
              "(to(x, DType::kFloat64)) or atol / rtol are loosened");
    }
    // Perturbing one element of an expand()ed input would move every element that
    // shares its memory, so the numerical Jacobian would be wrong (the reference
    // framework refuses such inputs too).
    SG_CHECK(!overlaps_itself(t), ValueError, "gradcheck: input ", i, " (", t.describe(),
             ", strides [", absl::StrJoin(t.strides(), ", "),
             "]) has elements that share memory (a stride-0 dimension, e.g. from expand()); "
             "gradcheck perturbs one element at a time and needs inputs without overlap: "
             "pass a contiguous copy (contiguous(x)) instead");
  }
  SG_CHECK(any, ValueError,
           "gradcheck: no input requires grad; call requires_grad_() on the inputs to check "
           "(inputs that do not require grad are treated as constants)");
}

GradcheckResult check_no_differentiable_outputs(const GradcheckFn& fn, const TensorList& inputs,
                                                double eps) {
  GradcheckResult r;
  const JacobianTable n = numerical_jacobian(fn, inputs, eps);
  for (size_t o = 0; o < n.size() && r.passed; ++o) {
    for (size_t i = 0; i < n[o].size() && r.passed; ++i) {
      const Jacobian& j = n[o][i];
      const auto it = std::find_if(j.values.begin(), j.values.end(),
                                   [](double v) { return v != 0; });
      if (it == j.values.end()) continue;
      const int64_t flat = it - j.values.begin();
      r.passed = false;
      r.output_index = static_cast<int>(o);
      r.input_index = static_cast<int>(i);
      r.output_element = flat / j.cols;
      r.input_element = flat % j.cols;
      r.numerical = *it;
      r.message = absl::StrFormat(
          "gradcheck: the function has no differentiable output (none requires grad), but "
          "output %d changes with input %d: numerical d output %d [element %d] / d input %d "
          "[element %d] = %.10g, analytical 0; something cuts the graph (detach(), "
          "NoGradGuard, an op without a backward) between them",
          o, i, o, r.output_element, i, r.input_element, *it);
    }
  }
  return r;
}

GradcheckResult check_zero_grad_outputs(const GradcheckFn& fn, const TensorList& inputs) {
  GradcheckResult r;
  TensorList roots, seeds, wrt;
  std::vector<size_t> wrt_index;
  for (const Tensor& out : call_checked(fn, inputs)) {
    if (!out.requires_grad()) continue;
    roots.push_back(out);
    seeds.push_back(zeros_like(out));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requires_grad()) continue;
    wrt.push_back(inputs[i]);
    wrt_index.push_back(i);
  }
  if (roots.empty()) return r;
  TensorList grads;
  try {
    grads = grad(roots, wrt, seeds, /*retain_graph=*/false, /*create_graph=*/false,
                 /*allow_unused=*/true);
  } catch (const Error& e) {
    throw Error(absl::StrCat("gradcheck: backward failed with every output's gradient zero: ",
                             e.what()));
  }
  for (size_t k = 0; k < grads.size() && r.passed; ++k) {
    if (!grads[k].defined()) continue;  // undefined counts as zero
    const std::vector<double> g = as_doubles(grads[k]);
    // Exactly zero: a NaN (0 times an infinity inside backward) fails too.
    const auto it = std::find_if(g.begin(), g.end(), [](double v) { return !(v == 0); });
    if (it == g.end()) continue;
    r.passed = false;
    r.input_index = static_cast<int>(wrt_index[k]);
    r.input_element = it - g.begin();
    r.analytical = *it;
    r.message = absl::StrFormat(
        "gradcheck: backward is not multiplied by grad_output: with every output's gradient "
        "zero, the gradient of input %d must be zero (or undefined), but element %d is "
        "%.10g; backward must scale with its incoming gradient (a constant added to it, or "
        "a gradient that ignores it, shows up here even when atol hides it in the Jacobian)",
        wrt_index[k], r.input_element, *it);
  }
  return r;
}

namespace {

// Passes on no gradient at all: placed after each output, it makes the function's
// backward receive an undefined gradient in every slot (the reference framework's
// UndefinedGrad node does the same for its check).
struct UndefinedGradNode final : Node {
  std::string name() const override { return "UndefinedGrad"; }
  TensorList apply(TensorList&&) override { return TensorList(num_outputs()); }
};

}  // namespace

GradcheckResult check_all_grads_undefined(const GradcheckFn& fn, const TensorList& inputs) {
  GradcheckResult r;
  TensorList roots, seeds, wrt;
  std::vector<size_t> wrt_index;
  for (const Tensor& out : call_checked(fn, inputs)) {
    if (!out.requires_grad()) continue;
    Tensor alias = out.detach();
    auto node = std::make_shared<UndefinedGradNode>();
    node->set_next_edges(collect_next_edges({out}));
    set_history(alias, node);
    roots.push_back(alias);
    seeds.push_back(zeros_like(alias));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requires_grad()) continue;
    wrt.push_back(inputs[i]);
    wrt_index.push_back(i);
  }
  TensorList grads;
  try {
    grads = grad(roots, wrt, seeds, /*retain_graph=*/false, /*create_graph=*/false,
                 /*allow_unused=*/true);
  } catch (const Error& e) {
    r.passed = false;
    r.message = absl::StrCat(
        "gradcheck (check_undefined_grad): backward failed when every output's gradient was "
        "undefined; backward must treat undefined gradients as zeros (or set "
        "check_undefined_grad = false): ",
        e.what());
    return r;
  }
  for (size_t k = 0; k < grads.size() && r.passed; ++k) {
    if (!grads[k].defined()) continue;
    const std::vector<double> g = as_doubles(grads[k]);
    const auto it = std::find_if(g.begin(), g.end(), [](double v) { return v != 0; });
    if (it == g.end()) continue;
    r.passed = false;
    r.input_index = static_cast<int>(wrt_index[k]);
    r.input_element = it - g.begin();
    r.analytical = *it;
    r.message = absl::StrFormat(
        "gradcheck (check_undefined_grad): with every output's gradient undefined, the "
        "gradient of input %d must be undefined or zero, but element %d is %.10g; backward "
        "must treat undefined gradients as zeros (or set check_undefined_grad = false)",
        wrt_index[k], r.input_element, *it);
  }
  return r;
}

}  // namespace gradcheck_internal
}  // namespace streamgrad
