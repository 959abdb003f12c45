#include "runtime/observe/trace.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/backend/backend.h"
#include "runtime/backend/config.h"
#include "runtime/backend/devices.h"
#include "runtime/base/error.h"
#include "runtime/observe/trace_state.h"

namespace streamgrad {
namespace trace_internal {
namespace {
// The launch this thread is making, per recorder observing it (several may record).
thread_local std::vector<std::pair<std::shared_ptr<TraceState>, int64_t>> t_pending;
}  // namespace
}  // namespace trace_internal

using trace_internal::TraceState;

TraceRecorder::TraceRecorder() : state_(std::make_shared<TraceState>()) {
  add_launch_observer(this);
}

TraceRecorder::~TraceRecorder() { stop(); }

void TraceRecorder::stop() {
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    if (state_->stopped) return;
    state_->stopped = true;
  }
  remove_launch_observer(this);
}

size_t TraceRecorder::span_count() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->spans.size();
}

void TraceRecorder::on_launch(const Stream& stream, const LaunchDesc& desc) {
  TraceState& st = *state_;
  std::lock_guard<std::mutex> lk(st.mu);
  if (st.stopped) return;
  trace_internal::Span sp{st.lane(stream), desc.name, desc.kind, st.host_thread(), st.now_us()};
  if (const std::string* scope = current_launch_scope()) sp.node = *scope;
  if (stream.device().type() == DeviceType::kCuda) {
    Backend& b = backend(DeviceType::kCuda);
    sp.cuda_start = b.create_event(stream.device().index(), true);
    sp.cuda_end = b.create_event(stream.device().index(), true);
    b.record_event(*sp.cuda_start, stream);
  }
  const int64_t id = static_cast<int64_t>(st.spans.size());
  st.spans.push_back(std::move(sp));
  trace_internal::t_pending.emplace_back(state_, id);
}

void TraceRecorder::on_launch_submitted(const Stream& stream) {
  TraceState& st = *state_;
  auto& pending = trace_internal::t_pending;
  for (auto it = pending.begin(); it != pending.end(); ++it) {
    if (it->first != state_) continue;
    std::lock_guard<std::mutex> lk(st.mu);
    trace_internal::Span& sp = st.spans[it->second];
    st.lanes[sp.lane].last_span = it->second;
    if (sp.cuda_end) {
      backend(DeviceType::kCuda).record_event(*sp.cuda_end, stream);
    } else if (sp.end_us < 0 && stream.device().is_cpu()) {
      // cpu work ran inside the submit call.
      sp.start_us = sp.enqueued_us;
      sp.end_us = st.now_us();
    }
    pending.erase(it);
    return;
  }
}

void TraceRecorder::on_event_record(const void* event, const Stream& stream) {
  TraceState& st = *state_;
  std::lock_guard<std::mutex> lk(st.mu);
  if (st.stopped) return;
  const int lane = st.lane(stream);
  st.latest_record[event] = static_cast<int64_t>(st.marks.size());
  st.marks.push_back({false, lane, st.now_us(), st.lanes[lane].last_span, -1});
}

void TraceRecorder::on_event_block(const void* event, const Stream& stream) {
  TraceState& st = *state_;
  std::lock_guard<std::mutex> lk(st.mu);
  auto it = st.latest_record.find(event);
  if (st.stopped || it == st.latest_record.end()) return;  // recorded before the trace began
  const int lane = st.lane(stream);
  st.marks.push_back({true, lane, st.now_us(), st.lanes[lane].last_span, it->second});
}

void TraceRecorder::on_event_complete(const void* event) {
  TraceState& st = *state_;
  std::lock_guard<std::mutex> lk(st.mu);
  auto it = st.latest_record.find(event);
  if (st.stopped || it == st.latest_record.end()) return;
  // The allocator polls its events on every allocation: only the first time the host
  // learns of a record is a synchronisation worth showing.
  if (!st.completion_seen.insert(it->second).second) return;
  trace_internal::HostMark h{"event complete", st.host_thread(), st.now_us()};
  h.from_mark = it->second;
  st.host_marks.push_back(std::move(h));
}

void TraceRecorder::on_stream_synchronize(const Stream& stream) {
  TraceState& st = *state_;
  std::lock_guard<std::mutex> lk(st.mu);
  if (st.stopped) return;
  trace_internal::HostMark h{absl::StrCat("synchronize ", stream.str()), st.host_thread(),
                             st.now_us()};
  h.lane = st.lane(stream);
  h.from_span = st.lanes[h.lane].last_span;
  st.host_marks.push_back(std::move(h));
}

void TraceRecorder::on_device_synchronize(Device device) {
  TraceState& st = *state_;
  std::lock_guard<std::mutex> lk(st.mu);
  if (st.stopped) return;
  st.host_marks.push_back({absl::StrCat("synchronize ", device.str()), st.host_thread(),
                           st.now_us()});
}

std::string TraceRecorder::chrome_json() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  trace_internal::resolve_cuda_spans(*state_);
  return trace_internal::render(*state_);
}

void TraceRecorder::save(const std::string& path) const {
  const std::string json = chrome_json();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << json;
  out.close();
  SG_CHECK(out.good(), Error, "TraceRecorder::save: cannot write ", json.size(),
           " bytes to '", path, "'; check that the folder exists and is writable");
}

HostFn TraceRecorder::wrap_host_work(const Stream& stream, HostFn fn) {
  for (auto& [state, id] : trace_internal::t_pending) {
    if (state != state_) continue;
    return [state = state, id = id, inner = std::move(fn)] {
      const double start = state->now_us();
      auto stamp = [&] {
        std::lock_guard<std::mutex> lk(state->mu);
        state->spans[id].start_us = start;
        state->spans[id].end_us = state->now_us();
      };
      try {
        inner();
      } catch (...) {
        stamp();
        throw;
      }
      stamp();
    };
  }
  return fn;
}

void TraceRecorder::on_launch_end(const Stream& stream) {
  auto& pending = trace_internal::t_pending;
  for (auto it = pending.begin(); it != pending.end(); ++it) {
    if (it->first != state_) continue;
    // Still pending: the launch threw before the backend accepted it.
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->spans[it->second].abandoned = true;
    pending.erase(it);
    return;
  }
}


TraceRecorder* global_trace() {
  static TraceRecorder* global = [] () -> TraceRecorder* {
    if (config().trace_path.empty()) return nullptr;
    auto* t = new TraceRecorder();  // leaked: still needed by the exit handler
    std::atexit(write_global_trace);
    return t;
  }();
  return global;
}

// STREAMGRAD_TRACE takes effect wherever this library is linked.
static const ObserverPlugin kPlugin([] { global_trace(); });

void write_global_trace() {
  TraceRecorder* t = global_trace();
  if (t == nullptr) return;
  try {
    t->save(config().trace_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "streamgrad: STREAMGRAD_TRACE: %s\n", e.what());
  }
}

}  // namespace streamgrad
