// gradgradcheck (gradcheck/gradcheck.h): gradcheck of the function's first derivative,
// built with create_graph so that its own backward is the second derivative.
#include <random>

#include "engine/backward.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "gradcheck/gradcheck.h"
#include "gradcheck/internal.h"

namespace streamgrad {

using gradcheck_internal::call_checked;
using gradcheck_internal::from_doubles;
using gradcheck_internal::random_vector;
using gradcheck_internal::validate;

GradcheckResult gradgradcheck(const GradcheckFn& fn, const TensorList& inputs,
                              const GradcheckOptions& options) {
  validate(inputs);
  GradModeGuard grad_on(true);
  // The grad_outputs become inputs of the checked function, requiring grad, so the double
  // backward is differentiated with respect to them too (as in the reference framework,
  // whose gradgradcheck draws random grad_outputs). A grad_output of a non-float64 output
  // cannot be perturbed finely enough: it stays a constant of the checked function.
  std::mt19937_64 rng(options.seed + 1);
  TensorList all = inputs;
  TensorList constant_grads;  // per output; undefined where the grad_output is an input
  for (const Tensor& out : call_checked(fn, inputs)) {
    Tensor v = from_doubles(random_vector(out.numel(), rng), out);
    const bool as_input = out.requires_grad() && out.dtype() == DType::kFloat64;
    if (as_input) all.push_back(v.requires_grad_());
    constant_grads.push_back(as_input ? Tensor() : v);
  }
  const size_t n_in = inputs.size();
  GradcheckFn first = [fn, n_in, constant_grads](const TensorList& x) {
    GradModeGuard grad_on(true);  // also when gradcheck evaluates it for finite differences
    const TensorList in(x.begin(), x.begin() + n_in);
    TensorList diff, roots, seeds;
    for (const Tensor& t : in) {
      if (t.requires_grad()) diff.push_back(t);
    }
    const TensorList outs = fn(in);
    SG_CHECK(outs.size() == constant_grads.size(), ValueError, "gradgradcheck: the function "
             "returned ", constant_grads.size(), " outputs on its first call, then ",
             outs.size(), "; it must return the same outputs on every call");
    size_t next = n_in;
    for (size_t o = 0; o < outs.size(); ++o) {
      if (!outs[o].requires_grad()) continue;
      SG_CHECK(constant_grads[o].defined() || next < x.size(), ValueError, "gradgradcheck: "
               "output ", o, " requires grad now but did not on the first call; the function "
               "must return the same outputs on every call");
      roots.push_back(outs[o]);
      seeds.push_back(constant_grads[o].defined() ? constant_grads[o] : x[next++]);
    }
    TensorList g = roots.empty() ? TensorList(diff.size())
                                 : grad(roots, diff, seeds, true, /*create_graph=*/true, true);
    // An unused input's gradient is zero, so the checked function keeps its outputs.
    for (size_t k = 0; k < g.size(); ++k) {
      if (!g[k].defined()) g[k] = zeros_like(diff[k]);
    }
    return g;
  };
  return gradcheck(first, all, options);
}

}  // namespace streamgrad
