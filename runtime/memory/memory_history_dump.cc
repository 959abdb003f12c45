#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "runtime/base/error.h"
#include "runtime/memory/caching_allocator.h"
#include "runtime/memory/memory_history.h"

namespace streamgrad {

std::string memory_snapshot_json() {
  int64_t dropped = 0;
  const std::vector<MemoryEvent> events = detail::memory_history_and_dropped(dropped);
  // Keys in the order written (the header's), for people reading the file.
  nlohmann::ordered_json out;
  out["version"] = 1;
  out["dropped"] = dropped;
  nlohmann::ordered_json& list = out["events"] = nlohmann::ordered_json::array();
  std::set<std::string> devices{Device(DeviceType::kCpu).str()};
  for (const MemoryEvent& e : events) {
    devices.insert(e.device.str());
    list.push_back({{"action", memory_action_name(e.action)},
                    {"device", e.pinned ? std::string("pinned") : e.device.str()},
                    {"stream", e.stream},
                    {"address", e.address},
                    {"size", e.size},
                    {"category", e.category},
                    {"op", e.op},
                    {"time_us", e.time_us}});
  }
  // The allocators are asked without the history's lock: they record events under their
  // own locks, so holding ours here would order the two locks both ways.
  nlohmann::ordered_json& segments = out["segments"] = nlohmann::ordered_json::array();
  for (const std::string& name : devices) {
    for (const SegmentInfo& s : memory_snapshot(Device(name))) {
      nlohmann::ordered_json blocks = nlohmann::ordered_json::array();
      for (const BlockInfo& b : s.blocks) {
        blocks.push_back({{"address", b.address},
                          {"size", b.size},
                          {"requested", b.requested},
                          {"state", b.allocated ? "allocated" : b.pending ? "pending" : "free"},
                          {"stream", b.stream.id()}});
      }
      segments.push_back({{"device", name},
                          {"address", s.address},
                          {"size", s.size},
                          {"stream", s.stream.id()},
                          {"blocks", std::move(blocks)}});
    }
  }
  return out.dump();
}

void dump_memory_snapshot(const std::string& path) {
  const std::string text = memory_snapshot_json();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  SG_CHECK(f.good(), IOError, "dump_memory_snapshot: cannot write '", path,
           "': ", std::strerror(errno), "; check that its folder exists and is writable");
  f << text << '\n';
  f.close();
  SG_CHECK(!f.fail(), IOError, "dump_memory_snapshot: writing '", path, "' failed: ",
           std::strerror(errno));
}

}  // namespace streamgrad
