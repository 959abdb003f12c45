// tools/devices: lists every device with its streams and memory statistics and what
// users otherwise read from nvidia-smi (a GPU's name, memory, compute capability; the CUDA
// driver and runtime versions, and why there is no GPU when there is none), and shows two
// streams of each accelerator ordered by an event.
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
#include "nlohmann/json.hpp"
#include "runtime/backend/backend.h"
#include "runtime/runtime.h"
#include "tools/cli_flags.h"

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

// A device type's backend: whether this build has it, how many devices, its facts.
struct BackendReport {
  DeviceType type;
  bool built = false;
  int device_count = 0;
  Facts facts;
};

struct DeviceReport {
  Device device;
  std::string description;
  size_t total_memory;
  Facts facts;
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

std::vector<BackendReport> collect_backends() {
  std::vector<BackendReport> out;
  for (DeviceType t : {DeviceType::kCpu, DeviceType::kSim, DeviceType::kCuda}) {
    BackendReport r{t};
    if (Backend* b = find_backend(t)) {
      r.built = true;
      r.device_count = device_count(t);
      r.facts = b->backend_facts();
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<DeviceReport> collect(bool with_demo) {
  std::vector<DeviceReport> out;
  std::vector<Device> devices{Device("cpu")};
  for (DeviceType t : {DeviceType::kSim, DeviceType::kCuda}) {
    for (int i = 0; i < device_count(t); ++i) devices.emplace_back(t, i);
  }
  for (const Device& d : devices) {
    Backend& b = backend(d.type());
    DeviceReport r{d, b.device_name(d.index()), b.total_memory(d.index()),
                   b.device_facts(d.index()), {}};
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

std::string joined(const Facts& facts) {
  std::string out;
  for (const auto& f : facts) absl::StrAppend(&out, out.empty() ? "" : ", ", f.first, " ", f.second);
  return out;
}

void print_text(const std::vector<BackendReport>& backends,
                const std::vector<DeviceReport>& reports) {
  const SimSchedulerOptions sim = sim_scheduler();
  absl::PrintF("default device: %s   sim scheduler: %s%s\n", default_device().str(),
               sim.kind == SimSchedulerKind::kThreaded ? "threaded" : "deterministic/",
               sim.kind == SimSchedulerKind::kThreaded ? "" : sim_policy_name(sim.policy));
  for (const BackendReport& b : backends) {
    if (b.type == DeviceType::kCpu) continue;
    if (!b.built) {
      absl::PrintF("%s: not in this build (its toolkit was missing when it was built)\n",
                   device_type_name(b.type));
      continue;
    }
    absl::PrintF("%s: %d device%s%s%s\n", device_type_name(b.type), b.device_count,
                 b.device_count == 1 ? "" : "s", b.facts.empty() ? "" : "; ", joined(b.facts));
  }
  absl::PrintF("\n");
  for (const DeviceReport& r : reports) {
    absl::PrintF("%s  %s, %s memory\n", r.device.str(), r.description,
                 format_bytes(static_cast<int64_t>(r.total_memory)));
    if (!r.facts.empty()) absl::PrintF("  %s\n", joined(r.facts));
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

nlohmann::ordered_json facts_json(const Facts& facts) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& f : facts) j[f.first] = f.second;
  return j;
}

void print_json(const std::vector<BackendReport>& backends,
                const std::vector<DeviceReport>& reports) {
  using nlohmann::ordered_json;  // keys stay in the order written: readers grep the text
  const SimSchedulerOptions sim = sim_scheduler();
  ordered_json j;
  j["default_device"] = default_device().str();
  j["sim_scheduler"] = sim.kind == SimSchedulerKind::kThreaded ? "threaded" : "deterministic";
  j["sim_policy"] = sim_policy_name(sim.policy);
  j["backends"] = ordered_json::array();
  for (const BackendReport& b : backends) {
    j["backends"].push_back({{"type", device_type_name(b.type)},
                             {"built", b.built},
                             {"device_count", b.device_count},
                             {"facts", facts_json(b.facts)}});
  }
  j["devices"] = ordered_json::array();
  for (const DeviceReport& r : reports) {
    ordered_json d;
    d["name"] = r.device.str();
    d["type"] = device_type_name(r.device.type());
    d["index"] = r.device.index();
    d["description"] = r.description;
    d["total_memory_bytes"] = static_cast<int64_t>(r.total_memory);
    d["facts"] = facts_json(r.facts);
    d["streams"] = ordered_json::array();
    for (const StreamRow& s : r.streams) {
      d["streams"].push_back({{"id", s.stream.id()},
                              {"default", s.stream.is_default()},
                              {"priority", s.priority},
                              {"current", s.current}});
    }
    const MemoryStats& m = r.memory;
    d["memory"] = {{"allocated_bytes", m.allocated_bytes.current},
                   {"allocated_peak_bytes", m.allocated_bytes.peak},
                   {"reserved_bytes", m.reserved_bytes.current},
                   {"reserved_peak_bytes", m.reserved_bytes.peak},
                   {"num_allocs", m.num_allocs},
                   {"num_frees", m.num_frees},
                   {"num_cache_hits", m.num_cache_hits},
                   {"num_segment_allocs", m.num_segment_allocs}};
    if (r.has_demo) {
      d["demo"] = {{"producer_stream", r.demo.producer.str()},
                   {"consumer_stream", r.demo.consumer.str()},
                   {"value", static_cast<int64_t>(r.demo.value)},
                   {"expected", static_cast<int64_t>(r.demo.expected)},
                   {"ordered", r.demo_ok()},
                   {"producer_ms", r.demo.producer_ms}};
    }
    j["devices"].push_back(std::move(d));
  }
  print_json_line(j);
}

}  // namespace
}  // namespace streamgrad

int main(int argc, char** argv) {
  const streamgrad::ToolSpec spec{
      "devices",
      "devices: lists every streamgrad device with its streams, memory statistics and\n"
      "hardware facts (for GPUs: name, memory, compute capability, driver and runtime).\n"
      "Usage: devices [--json] [--nodemo]",
      __FILE__, {}, {}};
  return streamgrad::run_tool(spec, argc, argv, [&] {
    const auto backends = streamgrad::collect_backends();
    const auto reports = streamgrad::collect(absl::GetFlag(FLAGS_demo));
    if (absl::GetFlag(FLAGS_json)) {
      streamgrad::print_json(backends, reports);
    } else {
      streamgrad::print_text(backends, reports);
    }
    for (const auto& r : reports) {
      if (!r.demo_ok()) return 1;
    }
    return 0;
  });
}
