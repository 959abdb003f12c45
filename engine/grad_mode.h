// Switches of the autograd engine: grad mode, anomaly mode, and the engine options of S9.
//
//   { NoGradGuard g; y = x * 2; }       // y records no graph
//   { AnomalyModeGuard a; loss.backward(); }  // NaN/Inf in a gradient names its op
//   EngineOptions o; o.legacy_seed_streams = true;   // the reproducer's switches (S9)
//   EngineOptionsGuard e(o);
//
// Grad mode is per thread (as in libtorch); anomaly mode and engine options are process-
// wide. Defaults are always safe: grad on, anomaly off, both S9 protections on.
// Thread-safety: all functions are thread-safe. Failure: none.
#ifndef STREAMGRAD_ENGINE_GRAD_MODE_H_
#define STREAMGRAD_ENGINE_GRAD_MODE_H_

namespace streamgrad {

bool grad_mode_enabled();
void set_grad_mode_enabled(bool enabled);

class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : previous_(grad_mode_enabled()) {
    set_grad_mode_enabled(enabled);
  }
  ~GradModeGuard() { set_grad_mode_enabled(previous_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

class NoGradGuard : public GradModeGuard {
 public:
  NoGradGuard() : GradModeGuard(false) {}
};

bool anomaly_mode_enabled();
void set_anomaly_mode_enabled(bool enabled);

class AnomalyModeGuard {
 public:
  AnomalyModeGuard() : previous_(anomaly_mode_enabled()) { set_anomaly_mode_enabled(true); }
  ~AnomalyModeGuard() { set_anomaly_mode_enabled(previous_); }
  AnomalyModeGuard(const AnomalyModeGuard&) = delete;
  AnomalyModeGuard& operator=(const AnomalyModeGuard&) = delete;

 private:
  bool previous_;
};

// S9: for the stream race reproducer only.
struct EngineOptions {
  // S3 off: every seed is assumed produced on its device's default stream (the
  // historical race when backward() is called with another stream current).
  bool legacy_seed_streams = false;
  // S6 off: at the end of backward only the default streams wait for the leaves' streams.
  bool legacy_leaf_sync = false;
};

EngineOptions engine_options();
void set_engine_options(const EngineOptions& options);

class EngineOptionsGuard {
 public:
  explicit EngineOptionsGuard(const EngineOptions& o) : previous_(engine_options()) {
    set_engine_options(o);
  }
  ~EngineOptionsGuard() { set_engine_options(previous_); }
  EngineOptionsGuard(const EngineOptionsGuard&) = delete;
  EngineOptionsGuard& operator=(const EngineOptionsGuard&) = delete;

 private:
  EngineOptions previous_;
};

}  // namespace streamgrad

#endif  // STREAMGRAD_ENGINE_GRAD_MODE_H_
