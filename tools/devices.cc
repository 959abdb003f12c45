// tools/devices: lists every device with its streams and memory statistics, and shows
// two streams of each accelerator ordered by an event.
//
//   devices            a readable report
//   devices --json     {"devices":[{"name":"sim:0",...}], ...}
//   devices --nodemo   skip the two-stream demonstration
//
// Exit code 0 when every demonstration read the value its event ordered it after, 1
// otherwise, 2 for bad flags (tools/cli_flags.h) or a runtime error.
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "runtime/backend.h"
#include "runtime/runtime.h"
#include "tools/cli_flags.h"
#include "tools/json_writer.h"

ABSL_FLAG(bool, json, false, "print the report as JSON");
ABSL_FLAG(bool, demo, true, "order two streams of each accelerator by an event and check it");

namespace streamgrad {
namespace {

struct StreamRow {
  Stream stream;
  int priority;
  bool current;
};

struct Demo {
  Stream producer, consumer;
  uint32_t value = 0;
  uint32_t expected = 0x2a2a2a2a;
  double producer_ms = 0;
};

struct DeviceReport {
  Device device;
  std::string description;
  size_t total_memory;
  std::vector<StreamRow> streams;
  bool has_demo = false;
  Demo demo{Stream::default_for("cpu"), Stream::default_for("cpu")};
  MemoryStats memory;
  bool demo_ok() const { return !has_demo || demo.value == demo.expected; }
};

// Producer: sleep, then fill a buffer; the event records the fill. Consumer: waits on the
// event (device-side), then reads the buffer back. Without the wait it would read zeros.
Demo run_demo(Device d) {
  Demo demo{Stream::create(d), Stream::create(d)};
  Storage buf = Storage::allocate(sizeof(uint32_t), demo.producer);
  fill_async(demo.producer, buf.data(), 0, sizeof(uint32_t));
  Event start(true), filled(true);
  start.record(demo.producer);
  sleep(demo.producer, 20000);
  fill_async(demo.producer, buf.data(), 0x2a, sizeof(uint32_t));
  filled.record(demo.producer);
  filled.block(demo.consumer);
  buf.record_stream(demo.consumer);
  {
    StreamGuard g(demo.consumer);
    copy_bytes(&demo.value, Device("cpu"), buf.data(), d, sizeof(uint32_t));
  }
  filled.synchronize();
  demo.producer_ms = start.elapsed_ms(filled);
  return demo;
}

std::vector<DeviceReport> collect(bool with_demo) {
  std::vector<DeviceReport> out;
  std::vector<Device> devices{Device("cpu")};
  for (DeviceType t : {DeviceType::kSim, DeviceType::kCuda}) {
    for (int i = 0; i < device_count(t); ++i) devices.emplace_back(t, i);
  }
  for (const Device& d : devices) {
    Backend& b = backend(d.type());
    DeviceReport r{d, b.device_name(d.index()), b.total_memory(d.index()), {}};
    if (with_demo && !d.is_cpu()) {
      r.has_demo = true;
      r.demo = run_demo(d);
    }
    const Stream current = current_stream(d);
    for (int id = 0; id < b.stream_count(d.index()); ++id) {
      const Stream s = Stream::unchecked(d, id);
      r.streams.push_back(StreamRow{s, s.priority(), s == current});
    }
    synchronize(d);
    r.memory = memory_stats(d);
    out.push_back(std::move(r));
  }
  return out;
}

void print_text(const std::vector<DeviceReport>& reports) {
  const SimSchedulerOptions sim = sim_scheduler();
  absl::PrintF("default device: %s   sim scheduler: %s%s\n\n", default_device().str(),
               sim.kind == SimSchedulerKind::kThreaded ? "threaded" : "deterministic/",
               sim.kind == SimSchedulerKind::kThreaded ? "" : sim_policy_name(sim.policy));
  for (const DeviceReport& r : reports) {
    absl::PrintF("%s  %s, %s memory\n", r.device.str(), r.description,
                 format_bytes(static_cast<int64_t>(r.total_memory)));
    absl::PrintF("  streams:");
    for (const StreamRow& s : r.streams) {
      absl::PrintF(" s%d%s%s", s.stream.id(), s.stream.is_default() ? "(default)" : "",
                   s.priority != 0 ? absl::StrFormat("(priority %d)", s.priority) : "");
    }
    absl::PrintF("\n");
    const MemoryStats& m = r.memory;
    absl::PrintF("  memory: allocated %s (peak %s), reserved %s (peak %s)\n",
                 format_bytes(m.allocated_bytes.current), format_bytes(m.allocated_bytes.peak),
                 format_bytes(m.reserved_bytes.current), format_bytes(m.reserved_bytes.peak));
    absl::PrintF("          %d allocations, %d frees, %d cache hits, %d segments\n",
                 m.num_allocs, m.num_frees, m.num_cache_hits, m.num_segment_allocs);
    if (r.has_demo) {
      absl::PrintF(
          "  demo: producer %s slept 20 ms then wrote 0x%08x; consumer %s waited on its event "
          "and read 0x%08x: %s (producer took %.1f ms)\n",
          r.demo.producer.str(), r.demo.expected, r.demo.consumer.str(), r.demo.value,
          r.demo_ok() ? "ordered" : "WRONG", r.demo.producer_ms);
    }
    absl::PrintF("\n");
  }
}

void print_json(const std::vector<DeviceReport>& reports) {
  JsonWriter j;
  j.begin_object();
  j.key("default_device").value(default_device().str());
  const SimSchedulerOptions sim = sim_scheduler();
  j.key("sim_scheduler").value(sim.kind == SimSchedulerKind::kThreaded ? "threaded"
                                                                       : "deterministic");
  j.key("sim_policy").value(sim_policy_name(sim.policy));
  j.key("devices").begin_array();
  for (const DeviceReport& r : reports) {
    j.begin_object();
    j.key("name").value(r.device.str());
    j.key("type").value(device_type_name(r.device.type()));
    j.key("index").value(r.device.index());
    j.key("description").value(r.description);
    j.key("total_memory_bytes").value(static_cast<int64_t>(r.total_memory));
    j.key("streams").begin_array();
    for (const StreamRow& s : r.streams) {
      j.begin_object();
      j.key("id").value(s.stream.id());
      j.key("default").value(s.stream.is_default());
      j.key("priority").value(s.priority);
      j.key("current").value(s.current);
      j.end_object();
    }
    j.end_array();
    const MemoryStats& m = r.memory;
    j.key("memory").begin_object();
    j.key("allocated_bytes").value(m.allocated_bytes.current);
    j.key("allocated_peak_bytes").value(m.allocated_bytes.peak);
    j.key("reserved_bytes").value(m.reserved_bytes.current);
    j.key("reserved_peak_bytes").value(m.reserved_bytes.peak);
    j.key("num_allocs").value(m.num_allocs);
    j.key("num_frees").value(m.num_frees);
    j.key("num_cache_hits").value(m.num_cache_hits);
    j.key("num_segment_allocs").value(m.num_segment_allocs);
    j.end_object();
    if (r.has_demo) {
      j.key("demo").begin_object();
      j.key("producer_stream").value(r.demo.producer.str());
      j.key("consumer_stream").value(r.demo.consumer.str());
      j.key("value").value(static_cast<int64_t>(r.demo.value));
      j.key("expected").value(static_cast<int64_t>(r.demo.expected));
      j.key("ordered").value(r.demo_ok());
      j.key("producer_ms").value(r.demo.producer_ms);
      j.end_object();
    }
    j.end_object();
  }
  j.end_array();
  j.end_object();
  std::cout << j.str() << "\n";
}

}  // namespace
}  // namespace streamgrad

int main(int argc, char** argv) {
  const streamgrad::ToolSpec spec{
      "devices",
      "devices: lists every streamgrad device with its streams and memory statistics.\n"
      "Usage: devices [--json] [--nodemo]",
      __FILE__, {}, {}};
  return streamgrad::run_tool(spec, argc, argv, [&] {    const auto reports = streamgrad::collect(absl::GetFlag(FLAGS_demo));
    if (absl::GetFlag(FLAGS_json)) {
      streamgrad::print_json(reports);
    } else {
      streamgrad::print_text(reports);
    }
    for (const auto& r : reports) {
      if (!r.demo_ok()) return 1;
    }
    return 0;
  });
}
