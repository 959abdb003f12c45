#include "nn/grad_scaler.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/factories.h"
#include "kernels/foreach.h"
#include "nn/checkpoint.h"
#include "ops/ops.h"
#include "runtime/backend/guard.h"
#include "runtime/base/dtype.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace nn {
namespace {

constexpr char kPrefix[] = "scaler.";
constexpr const char* kKeys[] = {"scale", "growth_factor", "backoff_factor", "growth_interval",
                                 "growth_tracker"};

// v as the float32 the scale holds (rounded as the reference's fill_ rounds it), which
// must be finite and > 0.
float checked_scale(const char* op, const char* what, double v) {
  const float f = static_cast<float>(v);
  SG_CHECK(std::isfinite(f) && f > 0, ValueError, op, ": ", what, " is ", v,
           "; a scale must be finite and > 0 as a float32 (at most 3.4028235e38, at least "
           "1.4e-45)");
  return f;
}

void check_growth_factor(const char* op, double v) {
  SG_CHECK(v > 1 && std::isfinite(v), ValueError, op, ": growth_factor ", v,
           " must be finite and > 1 (the scale grows by it)");
}

void check_backoff_factor(const char* op, double v) {
  SG_CHECK(v > 0 && v < 1, ValueError, op, ": backoff_factor ", v,
           " must be in (0, 1) (the scale shrinks by it)");
}

void check_growth_interval(const char* op, double v) {
  SG_CHECK(v >= 1 && is_int64_value(v), ValueError, op, ": growth_interval ", v,
           " must be an integer >= 1 (clean steps between two growths)");
}

}  // namespace

GradScaler::GradScaler(const GradScalerOptions& o)
    : scale_(checked_scale("GradScaler", "init_scale", o.init_scale())),
      growth_factor_(o.growth_factor()),
      backoff_factor_(o.backoff_factor()),
      growth_interval_(o.growth_interval()),
      enabled_(o.enabled()) {
  check_growth_factor("GradScaler", growth_factor_);
  check_backoff_factor("GradScaler", backoff_factor_);
  check_growth_interval("GradScaler", static_cast<double>(growth_interval_));
}

Tensor GradScaler::scale(const Tensor& outputs) const {
  if (!enabled_) return outputs;
  SG_CHECK(outputs.defined(), ValueError,
           "GradScaler::scale: got an undefined tensor; pass the loss (or the outputs) "
           "that backward will start from");
  return mul(outputs, static_cast<double>(scale_));
}

std::vector<Tensor> GradScaler::scale(const std::vector<Tensor>& outputs) const {
  std::vector<Tensor> out;
  out.reserve(outputs.size());
  for (const Tensor& t : outputs) out.push_back(scale(t));
  return out;
}

std::vector<GradScaler::Flag> GradScaler::unscale_grads(Optimizer& optimizer) const {
  struct Group {
    Device device;
    DType dtype;
    std::vector<kernels::View> views;
    std::vector<Tensor> grads;
  };
  std::vector<Group> groups;
  const std::vector<Tensor>& params = optimizer.params();
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor g = params[i].grad();
    if (!g.defined()) continue;
    // As the reference: the gradients a scaler unscales belong to float32 (or float64)
    // parameters, which autocast leaves in full precision; a 16-bit gradient divided by
    // the scale would lose the small values the scaling was there to keep.
    SG_CHECK(!is_reduced_floating(g.dtype()), ValueError, "GradScaler::unscale_: the gradient of "
             "parameter ", i, " is ", g.describe(), "; loss scaling unscales float32 "
             "gradients: keep the parameters in float32 and run the forward under "
             "AutocastGuard instead of converting the model to ", dtype_name(g.dtype()));
    const kernels::View v = g.view();
    for (int64_t d = 0; d < v.dim(); ++d) {
      SG_CHECK(v.strides[d] != 0 || v.sizes[d] <= 1, ValueError,
               "GradScaler::unscale_: the gradient of parameter ", i, " (", g.describe(),
               ") is a broadcast view whose elements share memory, so it cannot be unscaled "
               "in place; give the parameter a gradient of its own (contiguous(grad))");
    }
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& gr) {
      return gr.device == g.device() && gr.dtype == g.dtype();
    });
    if (it == groups.end()) it = groups.insert(groups.end(), Group{g.device(), g.dtype(), {}, {}});
    it->views.push_back(v);
    it->grads.push_back(std::move(g));
  }
  // One flag per device, zero-filled on the device's current stream, all made before any
  // launch: running out of memory here leaves every gradient as it was.
  std::vector<Flag> flags;
  for (const Group& gr : groups) {
    const bool have = std::any_of(flags.begin(), flags.end(),
                                  [&](const Flag& f) { return f.device == gr.device; });
    if (have) continue;
    flags.push_back(Flag{gr.device, current_stream(gr.device),
                         zeros({1}, TensorOptions().dtype(DType::kFloat32).device(gr.device))});
  }
  // As the reference: the reciprocal in double, rounded to float32.
  const double inv_scale = static_cast<float>(1.0 / static_cast<double>(scale_));
  for (const Group& gr : groups) {
    const Flag& flag = *std::find_if(flags.begin(), flags.end(),
                                     [&](const Flag& f) { return f.device == gr.device; });
    kernels::non_finite_check_and_unscale(flag.stream, gr.views, flag.found_inf.view(), inv_scale);
    for (const Tensor& g : gr.grads) g.bump_version();
  }
  return flags;
}

void GradScaler::unscale_(Optimizer& optimizer) {
  if (!enabled_) return;
  OptimizerRecord& record = records_[&optimizer];
  SG_CHECK(record.stage != Stage::kUnscaled, Error,
           "GradScaler::unscale_: unscale_() has already been called on this optimizer since "
           "the last update(); call it at most once per optimizer and iteration, before step()");
  SG_CHECK(record.stage != Stage::kStepped, Error,
           "GradScaler::unscale_: unscale_() is being called after step() for this optimizer; "
           "unscale before step(), or call update() first to start the next iteration");
  record.flags = unscale_grads(optimizer);
  record.stage = Stage::kUnscaled;
}

double GradScaler::found_inf(OptimizerRecord& record) {
  if (!record.read) {
    double sum = 0;
    for (const Flag& f : record.flags) {
      StreamGuard on(f.stream);  // ordered after the launch that wrote the flag
      sum += f.found_inf.item<float>();
    }
    record.found_inf = sum;
    record.read = true;
  }
  return record.found_inf;
}

bool GradScaler::step(Optimizer& optimizer) {
  if (!enabled_) {
    optimizer.step();
    return true;
  }
  OptimizerRecord& record = records_[&optimizer];
  SG_CHECK(record.stage != Stage::kStepped, Error,
           "GradScaler::step: step() has already been called for this optimizer since the "
           "last update(); call update() once per iteration, after stepping every optimizer");
  if (record.stage == Stage::kReady) unscale_(optimizer);
  SG_CHECK(!record.flags.empty(), Error,
           "GradScaler::step: no inf checks were recorded for this optimizer: none of its "
           "parameters has a gradient; run backward() on scale(loss) before step()");
  const bool clean = found_inf(record) == 0;  // the host synchronisation
  if (clean) optimizer.step();
  record.stage = Stage::kStepped;
  return clean;
}

void GradScaler::update() {
  if (!enabled_) return;
  std::map<const Optimizer*, OptimizerRecord> records;
  records.swap(records_);  // the iteration ends here, whatever follows
  size_t checked = 0;
  double found = 0;
  for (auto& [optimizer, record] : records) {
    checked += record.flags.size();
    found += found_inf(record);
  }
  SG_CHECK(checked > 0, Error,
           "GradScaler::update: no inf checks were recorded prior to update(); call "
           "step(optimizer) (or unscale_(optimizer)) after backward() on scale(loss) in every "
           "iteration");
  // The reference's _amp_update_scale_, with the scale a float32 value: products in
  // double, rounded to float32 once, and no growth past float32's range.
  if (found != 0) {
    scale_ = static_cast<float>(static_cast<double>(scale_) * backoff_factor_);
    growth_tracker_ = 0;
    return;
  }
  const int64_t successful = growth_tracker_ + 1;
  // ">=" where the reference has "==": the same whenever the tracker is below the
  // interval, which only set_growth_interval to a smaller value can break (the reference
  // then never grows again).
  if (successful >= growth_interval_) {
    const float grown = static_cast<float>(static_cast<double>(scale_) * growth_factor_);
    if (std::isfinite(grown)) scale_ = grown;
    growth_tracker_ = 0;
  } else {
    growth_tracker_ = successful;
  }
}

void GradScaler::update(double new_scale) {
  if (!enabled_) return;
  const float s = checked_scale("GradScaler::update", "new_scale", new_scale);
  records_.clear();
  scale_ = s;
}

double GradScaler::get_scale() const { return enabled_ ? static_cast<double>(scale_) : 1.0; }

int64_t GradScaler::get_growth_tracker() const { return enabled_ ? growth_tracker_ : 0; }

void GradScaler::set_growth_factor(double factor) {
  check_growth_factor("GradScaler::set_growth_factor", factor);
  growth_factor_ = factor;
}

void GradScaler::set_backoff_factor(double factor) {
  check_backoff_factor("GradScaler::set_backoff_factor", factor);
  backoff_factor_ = factor;
}

void GradScaler::set_growth_interval(int64_t interval) {
  check_growth_interval("GradScaler::set_growth_interval", static_cast<double>(interval));
  growth_interval_ = interval;
}

std::map<std::string, std::string> GradScaler::state_dict() const {
  if (!enabled_) return {};
  const double values[] = {static_cast<double>(scale_), growth_factor_, backoff_factor_,
                           static_cast<double>(growth_interval_),
                           static_cast<double>(growth_tracker_)};
  std::map<std::string, std::string> out;
  for (size_t k = 0; k < std::size(kKeys); ++k) {
    out[absl::StrCat(kPrefix, kKeys[k])] = metadata_number(values[k]);
  }
  return out;
}

void GradScaler::load_state_dict(const std::map<std::string, std::string>& state) {
  if (!enabled_) return;
  constexpr const char* kOp = "GradScaler::load_state_dict";
  const std::string names = absl::StrCat("scaler.scale, scaler.growth_factor, ",
                                         "scaler.backoff_factor, scaler.growth_interval and "
                                         "scaler.growth_tracker");
  std::map<std::string, double> v;
  for (const auto& [key, text] : state) {
    if (!absl::StartsWith(key, kPrefix)) continue;
    const std::string name = key.substr(sizeof(kPrefix) - 1);
    SG_CHECK(std::find(std::begin(kKeys), std::end(kKeys), name) != std::end(kKeys), ValueError,
             kOp, ": unknown key '", key, "'; a GradScaler's state has ", names);
    double value = 0;
    SG_CHECK(parse_metadata_number(text, &value), ValueError, kOp, ": '", key, "' is '", text,
             "', not a number");
    v[name] = value;
  }
  SG_CHECK(!v.empty(), ValueError, kOp,
           ": the state holds no GradScaler state (no key starts with 'scaler.'), possibly "
           "because it was saved from a disabled GradScaler; expected ",
           names);
  for (const char* k : kKeys) {
    SG_CHECK(v.count(k) != 0, ValueError, kOp, ": '", kPrefix, k, "' is missing; expected ", names);
  }
  // Everything is checked before anything changes.
  const float scale = checked_scale(kOp, "scaler.scale", v["scale"]);
  check_growth_factor(kOp, v["growth_factor"]);
  check_backoff_factor(kOp, v["backoff_factor"]);
  check_growth_interval(kOp, v["growth_interval"]);
  const double tracker = v["growth_tracker"];
  SG_CHECK(is_int64_value(tracker) && tracker >= 0 && tracker < v["growth_interval"], ValueError,
           kOp, ": growth_tracker ", tracker,
           " must be an integer in [0, growth_interval = ", v["growth_interval"], ")");
  scale_ = scale;
  growth_factor_ = v["growth_factor"];
  backoff_factor_ = v["backoff_factor"];
  growth_interval_ = static_cast<int64_t>(v["growth_interval"]);
  growth_tracker_ = static_cast<int64_t>(tracker);
}

}  // namespace nn
}  // namespace streamgrad
