// The device-management habits users rely on, on sim devices: where memory lands, what
// the guards make current, and the helpers for device-agnostic code.
#include <catch2/catch.hpp>

#include "runtime/runtime.h"

namespace streamgrad {
namespace {

TEST_CASE("memory allocated without naming a device lands on the current device",
          "[devices]") {
  CHECK(current_device() == Device("cpu"));
  CHECK(Storage::allocate(16).device() == Device("cpu"));
  {
    DeviceGuard g("sim:1");
    Storage s = Storage::allocate(16);
    CHECK(s.device() == Device("sim:1"));
    CHECK(s.stream() == current_stream(Device("sim:1")));
  }
  set_current_device("sim:0");
  CHECK(Storage::allocate(16).device() == Device("sim:0"));
  set_current_device("cpu");
}

TEST_CASE("DeviceGuard makes its device current for its scope only", "[devices][guard]") {
  set_current_device("sim:0");
  {
    DeviceGuard g("sim:1");
    CHECK(current_device() == Device("sim:1"));
    CHECK(current_device_index(DeviceType::kSim) == 1);
    CHECK(Device("sim") == Device(DeviceType::kSim));  // unresolved until used
    CHECK(Stream::default_for("sim").device() == Device("sim:1"));
    {
      DeviceGuard inner("cpu");
      CHECK(current_device() == Device("cpu"));
    }
    CHECK(current_device() == Device("sim:1"));
  }
  CHECK(current_device() == Device("sim:0"));
  CHECK(current_device_index(DeviceType::kSim) == 0);
  set_current_device("cpu");
}

// Behaviour of libtorch's OptionalDeviceGuard (documented in c10/core/DeviceGuard.h):
// constructed from an empty optional it does nothing; constructed from a device it sets
// that device and restores the original one at scope exit, as DeviceGuard does.
TEST_CASE("OptionalDeviceGuard without a device changes nothing", "[devices][guard]") {
  set_current_device("sim:1");
  {
    OptionalDeviceGuard g(std::nullopt);
    CHECK_FALSE(g.device().has_value());
    CHECK_FALSE(g.original_device().has_value());
    CHECK(current_device() == Device("sim:1"));
    set_current_device("sim:0");  // not the guard's to undo
  }
  CHECK(current_device() == Device("sim:0"));
  set_current_device("cpu");
}

TEST_CASE("OptionalDeviceGuard with a device guards it like DeviceGuard", "[devices][guard]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"), Device("sim:1"));
  INFO("device " << d);
  set_current_device("sim:1");
  {
    OptionalDeviceGuard g{std::optional<Device>(d)};
    REQUIRE(g.device().has_value());
    CHECK(*g.device() == d);
    CHECK(*g.original_device() == Device("sim:1"));
    CHECK(current_device() == d);
  }
  CHECK(current_device() == Device("sim:1"));
  CHECK_THROWS_AS(OptionalDeviceGuard(std::optional<Device>(Device("sim:7"))), DeviceError);
  CHECK(current_device() == Device("sim:1"));
  set_current_device("cpu");
}

TEST_CASE("an explicit device wins over the guard", "[devices][guard]") {
  DeviceGuard g("sim:1");
  CHECK(Storage::allocate(16, Device("sim:0")).device() == Device("sim:0"));
  CHECK(Storage::allocate(16, Device("cpu")).device() == Device("cpu"));
  CHECK(Stream::create("sim:0").device() == Device("sim:0"));
}

TEST_CASE("a StreamGuard on a stream of sim:1 also makes sim:1 current", "[devices][guard]") {
  const Stream side = Stream::create("sim:1");
  CHECK(current_device() == Device("cpu"));
  {
    StreamGuard g(side);
    CHECK(current_device() == Device("sim:1"));
    CHECK(current_stream("sim:1") == side);
    CHECK(current_stream("sim") == side);
    CHECK(Storage::allocate(8).stream() == side);
  }
  CHECK(current_device() == Device("cpu"));
  CHECK(current_stream("sim:1").is_default());
}

TEST_CASE("helpers for device-agnostic code", "[devices]") {
  CHECK(device_count(DeviceType::kSim) == 2);
  CHECK(try_device(DeviceType::kSim, 1) == Device("sim:1"));
  CHECK(try_device(DeviceType::kSim, 5) == Device("cpu"));
  CHECK(all_devices(DeviceType::kSim) == std::vector<Device>{Device("sim:0"), Device("sim:1")});
  if (!is_available(DeviceType::kCuda)) {
    CHECK(try_device(DeviceType::kCuda) == Device("cpu"));
    CHECK(all_devices(DeviceType::kCuda) == std::vector<Device>{Device("cpu")});
    CHECK(default_device() == Device("sim:0"));
  } else {
    CHECK(default_device() == Device("cuda:0"));
  }
}

}  // namespace
}  // namespace streamgrad
