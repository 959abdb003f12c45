// The two Jacobians gradcheck compares: numerical (central differences, with the
// function's outputs checked not to change shape or dtype under perturbation) and
// analytical (backward, one row per output element), their elements read and written in
// any floating dtype, and their text form for failure messages.
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/backward.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "gradcheck/internal.h"
#include "runtime/base/half.h"
#include "runtime/memory/copy.h"

namespace streamgrad {
namespace gradcheck_internal {
namespace {

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

template <typename T>
T from_bytes(const unsigned char* bytes) {
  T v;
  std::memcpy(&v, bytes, sizeof(T));
  return v;
}

template <typename T>
void to_bytes(T v, unsigned char* bytes) {
  std::memcpy(bytes, &v, sizeof(T));
}

float widen_value(float v) { return v; }
float widen_value(Half v) { return v.to_float(); }
float widen_value(BFloat16 v) { return v.to_float(); }

template <typename T>
std::vector<double> widen(const std::vector<T>& values) {
  std::vector<double> out;
  out.reserve(values.size());
  for (const T& v : values) out.push_back(widen_value(v));
  return out;
}

std::string shape_text(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) absl::StrAppend(&r, i ? ", " : "", s[i]);
  return r + "]";
}

}  // namespace

// Elements travel as doubles: float64 and float32 exactly, the 16-bit types through float
// (which holds each of their values). A write rounds to the tensor's dtype, as storing
// x + eps into such a tensor does.
double get_element(const Tensor& t, int64_t flat) {
  unsigned char bytes[sizeof(double)];
  copy_bytes(bytes, Device("cpu"), element_ptr(t, flat), t.device(), element_size(t.dtype()));
  switch (t.dtype()) {
    case DType::kFloat64:
      return from_bytes<double>(bytes);
    case DType::kFloat32:
      return from_bytes<float>(bytes);
    case DType::kFloat16:
      return from_bytes<Half>(bytes).to_float();
    case DType::kBFloat16:
      return from_bytes<BFloat16>(bytes).to_float();
    default:
      throw ValueError(absl::StrCat("gradcheck: cannot perturb ", t.describe(),
                                    "; only floating inputs can require grad"));
  }
}

void set_element(const Tensor& t, int64_t flat, double v) {
  unsigned char bytes[sizeof(double)];
  switch (t.dtype()) {
    case DType::kFloat64:
      to_bytes(v, bytes);
      break;
    case DType::kFloat32:
      to_bytes(static_cast<float>(v), bytes);
      break;
    case DType::kFloat16:
      to_bytes(Half::from_float(static_cast<float>(v)), bytes);
      break;
    case DType::kBFloat16:
      to_bytes(BFloat16::from_float(static_cast<float>(v)), bytes);
      break;
    default:
      throw ValueError(absl::StrCat("gradcheck: cannot perturb ", t.describe(),
                                    "; only floating inputs can require grad"));
  }
  copy_bytes(element_ptr(t, flat), t.device(), bytes, Device("cpu"), element_size(t.dtype()));
}

std::vector<double> as_doubles(const Tensor& t) {
  switch (t.dtype()) {
    case DType::kFloat64:
      return t.to_vector<double>();
    case DType::kFloat32:
      return widen(t.to_vector<float>());
    case DType::kFloat16:
      return widen(t.to_vector<Half>());
    case DType::kBFloat16:
      return widen(t.to_vector<BFloat16>());
    default:
      throw ValueError(
          absl::StrCat("gradcheck: cannot read ", t.describe(), " as floating values"));
  }
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

Tensor from_doubles(const std::vector<double>& v, const Tensor& like) {
  return from_vector<double>(v, like.sizes(),
                             TensorOptions().dtype(like.dtype()).device(like.device()));
}

TensorList call_checked(const GradcheckFn& fn, const TensorList& inputs) {
  TensorList outs = fn(inputs);
  for (size_t o = 0; o < outs.size(); ++o) {
    SG_CHECK(outs[o].defined(), ValueError, "gradcheck: output ", o,
             " of the function is an undefined tensor; return floating tensors only");
    SG_CHECK(is_floating(outs[o].dtype()), ValueError, "gradcheck: output ", o, " is ",
             outs[o].describe(), "; only floating outputs can be differentiated");
  }
  return outs;
}

std::vector<OutputSignature> signatures(const TensorList& outs) {
  std::vector<OutputSignature> s;
  for (const Tensor& t : outs) s.push_back({t.sizes(), t.dtype()});
  return s;
}

std::vector<std::vector<double>> evaluate(const GradcheckFn& fn, const TensorList& inputs,
                                          const std::vector<OutputSignature>* expect,
                                          const std::string& when) {
  NoGradGuard no_grad;
  const TensorList outs = call_checked(fn, inputs);
  if (expect != nullptr) {
    // Finite differences subtract outputs element by element: a changed output would be
    // compared against the wrong elements (or read past its end).
    SG_CHECK(outs.size() == expect->size(), ValueError, "gradcheck: the function returned ",
             expect->size(), " outputs on the unperturbed inputs but ", outs.size(), " when ",
             when, "; its outputs must not depend on the input values");
    for (size_t o = 0; o < outs.size(); ++o) {
      const OutputSignature& e = (*expect)[o];
      SG_CHECK(outs[o].sizes() == e.sizes && outs[o].dtype() == e.dtype, ValueError,
               "gradcheck: output ", o, " is ", dtype_name(e.dtype), shape_text(e.sizes),
               " on the unperturbed inputs but ", dtype_name(outs[o].dtype()),
               shape_text(outs[o].sizes()), " when ", when,
               "; the shape and dtype of every output must not depend on the input values");
    }
  }
  std::vector<std::vector<double>> out;
  for (const Tensor& t : outs) out.push_back(as_doubles(t));
  return out;
}

}  // namespace gradcheck_internal

using namespace gradcheck_internal;  // NOLINT: this file implements them

JacobianTable numerical_jacobian(const GradcheckFn& fn, const TensorList& inputs, double eps) {
  validate(inputs);
  SG_CHECK(eps > 0 && std::isfinite(eps), ValueError, "numerical_jacobian: eps is ", eps,
           "; pass a small positive step such as 1e-6");
  const std::vector<OutputSignature> sig = [&] {
    NoGradGuard no_grad;
    return signatures(call_checked(fn, inputs));
  }();
  const auto base = evaluate(fn, inputs, &sig, "evaluated a second time");
  JacobianTable r(base.size(), std::vector<Jacobian>(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    const int64_t n = x.requires_grad() ? x.numel() : 0;
    for (size_t o = 0; o < base.size(); ++o) {
      r[o][i].rows = static_cast<int64_t>(base[o].size());
      r[o][i].cols = n;
      r[o][i].values.assign(base[o].size() * n, 0.0);
    }
    for (int64_t e = 0; e < n; ++e) {
      const double orig = get_element(x, e);
      const std::string at = absl::StrCat("input ", i, " element ", e, " was perturbed by ");
      set_element(x, e, orig + eps);
      std::vector<std::vector<double>> plus, minus;
      try {
        plus = evaluate(fn, inputs, &sig, at + "+eps");
        set_element(x, e, orig - eps);
        minus = evaluate(fn, inputs, &sig, at + "-eps");
      } catch (...) {
        set_element(x, e, orig);  // bad input never corrupts: the caller gets x back
        throw;
      }
      set_element(x, e, orig);
      for (size_t o = 0; o < base.size(); ++o) {
        for (size_t k = 0; k < base[o].size(); ++k) {
          r[o][i].values[k * n + e] = (plus[o][k] - minus[o][k]) / (2 * eps);
        }
      }
    }
  }
  return r;
}

namespace gradcheck_internal {

JacobianTable analytical_jacobian(const GradcheckFn& fn, const TensorList& inputs,
                                  bool undefined_grads, double scale) {
  const TensorList outs = call_checked(fn, inputs);
  TensorList diff;
  std::vector<size_t> diff_index;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].requires_grad()) {
      diff.push_back(inputs[i]);
      diff_index.push_back(i);
    }
  }
  JacobianTable r(outs.size(), std::vector<Jacobian>(inputs.size()));
  for (size_t o = 0; o < outs.size(); ++o) {
    const int64_t m = outs[o].numel();
    for (size_t i = 0; i < inputs.size(); ++i) {
      r[o][i].rows = m;
      r[o][i].cols = inputs[i].requires_grad() ? inputs[i].numel() : 0;
      r[o][i].values.assign(m * r[o][i].cols, 0.0);
    }
    if (!outs[o].requires_grad()) continue;
    for (int64_t k = 0; k < m; ++k) {
      std::vector<double> seed_row(m, 0.0);
      seed_row[k] = scale;
      TensorList roots{outs[o]}, seeds{from_doubles(seed_row, outs[o])};
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
        Jacobian& j = r[o][diff_index[d]];
        for (int64_t e = 0; e < j.cols; ++e) j.values[k * j.cols + e] = row[e] / scale;
      }
    }
  }
  return r;
}

std::vector<double> random_vector(size_t n, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  std::vector<double> v(n);
  for (double& x : v) x = normal(rng);
  return v;
}

}  // namespace gradcheck_internal
}  // namespace streamgrad
