// The memory history (runtime/memory/memory_history.h): what the allocators did, in order,
// with device, stream, address, rounded size, category and op; nothing while it is off; a
// free of a block another stream still uses is requested at once and completed only once
// that stream ran; the bound on entries; out-of-memory; the dump; pinned host memory, under
// the device name "pinned".
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "runtime/memory/memory_history.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace {

const Device kDev("sim:1");

std::vector<MemoryEvent> events_at(uintptr_t address) {
  std::vector<MemoryEvent> out;
  for (const MemoryEvent& e : memory_history()) {
    if (e.address == address && e.device == kDev) out.push_back(e);
  }
  return out;
}

std::vector<std::string> actions(const std::vector<MemoryEvent>& events) {
  std::vector<std::string> out;
  for (const MemoryEvent& e : events) out.push_back(memory_action_name(e.action));
  return out;
}

// Stops recording at the end of a case, whatever happens in it.
struct Recording {
  explicit Recording(size_t max_entries = kDefaultMemoryHistoryEntries) {
    synchronize(kDev);
    empty_cache(kDev);
    record_memory_history(true, max_entries);
  }
  ~Recording() { record_memory_history(false); }
};

TEST_CASE("nothing is recorded while the history is off", "[memory_history]") {
  record_memory_history(false);
  CHECK_FALSE(memory_history_enabled());
  const size_t before = memory_history().size();
  void* p = allocator_for(kDev).allocate(1000, current_stream(kDev));
  allocator_for(kDev).free(p);
  CHECK(memory_history().size() == before);
}

TEST_CASE("an allocation and its free, with stream, rounded size, category and op",
          "[memory_history]") {
  Recording on;
  const Stream s = Stream::create(kDev);
  void* p = nullptr;
  {
    const MemoryCategoryScope category("activation");
    const LaunchScope op("MulBackward");
    p = allocator_for(kDev).allocate(1000, s);
  }
  CHECK(std::string(current_memory_category()) == "other");
  allocator_for(kDev).free(p);
  const std::vector<MemoryEvent> at = events_at(reinterpret_cast<uintptr_t>(p));
  // A fresh segment first (the cache was emptied), then the block's life.
  REQUIRE(actions(at) ==
          std::vector<std::string>{"segment_alloc", "alloc", "free_requested", "free_completed"});
  for (const MemoryEvent& e : at) {
    CHECK(e.stream == s.id());
    CHECK(e.size == 1024);  // rounded to 512-byte multiples
  }
  CHECK(at[1].category == "activation");
  CHECK(at[1].op == "MulBackward");
  CHECK(at[2].category == "other");
  CHECK(at[2].op.empty());
  CHECK(at[0].time_us <= at[1].time_us);
  CHECK(at[1].time_us <= at[3].time_us);
  // Inside a backward node (the engine's LaunchScope) and no category: "gradient".
  {
    const LaunchScope node("AddBackward0");
    void* g = allocator_for(kDev).allocate(512, s);
    CHECK(memory_history().back().category == "gradient");
    CHECK(memory_history().back().op == "AddBackward0");
    allocator_for(kDev).free(g);
  }
}

TEST_CASE("a block allocated under no scope is named after the first launch that writes it",
          "[memory_history]") {
  Recording on;
  const Stream s = Stream::create(kDev);
  char* p = static_cast<char*>(allocator_for(kDev).allocate(4096, s));  // a forward op's output
  char* q = static_cast<char*>(allocator_for(kDev).allocate(4096, s));  // never written
  void* r = nullptr;
  {
    const LaunchScope node("MulBackward");
    r = allocator_for(kDev).allocate(4096, s);
  }
  const MemRange read_p[] = {{p, 16}};
  const MemRange into_p[] = {{p + 100, 16}};  // inside the block, not at its start
  const MemRange into_r[] = {{r, 16}};
  launch(s, {"reader", read_p, {}}, [] {});  // reads name nothing
  launch(s, {"fill_kernel", {}, into_p}, [] {});
  launch(s, {"second_writer", {}, into_p}, [] {});
  launch(s, {"fill_kernel", {}, into_r}, [] {});
  s.synchronize();
  const auto op_of_alloc = [](const void* b) {
    for (const MemoryEvent& e : events_at(reinterpret_cast<uintptr_t>(b))) {
      if (e.action == MemoryAction::kAlloc) return e.op;
    }
    return std::string("(no alloc event)");
  };
  CHECK(op_of_alloc(p) == "fill_kernel");  // the first writer, not the second
  CHECK(op_of_alloc(q).empty());
  CHECK(op_of_alloc(r) == "MulBackward");  // the scope's name stays
  // A block freed unwritten and handed out again is named by the new owner's writer only.
  allocator_for(kDev).free(q);
  char* again = static_cast<char*>(allocator_for(kDev).allocate(4096, s));
  REQUIRE(again == q);
  const MemRange into_again[] = {{again, 16}};
  launch(s, {"later_kernel", {}, into_again}, [] {});
  s.synchronize();
  for (void* b : {static_cast<void*>(p), static_cast<void*>(again), r}) allocator_for(kDev).free(b);
  std::vector<std::string> names;
  for (const MemoryEvent& e : events_at(reinterpret_cast<uintptr_t>(q))) {
    if (e.action == MemoryAction::kAlloc) names.push_back(e.op);
  }
  CHECK(names == std::vector<std::string>{"", "later_kernel"});
}

TEST_CASE("a free is completed only once the other streams that used the block ran",
          "[memory_history]") {
  SimSchedulerOptions deterministic;
  deterministic.kind = SimSchedulerKind::kDeterministic;  // work runs when waited for
  SimSchedulerScope scheduler(deterministic);
  Recording on;
  const Stream s = Stream::create(kDev), t = Stream::create(kDev);
  void* p = allocator_for(kDev).allocate(4096, s);
  allocator_for(kDev).record_stream(p, t);
  const MemRange r[] = {{p, 4}};
  launch(t, {"read", r, {}}, [] {});
  allocator_for(kDev).free(p);
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  CHECK(actions(events_at(at)) ==
        std::vector<std::string>{"segment_alloc", "alloc", "free_requested"});
  t.synchronize();
  // The allocator looks at its pending frees when next asked.
  void* q = allocator_for(kDev).allocate(512, s);
  const std::vector<std::string> after = actions(events_at(at));
  REQUIRE(after.size() >= 4);
  CHECK(after[3] == "free_completed");
  allocator_for(kDev).free(q);
}

TEST_CASE("the oldest events go beyond max_entries, and are counted", "[memory_history]") {
  Recording on(5);
  for (int i = 0; i < 4; ++i) {
    allocator_for(kDev).free(allocator_for(kDev).allocate(512, current_stream(kDev)));
  }
  // A segment, then 4 x (alloc, free_requested, free_completed): 13 events, 5 kept.
  CHECK(memory_history().size() == 5);
  CHECK(memory_history_dropped() == 8);
  CHECK(memory_history().back().action == MemoryAction::kFreeCompleted);
  CHECK_THROWS_AS(record_memory_history(true, 0), ValueError);
  CHECK(memory_history_enabled());  // the refused call changed nothing
}

TEST_CASE("an out-of-memory request is recorded with its size", "[memory_history]") {
  Recording on;
  const double fraction = get_per_process_memory_fraction(kDev);
  set_per_process_memory_fraction(0.0, kDev);
  CHECK_THROWS_AS(allocator_for(kDev).allocate(1 << 20, current_stream(kDev)),
                  OutOfMemoryError);
  set_per_process_memory_fraction(fraction, kDev);
  const std::vector<MemoryEvent> all = memory_history();
  REQUIRE_FALSE(all.empty());
  CHECK(all.back().action == MemoryAction::kOom);
  CHECK(all.back().size == (1 << 20));
  CHECK(all.back().address == 0);
}

TEST_CASE("the dump holds the events and the segments held now", "[memory_history]") {
  Recording on;
  void* p = allocator_for(kDev).allocate(3000, current_stream(kDev));
  const nlohmann::json j = nlohmann::json::parse(memory_snapshot_json());
  CHECK(j["version"] == 1);
  CHECK(j["dropped"] == 0);
  bool alloc_seen = false;
  for (const auto& e : j["events"]) {
    if (e["action"] == "alloc" && e["address"] == reinterpret_cast<uintptr_t>(p)) {
      alloc_seen = true;
      CHECK(e["device"] == "sim:1");
      CHECK(e["size"] == 3072);
      CHECK(e["category"] == "other");
    }
  }
  CHECK(alloc_seen);
  bool live_seen = false;
  for (const auto& s : j["segments"]) {
    for (const auto& b : s["blocks"]) {
      if (b["address"] == reinterpret_cast<uintptr_t>(p)) {
        live_seen = true;
        CHECK(s["device"] == "sim:1");
        CHECK(b["state"] == "allocated");
        CHECK(b["requested"] == 3000);
      }
    }
  }
  CHECK(live_seen);
  allocator_for(kDev).free(p);
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/memory.json";
  dump_memory_snapshot(path);
  std::FILE* f = std::fopen(path.c_str(), "r");
  REQUIRE(f != nullptr);
  std::fclose(f);
  CHECK_THROWS_WITH(dump_memory_snapshot("/nonexistent-folder/memory.json"),
                    Catch::Contains("/nonexistent-folder/memory.json"));
  CHECK_THROWS_AS(dump_memory_snapshot("/nonexistent-folder/memory.json"), IOError);
}

TEST_CASE("pinned host memory is recorded, and dumped as the device \"pinned\"",
          "[memory_history]") {
  host_empty_cache();
  Recording on;
  void* p = nullptr;
  {
    const MemoryCategoryScope category("offloaded");
    p = pinned_alloc(3000);
  }
  pinned_free(p);
  host_empty_cache();
  std::vector<std::string> seen;
  for (const MemoryEvent& e : memory_history()) {
    if (e.address != reinterpret_cast<uintptr_t>(p) || !e.pinned) continue;
    seen.push_back(memory_action_name(e.action));
    CHECK(e.device == Device("cpu"));
    CHECK(e.size == 4096);  // a power of two
    if (e.action == MemoryAction::kAlloc) CHECK(e.category == "offloaded");
  }
  CHECK(seen == std::vector<std::string>{"segment_alloc", "alloc", "free_requested",
                                         "free_completed", "segment_free"});
  const nlohmann::json j = nlohmann::json::parse(memory_snapshot_json());
  int pinned_events = 0;
  for (const auto& e : j["events"]) {
    if (e["address"] == reinterpret_cast<uintptr_t>(p) && e["device"] == "pinned") {
      ++pinned_events;
    }
  }
  CHECK(pinned_events == 5);
}

}  // namespace
}  // namespace streamgrad
