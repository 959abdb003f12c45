// GradScaler: dynamic loss scaling for mixed-precision training, as the reference
// framework's torch.amp.GradScaler (torch.cuda.amp.GradScaler).
//
//   nn::GradScaler scaler(nn::GradScalerOptions().init_scale(1024));
//   for (...) {
//     opt.zero_grad();
//     scaler.scale(loss).backward();  // gradients of loss * scale: small ones survive
//     scaler.unscale_(opt);           // optional: the true gradients, to clip or inspect
//     scaler.step(opt);               // unscales unless done; skipped on Inf or NaN
//     scaler.update();                // backoff after a skipped step, growth after
//   }                                 //   growth_interval steps in a row that were not
//
// unscale_ divides every defined gradient of the optimiser's parameters by the scale in
// place: one fused launch per (device, dtype) group (kernels::non_finite_check_and_unscale,
// on the device's current stream), which also raises a per-device float32 flag when a
// gradient holds an Inf or NaN. It does not wait for the device. step reads the flags
// (the one host synchronisation, as in the reference) and calls opt.step() only when
// none is raised, so a skipped step leaves the parameters and the optimiser's state
// (momentum buffers, Adam's moments and step counts) untouched. update() then sets the
// scale as the reference's _amp_update_scale_: times backoff_factor with the growth
// tracker reset if any step of the iteration found an Inf or NaN; otherwise the tracker
// counts one more clean iteration and, reaching growth_interval, the scale grows by
// growth_factor (unless that overflows float32) and the tracker restarts at 0. The scale
// is a float32 value, as the reference's scale tensor, and is kept on the host here:
// scale() multiplies by a scalar and update() launches nothing.
//
// Per optimiser and iteration: unscale_ at most once, before step; step at most once;
// update() after the iteration's steps ends it for every optimiser. A disabled scaler
// (enabled(false)) is a pass-through: scale returns its argument, step calls opt.step(),
// unscale_, update and load_state_dict do nothing, get_scale() is 1 and state_dict() is
// empty, so one training loop serves both cases.
//
// state_dict() is a map of strings meant for nn::save_checkpoint's metadata (keys
// "scaler.scale", "scaler.growth_factor", "scaler.backoff_factor",
// "scaler.growth_interval", "scaler.growth_tracker"; numbers as nn::metadata_number
// writes them, so they read back exactly); load_state_dict takes load_checkpoint's
// metadata back, ignoring keys without the "scaler." prefix:
//
//   nn::save_checkpoint(path, *model, &opt, scaler.state_dict());
//   scaler.load_state_dict(nn::load_checkpoint(path, *model, &opt));   // throws on failure
//
// Thread-safety: one thread at a time uses a scaler, as an optimiser (unscale_, step,
// update, the setters and load_state_dict change its state without a lock); scale() and
// the getters are const and may run concurrently with one another. The grads are written
// on their devices' current streams, which must be ordered after backward's (the
// caller's streams are, S6).
// Failure: ValueError for a float16 or bfloat16 gradient (as the reference: keep
// parameters in float32 and use AutocastGuard), for options out of range (init_scale and new scales finite and
// > 0 in float32, growth_factor > 1, backoff_factor in (0, 1), growth_interval >= 1)
// and for load_state_dict input that is missing, unknown, malformed or out of range (the
// scaler is then unchanged); streamgrad::Error for calls out of order (unscale_ twice or
// after step, step twice before update, step or update when no gradient was checked),
// naming the call and what to do. unscale_ validates every gradient (a broadcast view,
// whose elements share memory, cannot be unscaled in place) and allocates every flag
// before it launches anything, so a refused call leaves the gradients as they were.
#ifndef STREAMGRAD_NN_GRAD_SCALER_H_
#define STREAMGRAD_NN_GRAD_SCALER_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"
#include "nn/optim.h"
#include "nn/options.h"
#include "runtime/backend/stream.h"
#include "runtime/base/device.h"

namespace streamgrad {
namespace nn {

struct GradScalerOptions {
  SG_NN_OPTION(double, init_scale) = 65536.0;  // 2^16
  SG_NN_OPTION(double, growth_factor) = 2.0;
  SG_NN_OPTION(double, backoff_factor) = 0.5;
  SG_NN_OPTION(int64_t, growth_interval) = 2000;
  SG_NN_OPTION(bool, enabled) = true;
};

class GradScaler {
 public:
  explicit GradScaler(const GradScalerOptions& options = GradScalerOptions());
  // Movable, not copyable: state_dict() / load_state_dict() copy a scaler's state.
  GradScaler(GradScaler&&) = default;
  GradScaler& operator=(GradScaler&&) = default;
  GradScaler(const GradScaler&) = delete;
  GradScaler& operator=(const GradScaler&) = delete;

  // outputs * scale, differentiable, on the outputs' device and stream (each output of
  // the list alike); the outputs themselves when disabled.
  Tensor scale(const Tensor& outputs) const;
  std::vector<Tensor> scale(const std::vector<Tensor>& outputs) const;

  // Divides the optimiser's defined gradients by the scale in place and records, per
  // device, whether one held an Inf or NaN. Error when already called for this optimiser
  // since the last update(), or after step().
  void unscale_(Optimizer& optimizer);

  // Unscales first unless unscale_(optimizer) was called this iteration, then calls
  // optimizer.step() unless a gradient held an Inf or NaN. Returns whether the step ran
  // (the reference returns step()'s value, or None when it skipped). Error when already
  // called for this optimizer since the last update(), or when none of its parameters had
  // a gradient to check.
  bool step(Optimizer& optimizer);

  // Ends the iteration: the growth/backoff rule above over every optimiser's flags
  // (read on the host now if step did not read them). Error when no gradient was checked
  // since the last update(); the iteration's records are dropped either way.
  void update();
  // Ends the iteration with this scale (rounded to float32, as the reference's fill_);
  // the growth tracker is left as it is.
  void update(double new_scale);

  // The current scale (1 when disabled), exactly: a float32 value.
  double get_scale() const;
  // Clean iterations since the last growth or backoff (0 when disabled).
  int64_t get_growth_tracker() const;
  double get_growth_factor() const { return growth_factor_; }
  void set_growth_factor(double factor);
  double get_backoff_factor() const { return backoff_factor_; }
  void set_backoff_factor(double factor);
  int64_t get_growth_interval() const { return growth_interval_; }
  void set_growth_interval(int64_t interval);
  bool is_enabled() const { return enabled_; }

  // Empty when disabled (as the reference's).
  std::map<std::string, std::string> state_dict() const;
  // Requires all five "scaler." keys, each a number in range (growth_interval and
  // growth_tracker integers, 0 <= growth_tracker < growth_interval), and no other
  // "scaler." key; ignores the rest of the map. ValueError otherwise (an empty or
  // scaler-less map says it may come from a disabled scaler). Does nothing when disabled.
  void load_state_dict(const std::map<std::string, std::string>& state);

 private:
  enum class Stage { kReady, kUnscaled, kStepped };
  struct Flag {
    Device device;
    Stream stream;  // where the flag was written: read ordered on it
    Tensor found_inf;
  };
  struct OptimizerRecord {
    Stage stage = Stage::kReady;
    std::vector<Flag> flags;  // one per device with gradients
    bool read = false;        // found_inf holds the flags' sum
    double found_inf = 0;
  };

  // The flags' sum (reads them on first use: a host synchronisation per device).
  static double found_inf(OptimizerRecord& record);
  std::vector<Flag> unscale_grads(Optimizer& optimizer) const;

  float scale_;
  double growth_factor_;
  double backoff_factor_;
  int64_t growth_interval_;
  int64_t growth_tracker_ = 0;
  bool enabled_;
  std::map<const Optimizer*, OptimizerRecord> records_;  // this iteration's
};

}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_GRAD_SCALER_H_
