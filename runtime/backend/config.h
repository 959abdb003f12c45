// Environment configuration of the runtime, read once at first use.
//
//   STREAMGRAD_LAUNCH_BLOCKING=1      every launch waits for its work (errors surface at
//                                     the call site); launch_blocking() can override it.
//   STREAMGRAD_NO_MEMORY_CACHING=1    the caching allocator frees memory at once.
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
//   STREAMGRAD_TRACE=path.json        records a Chrome trace, written at exit (trace.h).
//                                     A path that cannot be written is reported on stderr
//                                     when the variable is read, and nothing is traced.
//   STREAMGRAD_NUM_THREADS=N          threads a large cpu kernel may use, 1..kMaxThreads
//                                     (cpu_settings.h; set_num_threads() overrides it).
//   STREAMGRAD_CPU_CAPABILITY=default|avx2|avx512   the code level of the cpu kernels'
//                                     loops, at most the machine's (cpu_settings.h).
//   STREAMGRAD_ALLOW_TF32=1           float32 cuda matmuls and cuDNN convolutions may use
//                                     TF32 tensor cores (cuda_settings.h;
//                                     set_matmul_allow_tf32() and set_cudnn_allow_tf32()
//                                     override it).
//   STREAMGRAD_DROP_SYNC=K|list       fault injection (below): skip the K-th cross-stream
//                                     synchronisation call of the process, or print each.
//
// Synchronisation fault injection, for tests and tools/missing_waits (off by default):
// shows what a correct multi-stream program does with one wait or record_stream left out.
// It sees the cross-stream synchronisation calls: Event::block calls that issue a
// device-side wait (so Stream::wait_stream's, the engine's and the libraries'), and
// Storage::record_stream calls on a stream other than the memory's own.
//   SyncFaultScope count;                     // while alive: every call is noted
//   run();                                    // count.calls(): kind, streams, site, id
//   SyncFaultScope drop(count.calls()[i].id());  // the next run skips that one call
// A call's id names its kind, streams, the two innermost calling functions (the first
// with the call's offset in it) and its occurrence among calls alike: "wait sim:0/s0 <-
// sim:0/s2 at TwoBranch::forward+0x1c4 < amp_loss #1". It names the same call in every
// run of a program as long as calls alike come from one thread in a fixed order, whatever
// other threads do; where threads share such calls, or their number depends on the
// interleaving, "#2" may be another call in another run (tools/missing_waits reports it).
// The functions are found by unwinding the stack and need the binary's symbols to be
// dynamic (cc_test, or linkopts -rdynamic); where none can be named the site is "?".
// STREAMGRAD_DROP_SYNC=list prints each call as "streamgrad: sync K: <id>" on stderr; =K
// skips the K-th (1-based, in call order: the program's order with one host thread).
// Cost when off: one relaxed atomic load per synchronisation call.
//
// Thread-safety: config() is immutable after first use; the launch-blocking override is
// an atomic; fault injection takes a mutex, only while on. Failure: a malformed value
// throws ValueError naming the variable; a second SyncFaultScope while one is alive
// throws Error.
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
  bool cpu_capability_set = false;
  CpuCapability cpu_capability = CpuCapability::kDefault;
  bool allow_tf32 = false;
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

enum class SyncKind { kWait, kRecordStream };

// One cross-stream synchronisation call seen by fault injection.
struct SyncCall {
  int64_t index = 0;  // 1-based, in the order the calls were made
  SyncKind kind = SyncKind::kWait;
  std::string stream;  // wait: the stream that waits; record_stream: the stream recorded
  std::string other;   // wait: where the event was recorded; record_stream: the memory's
                       // allocation stream
  std::string site;    // the calling functions, innermost first ("f < g"), or "?"
  std::string scope;   // the LaunchScope label then current (a backward node), or "";
                       // not part of id(): the engine sets one only while observers exist
  int occurrence = 0;  // 1-based among the calls of the same kind, streams and site
  bool dropped = false;
  std::string id() const;
};

// Notes every synchronisation call while alive and skips the one whose id() is `drop`
// (none when empty). `on_call` sees each call (the skipped one too, with `dropped` set) on
// the calling thread, before the call takes effect. While a scope is alive it replaces
// STREAMGRAD_DROP_SYNC's setting.
class SyncFaultScope {
 public:
  explicit SyncFaultScope(std::string drop = "",
                          std::function<void(const SyncCall&)> on_call = nullptr);
  ~SyncFaultScope();
  SyncFaultScope(const SyncFaultScope&) = delete;
  SyncFaultScope& operator=(const SyncFaultScope&) = delete;

  std::vector<SyncCall> calls() const;
  // Whether the call to drop was made (and skipped).
  bool dropped() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

namespace detail {
extern std::atomic<bool> g_sync_faults_on;
inline bool sync_faults_on() { return g_sync_faults_on.load(std::memory_order_relaxed); }
// Hooks of Event::record / Event::block / Storage::record_stream, called only while on.
void sync_fault_note_record(const void* event, const Stream& stream);
// True when this call must be skipped. `event` for waits, `memory_stream` for records.
bool sync_fault_skip(SyncKind kind, const Stream& stream, const void* event,
                     const Stream* memory_stream);
}  // namespace detail

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_BACKEND_CONFIG_H_
