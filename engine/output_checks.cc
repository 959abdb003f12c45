#include "engine/output_checks.h"

#include <cctype>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/backend/stream.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace {

// True when a tensor of shape `from` broadcasts to shape `to` (so a gradient of shape
// `to` can be summed down to `from`).
bool expandable_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != to[lead + i] && from[i] != 1) return false;
  }
  return true;
}

std::string expected(const InputMeta& m) {
  return absl::StrCat(dtype_name(m.dtype), "[", absl::StrJoin(m.sizes, ", "), "] on ",
                      m.device.str());
}

}  // namespace

void validate_outputs(const Node& fn, TensorList& outputs, MovedTo* moved_to) {
  SG_CHECK(outputs.size() == fn.num_outputs(), Error, fn.name(), " returned ",
           outputs.size(), " gradients but has ", fn.num_outputs(),
           " inputs in forward; return one (possibly undefined) Tensor per input");
  moved_to->assign(outputs.size(), std::nullopt);
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Edge& e = fn.next_edge(i);
    Tensor& g = outputs[i];
    if (!e.valid() || !g.defined()) continue;
    const InputMeta& m = e.function->input_metadata(e.input_nr);
    const Tensor got = g;  // described only when refused: describe() formats a string
    auto refuse = [&](const char* what) {
      throw Error(absl::StrCat(fn.name(), " returned an invalid gradient for input ", i, ": got ",
                               got.describe(), " but expected ", expected(m), " (", what, ")"));
    };
    if (g.device() != m.device) {
      // Only a 0-dim gradient may come from another device (a scalar, as in forward).
      if (g.dim() != 0) refuse("gradients on another device must be 0-dim to be moved");
      g = engine_ops().to_device(g, m.device);
      (*moved_to)[i] = current_stream(m.device);
    }
    if (g.sizes() != m.sizes) {
      if (!expandable_to(m.sizes, g.sizes())) refuse("the input does not broadcast to its shape");
      g = engine_ops().sum_to(g, m.sizes);
    }
    if (g.dtype() != m.dtype) {
      if (!is_floating(g.dtype()) || !is_floating(m.dtype)) refuse("not a floating dtype");
      g = engine_ops().to_dtype(g, m.dtype);
    }
  }
}

void check_anomaly(const Node& fn, const TensorList& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& g = outputs[i];
    if (!g.defined() || !is_floating(g.dtype())) continue;
    bool bad = false;
    if (g.dtype() == DType::kFloat64) {
      for (double v : g.to_vector<double>()) bad = bad || !std::isfinite(v);
    } else {  // float32, or a 16-bit dtype read as float32 (exactly)
      const Tensor f = g.dtype() == DType::kFloat32 ? g : engine_ops().to_dtype(g, DType::kFloat32);
      for (float v : f.to_vector<float>()) bad = bad || !std::isfinite(v);
    }
    if (bad) {
      std::string forward = fn.name();
      const size_t pos = forward.rfind("Backward");
      if (pos != std::string::npos) forward = forward.substr(0, pos);
      for (char& c : forward) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      throw Error(absl::StrCat("anomaly mode: ", fn.name(), " returned NaN or Inf in its output ",
                               i, " (", g.describe(), "); the forward op was '", forward,
                               "'. Check its inputs for values outside the op's domain"));
    }
  }
}

}  // namespace streamgrad
