// Bad input to the runtime gets a clear streamgrad::Error naming what was wrong, and
// leaves the thread's state as it was.
#include <catch2/catch.hpp>

#include "runtime/runtime.h"

namespace streamgrad {
namespace {

TEST_CASE("a device index past the device count", "[errors]") {
  CHECK_THROWS_WITH(Stream::create("sim:5"),
                    Catch::Contains("Stream::create: device sim:5 does not exist") &&
                        Catch::Contains("2 sim devices") &&
                        Catch::Contains("STREAMGRAD_SIM_DEVICES"));
  CHECK_THROWS_AS(Storage::allocate(8, Device("sim:2")), DeviceError);
  CHECK_THROWS_AS(current_stream("sim:7"), DeviceError);
  CHECK_THROWS_AS(synchronize("sim:3"), DeviceError);
  const Device before = current_device();
  CHECK_THROWS_WITH(DeviceGuard(Device("sim:9")), Catch::Contains("DeviceGuard"));
  CHECK(current_device() == before);
}

TEST_CASE("cuda without a GPU is an error that says so, never a crash", "[errors][cuda]") {
  if (is_available(DeviceType::kCuda)) {
    WARN("a CUDA device is present; the no-GPU error path is not exercised here");
    return;
  }
  CHECK_THROWS_AS(Stream::create("cuda:0"), DeviceError);
  CHECK_THROWS_AS(Storage::allocate(8, Device("cuda")), DeviceError);
}

TEST_CASE("a stream of one device used in a guard of another", "[errors][guard]") {
  const Stream on_sim1 = Stream::create("sim:1");
  DeviceGuard g("sim:0");
  CHECK_THROWS_WITH(g.set_stream(on_sim1),
                    Catch::Contains("belongs to sim:1, not to the guarded device sim:0"));
  CHECK(current_stream("sim:0").is_default());
  CHECK(current_stream("sim:1").is_default());
}

TEST_CASE("a stream id the device never created", "[errors]") {
  const Stream bogus = Stream::unchecked(Device("sim:0"), 100000);
  CHECK_THROWS_WITH(bogus.synchronize(), Catch::Contains("does not exist"));
  CHECK_THROWS_AS(set_current_stream(bogus), DeviceError);
  CHECK_THROWS_AS(StreamGuard(bogus), DeviceError);
  CHECK(current_device() == Device("cpu"));  // the failed guard changed nothing
  CHECK_THROWS_AS(sleep(bogus, 1), DeviceError);
  CHECK_THROWS_AS(Event().record(bogus), DeviceError);
}

TEST_CASE("waiting on an event never recorded is a no-op", "[errors][event]") {
  Event never;
  const Stream s = Stream::create("sim:0");
  never.block(s);
  s.wait_event(never);
  never.synchronize();
  CHECK(never.query());
  s.synchronize();
}

TEST_CASE("an event recorded on one device cannot be recorded on another", "[errors][event]") {
  Event e;
  e.record(Stream::create("sim:0"));
  CHECK_THROWS_WITH(e.record(Stream::create("sim:1")),
                    Catch::Contains("belongs to sim:0") && Catch::Contains("sim:1"));
  e.synchronize();
}

TEST_CASE("negative sleep and bad environment values are ValueErrors", "[errors]") {
  CHECK_THROWS_AS(sleep(Stream::default_for("sim:0"), -1), ValueError);
  CHECK_THROWS_WITH(parse_visible_devices("0,x", 2), Catch::Contains("\"x\""));
  CHECK_THROWS_WITH(parse_visible_devices("0,0", 2), Catch::Contains("twice"));
  CHECK_THROWS_AS(parse_visible_devices("2", 2), ValueError);
  CHECK(parse_visible_devices("", 3) == std::vector<int>{0, 1, 2});
  CHECK(parse_visible_devices("1, 0", 2) == std::vector<int>{1, 0});
}

TEST_CASE("pinned memory: ownership is checked", "[errors]") {
  void* p = pinned_alloc(100);
  CHECK(is_pinned(p));
  CHECK(is_pinned(static_cast<char*>(p) + 99));
  int local = 0;
  CHECK_FALSE(is_pinned(&local));
  CHECK_THROWS_AS(pinned_free(&local), ValueError);
  pinned_free(p);
  CHECK_FALSE(is_pinned(p));
}

}  // namespace
}  // namespace streamgrad
