// STREAMGRAD_SIM_DEVICES=4 and STREAMGRAD_VISIBLE_DEVICES=2,0 (set by the BUILD target):
// two visible devices, in the listed order.
#include <catch2/catch.hpp>

#include "runtime/backend/backend.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace {

TEST_CASE("visible devices mask and reorder the sim devices", "[devices][masking]") {
  REQUIRE(config().sim_devices == 4);
  CHECK(device_count(DeviceType::kSim) == 2);
  CHECK(backend(DeviceType::kSim).device_name(0).find("physical 2") != std::string::npos);
  CHECK(backend(DeviceType::kSim).device_name(1).find("physical 0") != std::string::npos);
  CHECK_NOTHROW(Stream::create("sim:1"));
  CHECK_THROWS_WITH(Stream::create("sim:2"), Catch::Contains("STREAMGRAD_VISIBLE_DEVICES"));
}

}  // namespace
}  // namespace streamgrad
