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

namespace {
// The launch this thread is making, per recorder observing it (several may record).
thread_local std::vector<std::pair<std::shared_ptr<TraceState>, int64_t>> t_pending;

// cuda spans are bracketed by timing events; converted to host time against one event per
// device recorded after the device went idle.
void resolve_cuda_spans(TraceState& st) {
  std::map<Device, std::pair<std::shared_ptr<BackendEvent>, double>> refs;
  for (Span& sp : st.spans) {
    if (!sp.cuda_start || sp.end_us >= 0) continue;
    const Device d = st.lanes[sp.lane].stream.device();
    Backend& b = backend(d.type());
    auto it = refs.find(d);
    if (it == refs.end()) {
      b.synchronize_device(d.index());
      std::shared_ptr<BackendEvent> ref = b.create_event(d.index(), true);
      b.record_event(*ref, Stream::default_for(d));
      b.synchronize_event(*ref);
      it = refs.emplace(d, std::make_pair(ref, st.now_us())).first;
    }
    BackendEvent& ref = *it->second.first;
    sp.start_us = it->second.second - 1000.0 * b.elapsed_ms(*sp.cuda_start, ref);
    sp.end_us = it->second.second - 1000.0 * b.elapsed_ms(*sp.cuda_end, ref);
  }
}

const char* kind_name(LaunchKind k) {
  switch (k) {
    case LaunchKind::kKernel: return "kernel";
    case LaunchKind::kCopy: return "copy";
    case LaunchKind::kFill: return "fill";
    case LaunchKind::kSleep: return "sleep";
  }
  return "kernel";
}

// Times are written to the nanosecond: finer digits are noise and would only make a trace
// of a million launches larger.
double to_ns(double us) { return std::round(us * 1000.0) / 1000.0; }

// Chrome trace "pid" of a device: 1, 2, ... in order of first appearance; 0 is the host.
struct Pids {
  std::map<Device, int> of;
  int get(Device d) {
    auto it = of.find(d);
    if (it != of.end()) return it->second;
    const int n = static_cast<int>(of.size()) + 1;
    return of[d] = n;
  }
};

// The events are built one at a time and appended to the text as they are made, one per
// line, rather than gathered into a single document: a traced benchmark records millions of
// launches, and a tree of them all would cost several times the size of the file.
class EventWriter {
 public:
  EventWriter() : out_("{\"traceEvents\":[\n") {}
  void add(const nlohmann::ordered_json& event) {
    if (count_++ > 0) out_ += ",\n";
    out_ += dump(event);
  }
  // Closes the array and appends the members of `rest` (an object with at least one) after
  // it, in the same object.
  std::string finish(const nlohmann::ordered_json& rest) && {
    const std::string members = dump(rest);  // "{...}": drop its braces
    out_ += "\n],";
    out_.append(members, 1, members.size() - 2);
    out_ += "}\n";
    return std::move(out_);
  }

 private:
  // Names come from user code (launch names, scopes): bytes that are not UTF-8 are written
  // as U+FFFD instead of failing the whole trace.
  static std::string dump(const nlohmann::ordered_json& j) {
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }
  std::string out_;
  int64_t count_ = 0;
};

std::string render(TraceState& st) {
  using nlohmann::ordered_json;
  EventWriter ev;
  Pids pids;
  auto metadata = [](const char* what, int pid, int tid, const std::string& name) {
    ordered_json e{{"ph", "M"}, {"name", what}, {"pid", pid}};
    if (tid >= 0) e["tid"] = tid;  // process names have none
    e["args"] = {{"name", name}};
    return e;
  };
  for (const Lane& l : st.lanes) {
    const int pid = pids.get(l.stream.device());
    ev.add(metadata(
        "thread_name", pid, static_cast<int>(l.stream.id()),
        absl::StrCat("stream ", l.stream.id(), l.stream.id() == 0 ? " (default)" : "")));
  }
  for (const auto& [device, pid] : pids.of) {
    ev.add(metadata("process_name", pid, -1, device.str()));
  }
  ev.add(metadata("process_name", 0, -1, "host"));
  for (const auto& [id, n] : st.host_threads) {
    ev.add(metadata("thread_name", 0, n, absl::StrCat("host thread ", n)));
  }
  // The head of an event; flow arrows (ph "s" and "f") carry the id that pairs them, and a
  // flow's end binds to the slice that encloses it ("bp":"e").
  auto event = [](const char* ph, const std::string& name, const char* cat, int flow_id = 0) {
    ordered_json e{{"ph", ph}};
    if (ph[0] == 'f') e["bp"] = "e";
    e["name"] = name;
    e["cat"] = cat;
    if (flow_id > 0) e["id"] = flow_id;
    return e;
  };
  auto on_lane = [&](ordered_json e, int lane, double ts) {
    const Stream& s = st.lanes[lane].stream;
    e["pid"] = pids.get(s.device());
    e["tid"] = static_cast<int>(s.id());
    e["ts"] = to_ns(ts);
    return e;
  };
  auto on_host = [](ordered_json e, int host_thread, double ts) {
    e["pid"] = 0;
    e["tid"] = host_thread;
    e["ts"] = to_ns(ts);
    return e;
  };
  int incomplete = 0;
  for (const Span& sp : st.spans) {
    if (sp.abandoned) continue;
    if (sp.end_us < 0) {
      ++incomplete;
      continue;
    }
    ordered_json e = on_lane(event("X", sp.name, kind_name(sp.kind)), sp.lane, sp.start_us);
    e["dur"] = to_ns(sp.end_us - sp.start_us);
    e["args"] = {{"stream", st.lanes[sp.lane].stream.str()},
                 {"enqueued_us", to_ns(sp.enqueued_us)},
                 {"host_thread", sp.host_thread}};
    if (!sp.node.empty()) e["args"]["node"] = sp.node;
    ev.add(e);
  }
  // Place the marks: a lane reaches a record once the work before it finished, and is
  // released from a wait once both it and the awaited record were reached.
  std::vector<double> cursor(st.lanes.size(), 0.0);
  std::vector<double> at(st.marks.size(), -1);
  int flow = 0;
  for (size_t i = 0; i < st.marks.size(); ++i) {
    const Mark& m = st.marks[i];
    double t = std::max(m.enqueued_us, cursor[m.lane]);
    if (m.prev_span >= 0) {
      const Span& sp = st.spans[m.prev_span];
      if (sp.end_us < 0) continue;  // its stream has not got there yet
      t = std::max(t, sp.end_us);
    }
    if (m.wait) {
      if (at[m.record] < 0) continue;
      t = std::max(t, at[m.record]);
    }
    at[i] = cursor[m.lane] = t;
    ordered_json mark = on_lane(event("X", m.wait ? "wait" : "record", "event"), m.lane, t);
    mark["dur"] = 0;
    ev.add(mark);
    if (m.wait) {
      ++flow;
      ev.add(on_lane(event("s", "event", "event", flow), st.marks[m.record].lane, at[m.record]));
      ev.add(on_lane(event("f", "event", "event", flow), m.lane, t));
    }
  }
  for (const HostMark& h : st.host_marks) {
    ordered_json mark = on_host(event("X", h.name, "host_sync"), h.host_thread, h.us);
    mark["dur"] = 0;
    ev.add(mark);
    double from = -1;
    int from_lane = -1;
    if (h.from_mark >= 0 && at[h.from_mark] >= 0) {
      from = at[h.from_mark];
      from_lane = st.marks[h.from_mark].lane;
    } else if (h.from_span >= 0 && st.spans[h.from_span].end_us >= 0) {
      from = st.spans[h.from_span].end_us;
      from_lane = h.lane;
    }
    if (from_lane < 0) continue;
    ++flow;
    ev.add(on_lane(event("s", "sync", "host_sync", flow), from_lane, std::min(from, h.us)));
    ev.add(on_host(event("f", "sync", "host_sync", flow), h.host_thread, h.us));
  }
  return std::move(ev).finish(
      {{"displayTimeUnit", "ms"},
       {"otherData", {{"recorder", "streamgrad"}, {"incomplete_spans", incomplete}}}});
}

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
