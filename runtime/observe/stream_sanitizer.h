// The stream sanitizer: finds accesses to device memory that no event, wait or host
// synchronisation orders (ARCHITECTURE.md §7).
//
//   StreamSanitizer san(StreamSanitizer::Mode::kCollect);   // or kThrow
//   ... run work ...
//   for (const SanitizerFinding& f : san.findings()) std::cerr << f.message << "\n";
//
// or STREAMGRAD_SANITIZE_STREAMS=1, which installs a process-wide sanitizer in throw mode
// at the first launch.
//
// Model: a vector clock per stream, per recorded event and for the host. A launch on
// stream s first takes the host's clock (work enqueued after the host saw X complete is
// ordered after X), then ticks s. Event::record copies s's clock into the event,
// Event::block merges it into the waiting stream, and host synchronisations (stream,
// event, device; an allocator event found complete) merge into the host's clock. Every
// launch declares the byte ranges it reads and writes: a read not ordered after the last
// overlapping write, or a write not ordered after the earlier overlapping reads and writes,
// is a finding naming both accesses: op, the LaunchScope it ran in (the engine's backward
// node), stream, byte range and buffer (allocations are numbered #1, #2, ... in the order
// this sanitizer saw them, so a reuse finding names the freed buffer and its successor).
// Memory freed to the allocator's cache keeps its access history, so reusing a block on a
// stream that is not ordered after its previous users is a finding too; memory returned to
// the device drops it (raw free waits for every use). Overlapping views are compared byte
// range by byte range.
//
// Thread-safety: all methods are thread-safe (one std::mutex).
// Failure: in kThrow mode the launch that races throws SanitizerError before its work is
// enqueued; in kCollect mode findings accumulate.
#ifndef STREAMGRAD_RUNTIME_OBSERVE_STREAM_SANITIZER_H_
#define STREAMGRAD_RUNTIME_OBSERVE_STREAM_SANITIZER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "runtime/backend/launch.h"
#include "runtime/base/error.h"

namespace streamgrad {

struct SanitizerAccess {
  std::string op;
  std::string node;  // the LaunchScope (e.g. the backward node), or empty
  Stream stream;
  uint64_t buffer = 0;  // the allocator's buffer it touched, numbered by this sanitizer; 0: unknown
  uintptr_t begin = 0;
  uintptr_t end = 0;
  bool write = false;
};

struct SanitizerFinding {
  SanitizerAccess current;
  SanitizerAccess previous;
  std::string message;
};

class SanitizerError : public Error {
 public:
  explicit SanitizerError(SanitizerFinding f) : Error(f.message), finding_(std::move(f)) {}
  SanitizerError(const std::string& message, SanitizerFinding f)
      : Error(message), finding_(std::move(f)) {}
  const SanitizerFinding& finding() const { return finding_; }
  Rethrower rethrower() const override {
    SanitizerFinding f = finding_;
    return [f](const std::string& m) { throw SanitizerError(m, f); };
  }

 private:
  SanitizerFinding finding_;
};

class StreamSanitizer final : public LaunchObserver {
 public:
  enum class Mode { kThrow, kCollect };
  // Registers itself as a launch observer for its lifetime.
  explicit StreamSanitizer(Mode mode);
  ~StreamSanitizer() override;
  StreamSanitizer(const StreamSanitizer&) = delete;
  StreamSanitizer& operator=(const StreamSanitizer&) = delete;

  std::vector<SanitizerFinding> findings() const;
  void clear_findings();
  // Byte ranges and buffers with a history: memory returned to the device drops its own,
  // so this stays bounded by the memory in use and in the allocators' caches.
  size_t history_size() const;

  void on_launch(const Stream& stream, const LaunchDesc& desc) override;
  void on_event_record(const void* event, const Stream& stream) override;
  void on_event_block(const void* event, const Stream& stream) override;
  void on_event_complete(const void* event) override;
  void on_stream_synchronize(const Stream& stream) override;
  void on_stream_done_with(const Stream& stream, const void* ptr, size_t bytes) override;
  void on_event_done_with(const void* event, const void* ptr, size_t bytes) override;
  void on_device_synchronize(Device device) override;
  void on_memory_reset(const void* ptr, size_t bytes) override;
  void on_buffer_allocated(const void* ptr, size_t bytes, const Stream& stream) override;

  // While positive, findings are collected but never thrown (see SanitizerSuppression).
  void suppress(int delta);

 private:
  using Clock = std::vector<uint64_t>;
  // Names are interned (names_): the access history copies epochs on every launch, and
  // node names are too long for the small-string buffer.
  struct Epoch {
    int stream = -1;  // index into streams_
    uint64_t tick = 0;
    const std::string* op = nullptr;
    uintptr_t begin = 0, end = 0;
    const std::string* node = nullptr;
    uint64_t buffer = 0;
  };
  struct Buffer {
    uintptr_t end;
    uint64_t id;
  };
  struct Segment {
    uintptr_t end;
    Epoch last_write;                  // stream -1: never written
    std::map<int, Epoch> reads;        // latest read per stream since that write
  };

  int index_of(const Stream& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void merge(Clock& into, const Clock& from);
  bool ordered(const Clock& c, const Epoch& e) const;
  void split_at(uintptr_t at) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t buffer_at(uintptr_t p) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void erase_buffers(uintptr_t begin, uintptr_t end) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the accesses to [ptr, ptr + bytes) that `done` orders: the host learnt they
  // are over (a caching allocator is about to reuse the bytes).
  void forget_done(const Clock& done, const void* ptr, size_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const std::string* intern(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string describe_access(const Epoch& e, bool write, bool past) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void access(int s, const Clock& c, const Epoch& now, bool write,
              std::vector<SanitizerFinding>& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  SanitizerFinding describe(const Epoch& now, bool now_write, const Epoch& before,
                            bool before_write) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Mode mode_;
  std::atomic<int> suppressed_{0};
  mutable std::mutex mu_;
  std::vector<Stream> streams_ ABSL_GUARDED_BY(mu_);
  std::map<Stream, int> stream_index_ ABSL_GUARDED_BY(mu_);
  std::vector<Clock> clocks_ ABSL_GUARDED_BY(mu_);
  Clock host_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<const void*, Clock> events_ ABSL_GUARDED_BY(mu_);
  std::map<uintptr_t, Segment> memory_ ABSL_GUARDED_BY(mu_);  // begin -> segment
  std::vector<SanitizerFinding> findings_ ABSL_GUARDED_BY(mu_);
  std::map<uintptr_t, Buffer> buffers_ ABSL_GUARDED_BY(mu_);  // live allocations by begin
  uint64_t next_buffer_ ABSL_GUARDED_BY(mu_) = 1;
  std::unordered_set<std::string> names_ ABSL_GUARDED_BY(mu_);  // stable addresses
};

// The process-wide sanitizer of STREAMGRAD_SANITIZE_STREAMS=1 (null when off). Installed
// by the first launch (this library registers it as an observer plug-in,
// runtime/backend/observer.h).
StreamSanitizer* global_stream_sanitizer();

// For code that races on purpose (race reproducers, tests of the rules themselves): the
// process-wide sanitizer collects instead of throwing for the scope, and the findings made
// in the scope are dropped at its end.
class SanitizerSuppression {
 public:
  SanitizerSuppression();
  ~SanitizerSuppression();
  SanitizerSuppression(const SanitizerSuppression&) = delete;
  SanitizerSuppression& operator=(const SanitizerSuppression&) = delete;
};

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_OBSERVE_STREAM_SANITIZER_H_
