// The lean library (//:streamgrad_lean): cpu and sim work as in the full one, and what it
// leaves out (the cuda device, the process-group backends) is an error that says which
// library to link, not a crash or a missing symbol.
#include <catch2/catch.hpp>

#include <memory>

#include "streamgrad.h"

using namespace streamgrad;

TEST_CASE("the lean library trains on cpu and on sim", "[lean]") {
  for (Device d : {Device(DeviceType::kCpu), Device(DeviceType::kSim, 0)}) {
    Tensor x = ones({2, 3}, TensorOptions().device(d)).requires_grad_();
    Tensor loss = sum(mul(x, x));
    loss.backward();
    CHECK(x.grad().to(Device(DeviceType::kCpu)).sum().item<float>() == 12.0f);
  }
}

TEST_CASE("the lean library has no cuda device and says what to link", "[lean][errors]") {
  CHECK_FALSE(is_available(DeviceType::kCuda));
  CHECK(device_count(DeviceType::kCuda) == 0);
  CHECK(try_device(DeviceType::kCuda) == Device(DeviceType::kCpu));
  CHECK_THROWS_WITH(zeros({2}, TensorOptions().device(Device(DeviceType::kCuda, 0))),
                    Catch::Contains("lean library (//:streamgrad_lean)"));
}

TEST_CASE("the lean library has no process-group backend and says what to link",
          "[lean][errors]") {
  auto store = std::make_shared<distributed::TCPStore>("127.0.0.1", 0, 1, true);
  CHECK_THROWS_WITH(distributed::init_process_group("gloo", 0, 1, store),
                    Catch::Contains("backend 'gloo' is not in this program") &&
                        Catch::Contains("link //:streamgrad"));
  CHECK_THROWS_AS(distributed::init_process_group("nccl", 0, 1, store), DistributedError);
}
