// gradcheck / gradgradcheck: compare a function's analytical gradients (from backward)
// with numerical ones (central differences), as a library for tests.
//
//   GradcheckFn f = [](const TensorList& in) { return TensorList{mul(in[0], in[1])}; };
//   TensorList in = {randn({3}, f64).requires_grad_(), randn({3}, f64).requires_grad_()};
//   GradcheckResult r = gradcheck(f, in);          // throws GradcheckError on mismatch
//   GradcheckOptions o; o.raise_exception = false; o.fast_mode = true;
//   CHECK(gradcheck(f, in, o).passed);
//   JacobianTable j = numerical_jacobian(f, in);   // j[output][input].at(row, col)
//
// Checked, in the reference framework's order, stopping at the first failure:
// 1. Per output o and input i, every element of the Jacobian d out_o / d in_i:
//    |analytical - numerical| <= atol + rtol * |numerical|. Analytical row j is backward
//    seeded with the one-hot gradient e_j, exactly the values the result reports. Backward
//    runs a second time, seeded with -2 e_j and divided back (exact in floating point):
//    the rows must agree within nondet_tol (0: bit for bit); where they differ, a third
//    run seeded with e_j tells nondeterminism (reported here) from non-linearity (step 4).
//    fast_mode compares u^T J v for random u, v instead (one backward and two forward
//    calls per pair); when it fails, the pair is re-checked in slow mode and the result
//    holds the full Jacobians and the worst element (confirmed_in_slow_mode).
// 2. Always, in both modes: backward with every output's gradient zero must return
//    exactly zero (or undefined) input gradients ("backward is not multiplied by
//    grad_output"): a backward that adds a constant, even one atol hides in step 1, or
//    that ignores its incoming gradient, fails here.
// 3. check_undefined_grad: each output differentiated alone, so a backward with several
//    outputs sees undefined gradients for the others and must treat them as zeros (a
//    failure, wrong value or throw, that disappears when the others are seeded with zeros
//    is reported as such, as a failed result); and every output's gradient undefined,
//    where each input's gradient must come back undefined or zero.
// 4. streamgrad's own addition, reported only when the reference's checks pass: a backward
//    not linear in its gradient (one that squares it is right for 0 and for e_j, so steps
//    1 and 2 cannot see it) fails when the -2 e_j rows of step 1 differ deterministically.
// A function with no differentiable output (none requires grad, or no output at all)
// passes only if its numerical Jacobian is zero (the reference framework's rule).
// The result names the failing output and input, the first wrong element and the worst
// one (flat indices into the output and the input) with both values, and holds both
// Jacobians when they have at most 4096 entries; max_abs_err / max_rel_err are step 1's.
//
// gradgradcheck checks x, v -> grad(fn(x), x, v, create_graph) with random grad_outputs v
// that require grad themselves, so the double backward is checked with respect to both,
// including its determinism (nondet_tol).
//
// Inputs: floating tensors, at least one requiring grad; inputs that do not require grad
// are constants. An input that requires grad and is not float64 is warned about (SG_WARN,
// runtime/base/warning.h) and then checked, perturbed in its own dtype, as the reference
// framework does: eps and the tolerances default to values meant for float64, and
// central differences in float32 or 16 bits are coarse, so such a check will likely fail
// unless they are loosened. Inputs requiring grad must not overlap in memory (an
// expand()ed input: perturbing one element would move several). Outputs must be defined
// floating tensors whose shapes and dtypes do not change when the inputs are perturbed.
// Thread-safety: as the function checked. Perturbations are written into the inputs'
// memory and restored, so the inputs must not be used concurrently elsewhere.
// Failure: ValueError for bad inputs or outputs (and outputs that change shape or dtype
// under perturbation); GradcheckError (raise_exception) for a mismatch.
#ifndef STREAMGRAD_GRADCHECK_GRADCHECK_H_
#define STREAMGRAD_GRADCHECK_GRADCHECK_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/node.h"
#include "runtime/base/error.h"

namespace streamgrad {

using GradcheckFn = std::function<TensorList(const TensorList&)>;

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  bool raise_exception = true;
  double nondet_tol = 0.0;
  bool check_undefined_grad = true;
  bool fast_mode = false;
  uint64_t seed = 0;  // fast mode's random projections
};

struct GradcheckResult {
  bool passed = true;
  std::string message;  // empty when passed
  int output_index = -1;
  int input_index = -1;
  // The worst element of the failing pair (flat indices; -1 in fast mode).
  int64_t output_element = -1;
  int64_t input_element = -1;
  double analytical = 0;
  double numerical = 0;
  // The first wrong element in row-major order of the failing pair's Jacobian.
  int64_t first_output_element = -1;
  int64_t first_input_element = -1;
  double first_analytical = 0;
  double first_numerical = 0;
  double max_abs_err = 0;  // over everything compared
  double max_rel_err = 0;
  // Row-major [output numel][input numel] of the failing pair, when small enough.
  std::vector<double> analytical_jacobian;
  std::vector<double> numerical_jacobian;
  // Fast mode failed and the slow re-check found the element-wise mismatch reported
  // above (false when it did not: the projection alone disagreed, see the message).
  bool confirmed_in_slow_mode = false;
};

// One block of a Jacobian: d output / d input, row-major, rows = output elements,
// cols = input elements (flat row-major indices of the tensors).
struct Jacobian {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<double> values;
  double at(int64_t row, int64_t col) const { return values[row * cols + col]; }
};
// [output][input]; the blocks of inputs that do not require grad have no columns.
using JacobianTable = std::vector<std::vector<Jacobian>>;

// The numerical Jacobian by central differences, (f(x + eps) - f(x - eps)) / 2 eps per
// input element. Same input rules and errors as gradcheck (without its precision warning).
JacobianTable numerical_jacobian(const GradcheckFn& fn, const TensorList& inputs,
                                 double eps = 1e-6);

class GradcheckError : public Error {
 public:
  explicit GradcheckError(GradcheckResult r) : Error(r.message), result_(std::move(r)) {}
  GradcheckError(const std::string& message, GradcheckResult r)
      : Error(message), result_(std::move(r)) {}
  const GradcheckResult& result() const { return result_; }
  Rethrower rethrower() const override {
    GradcheckResult r = result_;
    return [r](const std::string& m) { throw GradcheckError(m, r); };
  }

 private:
  GradcheckResult result_;
};

GradcheckResult gradcheck(const GradcheckFn& fn, const TensorList& inputs,
                          const GradcheckOptions& options = {});

// Checks the gradients of the gradients: gradcheck of (x, v) -> grad(fn(x), x, v,
// create_graph) with random grad_outputs v (seeded by options.seed) that require grad.
GradcheckResult gradgradcheck(const GradcheckFn& fn, const TensorList& inputs,
                              const GradcheckOptions& options = {});

// Stream consistency (streamgrad's own check): runs fn and backward once on one stream,
// then again with every op on a different stream (StreamPlacementScope: `streams`
// streams per device) under the deterministic adversarial sim scheduler for
// `adversarial_seeds` seeds and under the threaded scheduler, and on every other sim
// device; every input gradient and every intermediate gradient must equal the
// single-stream run bit for bit. A failure names the first op (in forward order) whose
// gradient differs, the variant (device, scheduler, seed) and the first differing element.
// Inputs must live on a sim device. Uses options.raise_exception and options.seed.
struct StreamCheckOptions {
  int streams = 3;
  int adversarial_seeds = 8;
  int threaded_runs = 4;
  bool across_devices = true;
};

GradcheckResult check_stream_consistency(const GradcheckFn& fn, const TensorList& inputs,
                                         const GradcheckOptions& options = {},
                                         const StreamCheckOptions& stream_options = {});

}  // namespace streamgrad

#endif  // STREAMGRAD_GRADCHECK_GRADCHECK_H_
