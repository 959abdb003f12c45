#include "runtime/backend/cpu_settings.h"

#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <thread>

#include "absl/strings/numbers.h"

#include "runtime/backend/config.h"
#include "runtime/base/error.h"
#include "runtime/base/warning.h"

namespace streamgrad {
namespace {

CpuCapability detect() {
#if defined(__x86_64__) && defined(__GNUC__)
  // __builtin_cpu_supports also checks that the OS saves the ymm/zmm state (XCR0), so a
  // level reported here is one whose registers survive a context switch.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    return CpuCapability::kAvx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return CpuCapability::kAvx2;
  }
#endif
  return CpuCapability::kDefault;
}

// The level from the environment, clamped to the machine's, resolved once.
CpuCapability configured_capability() {
  static const CpuCapability c = [] {
    const RuntimeConfig& cfg = config();
    const CpuCapability machine = machine_cpu_capability();
    if (!cfg.cpu_capability_set) return machine;
    if (static_cast<int>(cfg.cpu_capability) > static_cast<int>(machine)) {
      // A setting copied to an older machine should slow it down, not stop it.
      SG_WARN("STREAMGRAD_CPU_CAPABILITY=", cpu_capability_name(cfg.cpu_capability),
              " is above what this CPU supports; using ", cpu_capability_name(machine));
      return machine;
    }
    return cfg.cpu_capability;
  }();
  return c;
}

std::atomic<int>& capability_override() {
  static std::atomic<int> v{-1};  // -1: follow the environment
  return v;
}

std::atomic<int>& threads_override() {
  static std::atomic<int> v{0};  // 0: follow the environment
  return v;
}

// OPENBLAS_NUM_THREADS / OMP_NUM_THREADS: another library's variable, so a value it
// would not take is skipped rather than refused.
int blas_env_threads() {
  for (const char* name : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"}) {
    const char* v = std::getenv(name);
    int n = 0;
    if (v != nullptr && absl::SimpleAtoi(v, &n) && n >= 1 && n <= kMaxThreads) return n;
  }
  return 0;
}

int default_threads() {
  if (const int n = blas_env_threads(); n > 0) return n;
  int n = 0;
  cpu_set_t set;
  // The CPUs this process may run on (taskset, cgroup cpusets), not every CPU installed.
  if (sched_getaffinity(0, sizeof(set), &set) == 0) n = CPU_COUNT(&set);
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  if (n <= 0) n = 1;
  return n < kDefaultMaxThreads ? n : kDefaultMaxThreads;
}

}  // namespace

const char* cpu_capability_name(CpuCapability c) {
  switch (c) {
    case CpuCapability::kDefault: return "default";
    case CpuCapability::kAvx2: return "avx2";
    case CpuCapability::kAvx512: return "avx512";
  }
  return "unknown";
}

CpuCapability machine_cpu_capability() {
  static const CpuCapability c = detect();
  return c;
}

CpuCapability cpu_capability() {
  const int o = capability_override().load(std::memory_order_relaxed);
  return o < 0 ? configured_capability() : static_cast<CpuCapability>(o);
}

void set_cpu_capability(CpuCapability c) {
  const CpuCapability machine = machine_cpu_capability();
  SG_CHECK(static_cast<int>(c) >= 0 && static_cast<int>(c) <= static_cast<int>(machine),
           ValueError, "set_cpu_capability: ", cpu_capability_name(c),
           " is above what this CPU supports (", cpu_capability_name(machine),
           "); pick a level at most machine_cpu_capability()");
  capability_override().store(static_cast<int>(c), std::memory_order_relaxed);
}

int get_num_threads() {
  const int o = threads_override().load(std::memory_order_relaxed);
  if (o > 0) return o;
  static const int from_env = [] {
    const int n = config().num_threads;
    return n > 0 ? n : default_threads();
  }();
  return from_env;
}

void set_num_threads(int n) {
  SG_CHECK(n >= 1 && n <= kMaxThreads, ValueError, "set_num_threads: ", n,
           " threads; pass a count in [1, ", kMaxThreads, "]");
  threads_override().store(n, std::memory_order_relaxed);
}

namespace {
std::atomic<int>& spin_override() {
  static std::atomic<int> v{-1};  // -1: follow the environment
  return v;
}
}  // namespace

int get_thread_spin_us() {
  const int o = spin_override().load(std::memory_order_relaxed);
  if (o >= 0) return o;
  static const int from_env = [] {
    const int us = config().thread_spin_us;
    return us >= 0 ? us : kDefaultSpinUs;
  }();
  return from_env;
}

void set_thread_spin_us(int us) {
  SG_CHECK(us >= 0 && us <= kMaxSpinUs, ValueError, "set_thread_spin_us: ", us,
           " us; pass a time in [0, ", kMaxSpinUs, "] microseconds (0: sleep at once)");
  spin_override().store(us, std::memory_order_relaxed);
}

namespace {
std::atomic<bool>& onednn_flag() {
  static std::atomic<bool> on{config().onednn};
  return on;
}
}  // namespace

bool onednn_enabled() { return onednn_flag().load(std::memory_order_relaxed); }
void set_onednn_enabled(bool on) { onednn_flag().store(on, std::memory_order_relaxed); }

}  // namespace streamgrad
