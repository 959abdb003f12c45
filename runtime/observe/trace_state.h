// Internal to runtime/observe: what a TraceRecorder (trace.h) collects, shared by the
// recorder (trace.cc), which fills it from the observer hooks, and the renderer
// (trace_render.cc), which turns it into Chrome's trace-event JSON.
//
// Thread-safety: TraceState is guarded by its own mutex, as trace.cc documents; render
// and resolve_cuda_spans take it locked by their caller. Failure: none.
#ifndef STREAMGRAD_RUNTIME_OBSERVE_TRACE_STATE_H_
#define STREAMGRAD_RUNTIME_OBSERVE_TRACE_STATE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/backend/devices.h"
#include "runtime/backend/launch.h"

namespace streamgrad {
namespace trace_internal {

using Clock = std::chrono::steady_clock;

struct Span {
  int lane;
  std::string name;
  LaunchKind kind;
  int host_thread;
  double enqueued_us;
  std::string node;  // LaunchScope at launch time
  double start_us = -1, end_us = -1;  // -1 until the work ran
  bool abandoned = false;             // an observer or the backend threw: never enqueued
  // cuda: timing events around the launch, resolved by save().
  std::shared_ptr<BackendEvent> cuda_start, cuda_end;
};

// Record and wait marks, kept in the order the host made them: that order is enough to
// place them (a record is always made before a wait on it).
struct Mark {
  bool wait;
  int lane;
  double enqueued_us;
  int64_t prev_span;  // the last span enqueued on the lane before the mark, or -1
  int64_t record;     // waits: the record mark they wait for
};

struct HostMark {
  std::string name;
  int host_thread;
  double us;
  int64_t from_mark = -1;  // the record whose completion the host learnt
  int lane = -1;           // stream synchronize: the lane it waited for
  int64_t from_span = -1;  // ... and the last span enqueued there
};

struct Lane {
  Stream stream;
  int64_t last_span = -1;
};

struct TraceState {
  const Clock::time_point t0 = Clock::now();
  std::mutex mu;
  bool stopped = false;
  std::vector<Lane> lanes;
  std::map<Stream, int> lane_of;
  std::vector<Span> spans;
  std::vector<Mark> marks;
  std::vector<HostMark> host_marks;
  std::unordered_map<const void*, int64_t> latest_record;  // event key -> record mark
  std::unordered_set<int64_t> completion_seen;  // record marks the host learnt of
  std::map<std::thread::id, int> host_threads;

  double now_us() const {
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  }
  int lane(const Stream& s) {
    auto it = lane_of.find(s);
    if (it != lane_of.end()) return it->second;
    lanes.push_back({s});
    return lane_of[s] = static_cast<int>(lanes.size()) - 1;
  }
  int host_thread() {
    auto it = host_threads.find(std::this_thread::get_id());
    if (it != host_threads.end()) return it->second;
    const int n = static_cast<int>(host_threads.size());
    host_threads[std::this_thread::get_id()] = n;
    return n;
  }
};

// cuda spans' host times from their timing events (trace_render.cc).
void resolve_cuda_spans(TraceState& st);
// The trace-event JSON of everything recorded.
std::string render(TraceState& st);

}  // namespace trace_internal
}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_OBSERVE_TRACE_STATE_H_
