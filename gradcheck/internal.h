// Internal pieces of gradcheck (gradcheck/gradcheck.h), shared by its three source files:
// element access to strided inputs, checked evaluation of the function, the Jacobians,
// and the input / output checks that run before the comparison.
//
// Not a public header: nothing outside gradcheck/ includes it.
// Thread-safety: as gradcheck (the inputs are perturbed in place and restored).
// Failure: ValueError for bad inputs, outputs, or outputs that change shape or dtype
// under perturbation; Error (naming the output) when backward throws.
#ifndef STREAMGRAD_GRADCHECK_INTERNAL_H_
#define STREAMGRAD_GRADCHECK_INTERNAL_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gradcheck/gradcheck.h"

namespace streamgrad {
namespace gradcheck_internal {

constexpr size_t kMaxStoredJacobian = 4096;

// Reads / writes one element (flat row-major index) of a floating tensor in place, ordered
// on the device's current stream; a write rounds to the tensor's dtype. No version bump:
// every write is undone before anyone could observe it.
double get_element(const Tensor& t, int64_t flat);
void set_element(const Tensor& t, int64_t flat, double v);

// The values of a floating tensor, widened to double.
std::vector<double> as_doubles(const Tensor& t);
Tensor from_doubles(const std::vector<double>& v, const Tensor& like);

// A row-major rows x cols matrix as text, one row a line: [[a, b]\n [c, d]].
std::string jacobian_text(const std::vector<double>& j, int64_t rows, int64_t cols);

// fn(inputs), with every output checked to be a defined floating tensor.
TensorList call_checked(const GradcheckFn& fn, const TensorList& inputs);

// What an output looked like on the unperturbed inputs.
struct OutputSignature {
  Shape sizes;
  DType dtype;
};
std::vector<OutputSignature> signatures(const TensorList& outs);

// fn(inputs) without recording, as doubles. With `expect`, each output must keep the
// shape and dtype it had unperturbed (else a ValueError saying what changed `when`).
std::vector<std::vector<double>> evaluate(const GradcheckFn& fn, const TensorList& inputs,
                                          const std::vector<OutputSignature>* expect = nullptr,
                                          const std::string& when = "");

// Throws ValueError for inputs gradcheck cannot perturb soundly. With warn_precision,
// warns (SG_WARN) about each input that requires grad and is not float64.
void validate(const TensorList& inputs, bool warn_precision = false);

// One backward per output element, seeded with `scale` times the one-hot row, the result
// divided by `scale`: scale 1 gives backward(e_j) itself, the rows reported. A power of
// two as scale changes nothing in a backward linear in its gradient (floating-point
// scaling by 2^k is exact), so any difference is non-linearity or nondeterminism.
// undefined_grads: each output alone is the root, so the others' gradients reach backward
// undefined.
JacobianTable analytical_jacobian(const GradcheckFn& fn, const TensorList& inputs,
                                  bool undefined_grads, double scale);

// For a function none of whose outputs requires grad: passes when the numerical Jacobian
// is zero, fails naming the first nonzero derivative otherwise.
GradcheckResult check_no_differentiable_outputs(const GradcheckFn& fn, const TensorList& inputs,
                                                double eps);

// Differentiates with every output's gradient zero (the reference framework's check that
// backward is multiplied by grad_output): every input's gradient must come back exactly
// zero or undefined.
GradcheckResult check_zero_grad_outputs(const GradcheckFn& fn, const TensorList& inputs);

// Differentiates with every output's gradient undefined (check_undefined_grad): every
// input's gradient must come back undefined or zero, and backward must not throw.
GradcheckResult check_all_grads_undefined(const GradcheckFn& fn, const TensorList& inputs);

// n draws of the standard normal distribution (fast mode's projections, gradgradcheck's
// grad_outputs).
std::vector<double> random_vector(size_t n, std::mt19937_64& rng);

}  // namespace gradcheck_internal
}  // namespace streamgrad

#endif  // STREAMGRAD_GRADCHECK_INTERNAL_H_
