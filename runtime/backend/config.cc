#include "runtime/backend/config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/backend/cuda_settings.h"
#include "runtime/backend/launch.h"
#include "runtime/base/error.h"

namespace streamgrad {

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

bool env_flag(const char* name) {
  const char* v = env(name);
  if (v == nullptr) return false;
  const std::string s(v);
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s == "0" || s == "false" || s == "no" || s == "off") return false;
  throw ValueError(absl::StrCat(name, "=", s, " is not a boolean; use 1 or 0"));
}

template <typename T>
T env_number(const char* name, T fallback) {
  const char* v = env(name);
  if (v == nullptr) return fallback;
  T out{};
  if (!absl::SimpleAtoi(v, &out)) {
    throw ValueError(absl::StrCat(name, "=", v, " is not a valid whole number"));
  }
  return out;
}

CpuCapability parse_cpu_capability(const std::string& s) {
  for (CpuCapability c : {CpuCapability::kDefault, CpuCapability::kAvx2, CpuCapability::kAvx512}) {
    if (s == cpu_capability_name(c)) return c;
  }
  throw ValueError(absl::StrCat("STREAMGRAD_CPU_CAPABILITY=", s,
                                " is not a level; use default, avx2 or avx512"));
}

RuntimeConfig load() {
  RuntimeConfig c;
  c.launch_blocking = env_flag("STREAMGRAD_LAUNCH_BLOCKING");
  c.no_memory_caching = env_flag("STREAMGRAD_NO_MEMORY_CACHING");
  c.cpu_cache_bytes_set = env("STREAMGRAD_CPU_CACHE_BYTES") != nullptr;
  c.cpu_cache_bytes = env_number<uint64_t>("STREAMGRAD_CPU_CACHE_BYTES", 0);
  c.sanitize_streams = env_flag("STREAMGRAD_SANITIZE_STREAMS");
  c.allow_tf32 = env_flag("STREAMGRAD_ALLOW_TF32");
  c.onednn = env("STREAMGRAD_ONEDNN") == nullptr || env_flag("STREAMGRAD_ONEDNN");
  if (const char* t = env("STREAMGRAD_TRACE")) {
    // Checked now, before any work: finding out at exit would lose the whole run's trace.
    const std::string problem = unwritable_reason(t);
    if (problem.empty()) {
      c.trace_path = t;
    } else {
      std::fprintf(stderr,
                   "streamgrad: STREAMGRAD_TRACE=%s cannot be written (%s); tracing is off. "
                   "Point it at a file in a folder that exists and is writable.\n",
                   t, problem.c_str());
    }
  }
  c.sim_devices = env_number<int>("STREAMGRAD_SIM_DEVICES", 2);
  SG_CHECK(c.sim_devices >= 0 && c.sim_devices <= 64, ValueError,
           "STREAMGRAD_SIM_DEVICES=", c.sim_devices, " must be in [0, 64]");
  const char* visible = env("STREAMGRAD_VISIBLE_DEVICES");
  c.sim_visible = parse_visible_devices(visible ? visible : "", c.sim_devices);
  c.sim_memory_bytes = env_number<uint64_t>("STREAMGRAD_SIM_MEMORY_BYTES", 0);
  if (const char* s = env("STREAMGRAD_SIM_SCHEDULER")) c.sim_scheduler = s;
  if (const char* p = env("STREAMGRAD_SIM_POLICY")) c.sim_policy = p;
  c.sim_seed = env_number<uint64_t>("STREAMGRAD_SIM_SEED", 0);
  c.sim_jitter_us = env_number<int>("STREAMGRAD_SIM_JITTER_US", 0);
  SG_CHECK(c.sim_jitter_us >= 0, ValueError, "STREAMGRAD_SIM_JITTER_US must be >= 0");
  c.sim_pct_depth = env_number<int>("STREAMGRAD_SIM_PCT_DEPTH", kSimDefaultPctDepth);
  SG_CHECK(c.sim_pct_depth >= 1 && c.sim_pct_depth <= kSimMaxPctDepth, ValueError,
           "STREAMGRAD_SIM_PCT_DEPTH=", c.sim_pct_depth, " must be in [1, ", kSimMaxPctDepth, "]");
  c.sim_pct_steps = env_number<uint64_t>("STREAMGRAD_SIM_PCT_STEPS", kSimDefaultPctSteps);
  SG_CHECK(c.sim_pct_steps >= 1, ValueError, "STREAMGRAD_SIM_PCT_STEPS must be at least 1");
  c.sim_queue_depth = env_number<int>("STREAMGRAD_SIM_QUEUE_DEPTH", kSimDefaultQueueDepth);
  SG_CHECK(c.sim_queue_depth >= 1, ValueError, "STREAMGRAD_SIM_QUEUE_DEPTH=", c.sim_queue_depth,
           " must be at least 1");
  c.sim_workers = env_number<int>("STREAMGRAD_SIM_WORKERS", kSimDefaultWorkers);
  SG_CHECK(c.sim_workers >= 1, ValueError, "STREAMGRAD_SIM_WORKERS=", c.sim_workers,
           " must be at least 1");
  c.num_threads = env_number<int>("STREAMGRAD_NUM_THREADS", 0);
  SG_CHECK(env("STREAMGRAD_NUM_THREADS") == nullptr ||
               (c.num_threads >= 1 && c.num_threads <= kMaxThreads),
           ValueError, "STREAMGRAD_NUM_THREADS=", c.num_threads, " must be in [1, ",
           kMaxThreads, "]");
  c.thread_spin_us = env_number<int>("STREAMGRAD_THREAD_SPIN_US", -1);
  SG_CHECK(env("STREAMGRAD_THREAD_SPIN_US") == nullptr ||
               (c.thread_spin_us >= 0 && c.thread_spin_us <= kMaxSpinUs),
           ValueError, "STREAMGRAD_THREAD_SPIN_US=", c.thread_spin_us, " must be in [0, ",
           kMaxSpinUs, "] microseconds");
  if (const char* level = env("STREAMGRAD_CPU_CAPABILITY")) {
    c.cpu_capability_set = true;
    c.cpu_capability = parse_cpu_capability(level);
  }
  if (const char* drop = env("STREAMGRAD_DROP_SYNC")) {
    int64_t k = 0;
    const bool list = std::string(drop) == "list";
    SG_CHECK(list || (absl::SimpleAtoi(drop, &k) && k >= 1), ValueError,
             "STREAMGRAD_DROP_SYNC=", drop, " is neither 'list' nor a call number >= 1; run "
             "with STREAMGRAD_DROP_SYNC=list to see the calls");
    detail::install_env_sync_faults(k, list);
  }
  return c;
}

// A boolean setting that follows its environment variable until code sets it.
class Override {
 public:
  bool get(bool from_env) const {
    const int o = v_.load(std::memory_order_relaxed);
    return o < 0 ? from_env : o != 0;
  }
  void set(bool on) { v_.store(on ? 1 : 0); }

 private:
  std::atomic<int> v_{-1};  // -1: follow the environment
};

Override& blocking_override() {
  static Override o;
  return o;
}

Override& tf32_override() {
  static Override o;
  return o;
}

Override& cudnn_tf32_override() {
  static Override o;
  return o;
}

}  // namespace


const RuntimeConfig& config() {
  static const RuntimeConfig* c = new RuntimeConfig(load());
  return *c;
}

std::vector<int> parse_visible_devices(const std::string& spec, int physical) {
  std::vector<int> out;
  if (absl::StripAsciiWhitespace(spec).empty()) {
    for (int i = 0; i < physical; ++i) out.push_back(i);
    return out;
  }
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    part = absl::StripAsciiWhitespace(part);
    int index = -1;
    if (!absl::SimpleAtoi(part, &index) || index < 0 || index >= physical) {
      throw ValueError(absl::StrCat("STREAMGRAD_VISIBLE_DEVICES=\"", spec, "\": \"", part,
                                    "\" is not a device index in [0, ", physical,
                                    ") (STREAMGRAD_SIM_DEVICES=", physical, ")"));
    }
    for (int seen : out) {
      SG_CHECK(seen != index, ValueError, "STREAMGRAD_VISIBLE_DEVICES=\"", spec,
               "\" names device ", index, " twice");
    }
    out.push_back(index);
  }
  return out;
}

std::string unwritable_reason(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return "it is a folder";
    if (access(path.c_str(), W_OK) != 0) return std::strerror(errno);
    return "";
  }
  if (errno != ENOENT) return std::strerror(errno);
  const size_t slash = path.find_last_of('/');
  const std::string folder =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  if (stat(folder.c_str(), &st) != 0) {
    return absl::StrCat("folder '", folder, "': ", std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) return absl::StrCat("'", folder, "' is not a folder");
  if (access(folder.c_str(), W_OK | X_OK) != 0) {
    return absl::StrCat("folder '", folder, "': ", std::strerror(errno));
  }
  return "";
}

bool launch_blocking() { return blocking_override().get(config().launch_blocking); }

void set_launch_blocking(bool on) { blocking_override().set(on); }

bool matmul_allow_tf32() { return tf32_override().get(config().allow_tf32); }

void set_matmul_allow_tf32(bool allow) { tf32_override().set(allow); }

bool cudnn_allow_tf32() { return cudnn_tf32_override().get(config().allow_tf32); }

void set_cudnn_allow_tf32(bool allow) { cudnn_tf32_override().set(allow); }

}  // namespace streamgrad
