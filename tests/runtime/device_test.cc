#include "runtime/base/device.h"

#include <catch2/catch.hpp>
#include <sstream>
#include <unordered_set>

#include "runtime/base/error.h"

namespace streamgrad {
namespace {

TEST_CASE("Device parses and prints every form", "[device]") {
  CHECK(Device("cpu") == Device(DeviceType::kCpu, 0));
  CHECK(Device("cpu:0") == Device(DeviceType::kCpu, 0));
  CHECK(Device("sim:1") == Device(DeviceType::kSim, 1));
  CHECK(Device("cuda:0") == Device(DeviceType::kCuda, 0));
  CHECK(Device("cuda").index() == -1);
  CHECK_FALSE(Device("sim").has_index());
  CHECK(Device("sim:12").str() == "sim:12");
  CHECK(Device("cpu").str() == "cpu");
  CHECK(Device("cuda").str() == "cuda");
  std::ostringstream os;
  os << Device("sim:3");
  CHECK(os.str() == "sim:3");
}

TEST_CASE("Device is a hashable, ordered value", "[device]") {
  std::unordered_set<Device> set{Device("sim:0"), Device("sim:1"), Device("sim:0"), Device("cpu")};
  CHECK(set.size() == 3);
  CHECK(Device("cpu") < Device("sim:0"));
  CHECK(Device("sim:0") < Device("sim:1"));
  CHECK(Device("sim:1") != Device("cuda:1"));
}

TEST_CASE("Malformed device strings are a clear ValueError", "[device][errors]") {
  for (const char* bad : {"sim:-1", "gpu:0", "cuda:x", "", "sim:", "cpu:1", "sim:1:2", "SIM:0",
                          "sim:999", " sim:0"}) {
    INFO("spec = \"" << bad << "\"");
    try {
      Device d(bad);
      FAIL("no error for " << bad);
    } catch (const ValueError& e) {
      const std::string msg = e.what();
      CHECK(msg.find("invalid device string") != std::string::npos);
      CHECK(msg.find(std::string("\"") + bad + "\"") != std::string::npos);
    }
  }
  CHECK_THROWS_AS(Device(DeviceType::kSim, -2), ValueError);
  CHECK_THROWS_AS(Device(DeviceType::kCpu, 1), ValueError);
  CHECK_THROWS_WITH(Device("gpu:0"), Catch::Contains("unknown device type \"gpu\""));
}

}  // namespace
}  // namespace streamgrad
