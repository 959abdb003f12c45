// The trace recorder's output (trace_state.h): cuda spans placed on the host clock, then
// Chrome's trace-event JSON, one process per device and one thread per stream.
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/backend/config.h"
#include "runtime/base/error.h"
#include "runtime/observe/trace_state.h"

namespace streamgrad {
namespace trace_internal {
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

namespace {

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

}  // namespace

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

}  // namespace trace_internal
}  // namespace streamgrad
