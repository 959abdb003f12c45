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
// Thread-safety: fault injection takes a mutex, only while on. Failure: a second
// SyncFaultScope while one is alive throws Error.
#ifndef STREAMGRAD_RUNTIME_BACKEND_SYNC_FAULTS_H_
#define STREAMGRAD_RUNTIME_BACKEND_SYNC_FAULTS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backend/stream.h"

namespace streamgrad {

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
// Turns injection on for STREAMGRAD_DROP_SYNC (config() calls it when it reads the
// variable): skip call number `drop_index` (1-based; 0: none), print every call if `print`.
void install_env_sync_faults(int64_t drop_index, bool print);
}  // namespace detail

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_BACKEND_SYNC_FAULTS_H_
