#include "engine/grad_mode.h"

#include <atomic>

namespace streamgrad {
namespace {
thread_local bool t_grad_enabled = true;
std::atomic<bool> g_anomaly{false};
std::atomic<bool> g_legacy_seed{false};
std::atomic<bool> g_legacy_leaf{false};
}  // namespace

bool grad_mode_enabled() { return t_grad_enabled; }
void set_grad_mode_enabled(bool enabled) { t_grad_enabled = enabled; }
bool anomaly_mode_enabled() { return g_anomaly.load(std::memory_order_relaxed); }
void set_anomaly_mode_enabled(bool enabled) { g_anomaly.store(enabled); }

EngineOptions engine_options() {
  EngineOptions o;
  o.legacy_seed_streams = g_legacy_seed.load();
  o.legacy_leaf_sync = g_legacy_leaf.load();
  return o;
}

void set_engine_options(const EngineOptions& options) {
  g_legacy_seed.store(options.legacy_seed_streams);
  g_legacy_leaf.store(options.legacy_leaf_sync);
}

}  // namespace streamgrad
