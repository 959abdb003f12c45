#include "nn/checkpoint.h"

#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nn/checkpoint_format.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace nn {

using checkpoint_internal::describe;
using checkpoint_internal::Entry;
using checkpoint_internal::make_tensor;
using checkpoint_internal::ParsedFile;
using checkpoint_internal::read_safetensors;
using checkpoint_internal::rethrow_with_context;
using checkpoint_internal::where;
using checkpoint_internal::write_safetensors;

namespace {

constexpr char kOptimizerPrefix[] = "optimizer.";

// Arguments, or a file, that do not fit what the call was asked to do.
[[noreturn]] void invalid(const char* op, const std::string& path, const std::string& what) {
  throw ValueError(absl::StrCat(where(op, path), what));
}

void check_names(const char* op, const std::string& path, const NamedTensors& tensors) {
  std::set<std::string> seen;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == "__metadata__") {
      invalid(op, path, absl::StrCat("tensor name '", name, "' is not allowed"));
    }
    if (!seen.insert(name).second) {
      invalid(op, path, absl::StrCat("tensor name '", name, "' appears twice"));
    }
    if (!t.defined()) invalid(op, path, absl::StrCat("tensor '", name, "' is undefined"));
  }
}

// The entry must match `expected` (a model tensor or an optimiser's parameter) exactly.
void check_match(const char* op, const std::string& path, const Entry& e,
                 const Tensor& expected, const std::string& what) {
  if (e.dtype == expected.dtype() && e.shape == expected.sizes()) return;
  invalid(op, path, absl::StrCat("key '", e.name, "': ", what, " ", expected.describe(),
                                        " but the file holds ", describe(e)));
}

// Optimiser state: what was validated, ready to be turned into tensors.
struct OptimizerPlan {
  std::vector<std::pair<std::string, const Entry*>> tensors;  // "<i>.<name>", entry
  std::vector<size_t> param_index;
  std::map<std::string, double> scalars;
};

void plan_optimizer(const char* op, const std::string& path, const ParsedFile& f,
                            const Optimizer& optimizer, OptimizerPlan* plan) {
  const std::string lr_key = absl::StrCat(kOptimizerPrefix, "lr");
  if (f.metadata.count(lr_key) == 0) {
    invalid(op, path, absl::StrCat("the file holds no optimizer state ('", lr_key,
                                          "' is missing from __metadata__)"));
  }
  for (const auto& [key, text] : f.metadata) {
    if (!absl::StartsWith(key, kOptimizerPrefix)) continue;
    double v = 0;
    if (!parse_metadata_number(text, &v)) {
      invalid(op, path, absl::StrCat("__metadata__ '", key, "' is '", text,
                                            "', not a number"));
    }
    plan->scalars[key.substr(sizeof(kOptimizerPrefix) - 1)] = v;
  }
  const double lr = plan->scalars["lr"];
  if (!(lr >= 0) || !std::isfinite(lr)) {
    invalid(op, path, absl::StrCat("learning rate ", lr, " must be finite and >= 0"));
  }
  const std::vector<Tensor>& params = optimizer.params();
  for (const auto& [name, e] : f.entries) {
    if (!absl::StartsWith(name, kOptimizerPrefix)) continue;
    const std::string key = name.substr(sizeof(kOptimizerPrefix) - 1);
    const size_t dot = key.find('.');
    uint64_t i = 0;
    if (dot == std::string::npos || dot == 0 || dot + 1 == key.size() ||
        key.find_first_not_of("0123456789") != dot || !absl::SimpleAtoi(key.substr(0, dot), &i) ||
        i >= params.size()) {
      invalid(op, path, absl::StrCat("key '", name, "' names no parameter of the optimizer ",
                                            "(expected '", kOptimizerPrefix,
                                            "<index>.<name>' with index below ", params.size(), ")"));
    }
    check_match(op, path, e, params[i],
                absl::StrCat("optimizer state of parameter ", i, " must be"));
    plan->tensors.emplace_back(key, &e);
    plan->param_index.push_back(i);
  }
}

}  // namespace

// %.17g: every double reads back exactly.
std::string metadata_number(double value) { return absl::StrFormat("%.17g", value); }

bool parse_metadata_number(const std::string& text, double* value) {
  double v = 0;
  if (!absl::SimpleAtod(text, &v)) return false;
  *value = v;
  return true;
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata) {
  check_names("save_safetensors", path, tensors);
  write_safetensors("save_safetensors", path, tensors, metadata);
}

SafetensorsContents load_safetensors(const std::string& path, Device device) {
  constexpr const char* kOp = "load_safetensors";
  const ParsedFile f = read_safetensors(kOp, path);
  SafetensorsContents out;
  out.metadata = f.metadata;
  try {
    for (const auto& [name, e] : f.entries) {
      out.tensors.emplace_back(name, make_tensor(f, e, device));
    }
  } catch (const std::exception& e) {
    rethrow_with_context(kOp, path, e);
  }
  return out;
}

Metadata load_safetensors_metadata(const std::string& path) {
  return read_safetensors("load_safetensors_metadata", path).metadata;
}

void save_checkpoint(const std::string& path, const Module& module,
                             const Optimizer* optimizer, const Metadata& metadata) {
  constexpr const char* kOp = "save_checkpoint";
  NamedTensors all = module.state_dict();
  for (const auto& [name, t] : all) {
    if (absl::StartsWith(name, kOptimizerPrefix)) {
      invalid(kOp, path, absl::StrCat("model key '", name, "' starts with '",
                                             kOptimizerPrefix, "', which optimizer state uses"));
    }
  }
  Metadata md = metadata;
  for (const auto& [key, value] : metadata) {
    if (absl::StartsWith(key, kOptimizerPrefix)) {
      invalid(kOp, path, absl::StrCat("metadata key '", key, "' starts with '",
                                             kOptimizerPrefix, "', which optimizer state uses"));
    }
  }
  if (optimizer != nullptr) {
    const OptimizerState s = optimizer->state_dict();
    for (const auto& [key, t] : s.tensors) all.emplace_back(kOptimizerPrefix + key, t);
    for (const auto& [key, v] : s.scalars) md[kOptimizerPrefix + key] = metadata_number(v);
  }
  check_names(kOp, path, all);
  write_safetensors(kOp, path, all, md);
}

Metadata load_checkpoint(const std::string& path, Module& module, Optimizer* optimizer) {
  constexpr const char* kOp = "load_checkpoint";
  const ParsedFile f = read_safetensors(kOp, path);

  // Validate everything against the model and the optimiser before changing either.
  const NamedTensors mine = module.state_dict();
  std::vector<std::pair<const Entry*, Device>> model_plan;
  std::set<std::string> known;
  for (const auto& [name, t] : mine) {
    const auto it = f.entries.find(name);
    if (it == f.entries.end()) {
      invalid(kOp, path, absl::StrCat("key '", name, "' (", t.describe(), ") of ",
                                             module.type_name(), " is missing from the file"));
    }
    check_match(kOp, path, it->second, t, "the model expects");
    model_plan.emplace_back(&it->second, t.device());
    known.insert(name);
  }
  for (const auto& [name, e] : f.entries) {
    if (known.count(name) == 0 && !absl::StartsWith(name, kOptimizerPrefix)) {
      invalid(kOp, path, absl::StrCat("unexpected key '", name, "' (", describe(e),
                                             "): ", module.type_name(), " has no such tensor"));
    }
  }
  OptimizerPlan opt_plan;
  if (optimizer != nullptr) plan_optimizer(kOp, path, f, *optimizer, &opt_plan);

  try {
    // Every tensor is created (on its destination's device) before anything changes,
    // so running out of memory here leaves the model and the optimiser as they were.
    NamedTensors model_state;
    for (const auto& [e, device] : model_plan) {
      model_state.emplace_back(e->name, make_tensor(f, *e, device));
    }
    OptimizerState opt_state;
    for (size_t k = 0; k < opt_plan.tensors.size(); ++k) {
      const Device device = optimizer->params()[opt_plan.param_index[k]].device();
      opt_state.tensors.emplace_back(opt_plan.tensors[k].first,
                                     make_tensor(f, *opt_plan.tensors[k].second, device));
    }
    opt_state.scalars = opt_plan.scalars;
    // Both load_state_dicts validate before changing anything. The optimiser goes first
    // because its old state can be put back (it replaces its state tensors rather than
    // writing into them) should the model's copies fail.
    OptimizerState previous;
    if (optimizer != nullptr) {
      previous = optimizer->state_dict();
      optimizer->load_state_dict(opt_state);
    }
    try {
      module.load_state_dict(model_state, /*strict=*/true);
    } catch (...) {
      if (optimizer != nullptr) optimizer->load_state_dict(previous);
      throw;
    }
  } catch (const std::exception& e) {
    rethrow_with_context(kOp, path, e);
  }
  Metadata user;
  for (const auto& [key, value] : f.metadata) {
    if (!absl::StartsWith(key, kOptimizerPrefix)) user.emplace(key, value);
  }
  return user;
}

}  // namespace nn
}  // namespace streamgrad
