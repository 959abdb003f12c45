// Environment configuration of the runtime, read once at first use.
//
//   STREAMGRAD_LAUNCH_BLOCKING=1      every launch waits for its work (errors surface at
//                                     the call site); launch_blocking() can override it.
//   STREAMGRAD_NO_MEMORY_CACHING=1    the caching allocator frees memory at once.
//   STREAMGRAD_CPU_CACHE_BYTES=B      most bytes of freed blocks the cpu allocator keeps
//                                     for reuse (default: caching_allocator.h;
//                                     set_cpu_cache_limit() overrides it).
//   STREAMGRAD_SIM_DEVICES=N          number of simulated accelerators (default 2).
//   STREAMGRAD_VISIBLE_DEVICES=2,0    which sim devices are visible, and in what order.
//   STREAMGRAD_SIM_MEMORY_BYTES=B     memory of each sim device (default 0: unlimited).
//   STREAMGRAD_SIM_SCHEDULER=threaded|deterministic   (default threaded)
//   STREAMGRAD_SIM_POLICY=round-robin|random|adversarial|pct  (deterministic; default
//                                     round-robin; runtime/sim/sim.h says what each finds)
//   STREAMGRAD_SIM_SEED=S             seed of the deterministic policy and of the jitter.
//   STREAMGRAD_SIM_PCT_DEPTH=D        pct: the bug depth d, 1..kSimMaxPctDepth (default
//                                     kSimDefaultPctDepth): d - 1 priority change points.
//   STREAMGRAD_SIM_PCT_STEPS=K        pct: the change points fall among steps 1..K
//                                     (default kSimDefaultPctSteps, K >= 1).
//   STREAMGRAD_SIM_JITTER_US=U        threaded: random delay in [0, U] µs before each launch.
//   STREAMGRAD_SIM_QUEUE_DEPTH=N      tasks a sim stream holds before a launch blocks the
//                                     host (default kSimDefaultQueueDepth, N >= 1).
//   STREAMGRAD_SIM_WORKERS=N          threaded: most worker threads shared by all sim
//                                     streams (default kSimDefaultWorkers, N >= 1).
//   STREAMGRAD_SANITIZE_STREAMS=1     turns the stream sanitizer on.
//   (STREAMGRAD_ALLOC_CONF is the allocator's own: runtime/memory/alloc_conf.h.)
//   STREAMGRAD_TRACE=path.json        records a Chrome trace, written at exit (trace.h).
//                                     A path that cannot be written is reported on stderr
//                                     when the variable is read, and nothing is traced.
//   STREAMGRAD_NUM_THREADS=N          threads a large cpu kernel may use, 1..kMaxThreads
//                                     (cpu_settings.h; set_num_threads() overrides it).
//   STREAMGRAD_CPU_CAPABILITY=default|avx2|avx512   the code level of the cpu kernels'
//                                     loops, at most the machine's (cpu_settings.h).
//   STREAMGRAD_THREAD_SPIN_US=U       how long an idle kernel thread spins before it
//                                     sleeps, 0..kMaxSpinUs (cpu_settings.h;
//                                     set_thread_spin_us() overrides it).
//   STREAMGRAD_ONEDNN=0               float32 conv2d on cpu and sim uses unfold and matmul
//                                     instead of oneDNN (cpu_settings.h;
//                                     set_onednn_enabled() overrides it).
//   STREAMGRAD_ALLOW_TF32=1           float32 cuda matmuls and cuDNN convolutions may use
//                                     TF32 tensor cores (cuda_settings.h;
//                                     set_matmul_allow_tf32() and set_cudnn_allow_tf32()
//                                     override it).
//   STREAMGRAD_DROP_SYNC=K|list       fault injection (below): skip the K-th cross-stream
//                                     synchronisation call of the process, or print each.
//
// Synchronisation fault injection (SyncFaultScope, STREAMGRAD_DROP_SYNC) is in
// runtime/backend/sync_faults.h, which this header includes.
//
// Thread-safety: config() is immutable after first use; the launch-blocking override is
// an atomic. Failure: a malformed value throws ValueError naming the variable.
#ifndef STREAMGRAD_RUNTIME_BACKEND_CONFIG_H_
#define STREAMGRAD_RUNTIME_BACKEND_CONFIG_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend/cpu_settings.h"
#include "runtime/backend/stream.h"
#include "runtime/backend/sync_faults.h"  // what config() turns on for STREAMGRAD_DROP_SYNC

namespace streamgrad {

// As a GPU's launch queue, a sim stream's queue is finite so that a host loop that
// launches faster than the stream runs is held back instead of queueing without bound.
constexpr int kSimDefaultQueueDepth = 1024;
// Threads are per process, streams are not: 10,000 streams must not mean 10,000 threads.
constexpr int kSimDefaultWorkers = 16;
// PCT (runtime/sim/sim.h): one change point by default, so that orderings that need the
// consumer to run between two tasks of the producer are reached too (bound 1 / (n * k));
// depth 1 gives the 1 / n bound on plain missing waits. k should be about the steps a
// run takes (sim_steps_run() counts them).
constexpr int kSimDefaultPctDepth = 2;
constexpr uint64_t kSimDefaultPctSteps = 1000;
constexpr int kSimMaxPctDepth = 64;

struct RuntimeConfig {
  bool launch_blocking = false;
  bool no_memory_caching = false;
  bool cpu_cache_bytes_set = false;
  uint64_t cpu_cache_bytes = 0;
  bool sanitize_streams = false;
  std::string trace_path;  // empty: no process-wide trace
  int sim_devices = 2;
  // Physical sim device of each visible index; empty until masking is applied.
  std::vector<int> sim_visible;
  uint64_t sim_memory_bytes = 0;
  std::string sim_scheduler = "threaded";
  std::string sim_policy = "round-robin";
  uint64_t sim_seed = 0;
  double sim_jitter_us = 0;
  int sim_pct_depth = kSimDefaultPctDepth;
  uint64_t sim_pct_steps = kSimDefaultPctSteps;
  int sim_queue_depth = kSimDefaultQueueDepth;
  int sim_workers = kSimDefaultWorkers;
  int num_threads = 0;  // 0: not set (the hardware's count)
  int thread_spin_us = -1;  // -1: not set (kDefaultSpinUs)
  bool cpu_capability_set = false;
  CpuCapability cpu_capability = CpuCapability::kDefault;
  bool allow_tf32 = false;
  bool onednn = true;
};

const RuntimeConfig& config();

// Parses a STREAMGRAD_VISIBLE_DEVICES value against `physical` devices: a comma-separated
// list of distinct indices ("" or unset: all). Throws ValueError on a malformed list, a
// repeated index or one out of range.
std::vector<int> parse_visible_devices(const std::string& spec, int physical);

// Why a file cannot be created or overwritten at `path` ("" when it can). Checks the
// folder and the file without creating anything.
std::string unwritable_reason(const std::string& path);

bool launch_blocking();
void set_launch_blocking(bool on);

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_BACKEND_CONFIG_H_
