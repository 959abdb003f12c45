// One suite run against every backend present (cpu, each sim device, each cuda device):
// order within a stream, events, wait_stream, guards and per-thread current streams,
// and virtual memory mapping where a backend has it.
// Only device-neutral operations are used (fill, copy, sleep), so the same checks hold
// on real GPUs.
#include <catch2/catch.hpp>
#include <cstdint>
#include <thread>

#include "runtime/backend/backend.h"
#include "runtime/runtime.h"
#include "tests/runtime/test_devices.h"

namespace streamgrad {
namespace {

using testing::present_devices;
using testing::read_value;

bool is_async(Device d) { return !d.is_cpu(); }

TEST_CASE("work on one stream runs in order", "[conformance]") {
  const Device d = GENERATE(from_range(present_devices()));
  INFO("device " << d);
  const Stream s = Stream::create(d);
  Storage a = Storage::allocate(sizeof(int32_t), s);
  Storage b = Storage::allocate(sizeof(int32_t), s);
  fill_async(s, a.data(), 0, 4);
  fill_async(s, b.data(), 0, 4);
  sleep(s, 20000);                   // a slow first task must not be overtaken
  fill_async(s, a.data(), 0x11, 4);  // a = 0x11111111
  copy_async(s, b.data(), a.data(), 4);
  fill_async(s, a.data(), 0x22, 4);  // must not reach b
  CHECK(read_value<int32_t>(b.data(), s) == 0x11111111);
  CHECK(read_value<int32_t>(a.data(), s) == 0x22222222);
}

TEST_CASE("events: record, query, synchronize, block, timing", "[conformance]") {
  const Device d = GENERATE(from_range(present_devices()));
  INFO("device " << d);
  const Stream s = Stream::create(d);

  SECTION("an event never recorded is complete and waiting on it is a no-op") {
    Event e;
    CHECK_FALSE(e.was_recorded());
    CHECK(e.query());
    e.synchronize();
    e.block(s);
    s.synchronize();
  }
  SECTION("query is false while the stream is busy, true after synchronize") {
    Event e;
    sleep(s, 100000);
    e.record(s);
    CHECK(e.device() == d);
    if (is_async(d)) CHECK_FALSE(e.query());
    e.synchronize();
    CHECK(e.query());
    CHECK(s.query());
  }
  SECTION("elapsed time covers a sleep") {
    Event start(true), end(true);
    start.record(s);
    sleep(s, 20000);
    end.record(s);
    end.synchronize();
    CHECK(start.elapsed_ms(end) >= 15.0);  // a lower bound: the sleep was at least 20 ms
  }
  SECTION("elapsed time needs timing events that completed") {
    Event a, b;
    a.record(s);
    b.record(s);
    s.synchronize();
    CHECK_THROWS_AS(a.elapsed_ms(b), Error);
    Event c(true), never(true);
    c.record(s);
    CHECK_THROWS_WITH(c.elapsed_ms(never), Catch::Contains("recorded"));
  }
  SECTION("block makes another stream wait for the recorded work") {
    const Stream other = Stream::create(d);
    Storage buf = Storage::allocate(4, s);
    fill_async(s, buf.data(), 0, 4);
    s.synchronize();
    sleep(s, 30000);
    fill_async(s, buf.data(), 0x5a, 4);
    Event e;
    e.record(s);
    e.block(other);
    buf.record_stream(other);
    CHECK(read_value<int32_t>(buf.data(), other) == 0x5a5a5a5a);
  }
}

TEST_CASE("wait_stream orders a consumer after a producer", "[conformance]") {
  const Device d = GENERATE(from_range(present_devices()));
  INFO("device " << d);
  const Stream producer = Stream::create(d);
  const Stream consumer = Stream::create(d);
  Storage buf = Storage::allocate(4, producer);
  fill_async(producer, buf.data(), 0, 4);
  sleep(producer, 30000);
  fill_async(producer, buf.data(), 0x7f, 4);
  consumer.wait_stream(producer);
  buf.record_stream(consumer);
  CHECK(read_value<int32_t>(buf.data(), consumer) == 0x7f7f7f7f);
  // The host was not blocked by wait_stream: only device-side ordering.
  consumer.wait_stream(consumer);  // waiting on itself is a no-op
}

TEST_CASE("guards restore device and stream on scope exit and on exception",
          "[conformance][guard]") {
  const Device d = GENERATE(from_range(present_devices()));
  INFO("device " << d);
  const Device before = current_device();
  const Stream before_stream = current_stream(d);
  const Stream side = Stream::create(d);
  {
    StreamGuard g(side);
    CHECK(current_stream(d) == side);
    CHECK(current_device() == d);
  }
  CHECK(current_stream(d) == before_stream);
  CHECK(current_device() == before);
  try {
    DeviceGuard g(d);
    g.set_stream(side);
    CHECK(current_device() == d);
    CHECK(current_stream(d) == side);
    throw std::runtime_error("unwind");
  } catch (const std::runtime_error&) {
  }
  CHECK(current_device() == before);
  CHECK(current_stream(d) == before_stream);
}

TEST_CASE("the current stream is per thread", "[conformance]") {
  const Device d = GENERATE(from_range(present_devices()));
  INFO("device " << d);
  const Stream side = Stream::create(d);
  set_current_stream(side);
  Stream seen_elsewhere = side;
  std::thread t([&] { seen_elsewhere = current_stream(d); });
  t.join();
  CHECK(current_stream(d) == side);
  CHECK(seen_elsewhere == Stream::default_for(d));
  set_current_stream(Stream::default_for(d));
}

TEST_CASE("streams: creation, pool, default, priority", "[conformance]") {
  const Device d = GENERATE(from_range(present_devices()));
  INFO("device " << d);
  const Stream def = Stream::default_for(d);
  CHECK(def.is_default());
  CHECK(def.id() == 0);
  if (is_async(d)) {
    const Stream a = Stream::create(d), b = Stream::create(d);
    CHECK(a != b);
    CHECK(a != def);
    CHECK(Stream::create(d, -1).priority() == -1);
    const Stream p1 = Stream::from_pool(d), p2 = Stream::from_pool(d);
    CHECK(p1 != p2);  // round-robin
  } else {
    CHECK(Stream::create(d) == def);  // cpu has one synchronous stream
  }
  CHECK(Stream::create(d).device() == d);
  synchronize(d);
}

// Expandable segments' mapping, where a backend offers it (sim, cuda; see backend.h).
TEST_CASE("virtual memory: reserve, map, unmap and map again", "[conformance]") {
  const Device d = GENERATE(from_range(present_devices()));
  INFO("device " << d);
  Backend& b = backend(d.type());
  const int index = d.is_cpu() ? 0 : d.index();
  const size_t page = b.vm_granularity(index);
  if (page == 0) {
    CHECK(b.vm_reserve(index, 4096) == nullptr);
    return;
  }
  void* reserved = b.vm_reserve(index, 4 * page);
  // Not a char* in the assertion: Catch2 would print it as a string from unmapped memory.
  REQUIRE(reserved != nullptr);
  char* const range = static_cast<char*>(reserved);
  REQUIRE(b.vm_map(index, range, 2 * page));
  const Stream s = Stream::create(d);
  fill_async(s, range + page, 0x33, 4);
  CHECK(read_value<int32_t>(range + page, s) == 0x33333333);
  sleep(s, 20000);                    // queued when the page is unmapped
  fill_async(s, range + page, 0x44, 4);
  b.vm_unmap(index, range + page, page);
  REQUIRE(b.vm_map(index, range + page, page));  // waits for the fills
  CHECK(s.query());
  fill_async(s, range + page, 0x55, 4);
  CHECK(read_value<int32_t>(range + page, s) == 0x55555555);
  b.vm_unmap(index, range, 2 * page);
  synchronize(d);
}

TEST_CASE("device counts", "[conformance]") {
  CHECK(device_count(DeviceType::kCpu) == 1);
  CHECK(device_count(DeviceType::kSim) == 2);  // STREAMGRAD_SIM_DEVICES defaults to 2
  CHECK(device_count(DeviceType::kCuda) >= 0);
  CHECK(is_available(DeviceType::kSim));
  CHECK(all_devices(DeviceType::kSim).size() == 2);
}

TEST_CASE("facts: every backend and device describes itself without throwing",
          "[conformance]") {
  const Device d = GENERATE(from_range(present_devices()));
  Backend& b = backend(d.type());
  Facts device_facts, backend_facts;
  REQUIRE_NOTHROW(device_facts = b.device_facts(d.index()));
  REQUIRE_NOTHROW(backend_facts = b.backend_facts());
  for (const Facts* facts : {&device_facts, &backend_facts}) {
    for (const auto& f : *facts) {
      INFO(d.str() << ": " << f.first << " = " << f.second);
      CHECK_FALSE(f.first.empty());
      CHECK_FALSE(f.second.empty());
    }
  }
  if (d.type() == DeviceType::kCuda) {
    CHECK(device_facts.front().first == "compute capability");
  }
  // Without a GPU the cuda backend says why there is none; with one, it does not.
  if (Backend* cuda = find_backend(DeviceType::kCuda)) {
    bool says_why = false;
    for (const auto& f : cuda->backend_facts()) says_why |= f.first == "no devices because";
    CHECK(says_why == (cuda->device_count() == 0));
    CHECK(cuda_unavailable_reason().empty() == (cuda->device_count() > 0));
  } else {
    CHECK(cuda_unavailable_reason().find("has no cuda backend") != std::string::npos);
  }
}

}  // namespace
}  // namespace streamgrad
