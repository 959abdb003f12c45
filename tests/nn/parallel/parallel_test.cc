// nn::parallel's scatter, gather and parallel_apply on the sim devices — behaviours of the
// reference framework's torch.nn.parallel (test/distributed/test_data_parallel.py:
// scatter's chunk sizes, gather of 0-d outputs into a vector, parallel_apply's outputs
// and the replica and device named in its errors) ported to Catch2.
#include "nn/parallel/parallel.h"

#include <catch2/catch.hpp>
#include <mutex>
#include <set>
#include <thread>

#include "engine/backward.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "nn/layers.h"
#include "ops/ops.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace {

using nn::parallel::gather;
using nn::parallel::parallel_apply;
using nn::parallel::scatter;

const std::vector<Device> kTwo{Device("sim:0"), Device("sim:1")};

Tensor arange_rows(int64_t rows, int64_t cols, Device d) {
  return reshape(arange(0, static_cast<double>(rows * cols), 1,
                        TensorOptions().dtype(DType::kFloat32).device(d)),
                 {rows, cols});
}

std::vector<float> values(const Tensor& t) { return to(t, Device("cpu")).to_vector<float>(); }

TEST_CASE("scatter splits as chunk() does and copies part i to device i", "[nn][parallel]") {
  const Tensor x = arange_rows(5, 2, Device("cpu"));
  const std::vector<Tensor> two = scatter(x, kTwo);
  REQUIRE(two.size() == 2);
  CHECK(two[0].sizes() == Shape{3, 2});
  CHECK(two[1].sizes() == Shape{2, 2});
  CHECK(two[0].device() == Device("sim:0"));
  CHECK(two[1].device() == Device("sim:1"));
  CHECK(values(two[1]) == std::vector<float>{6, 7, 8, 9});
  // 5 rows over 4 devices: parts of 2, 2 and 1, so only three devices get one.
  const std::vector<Device> four{Device("sim:0"), Device("sim:1"), Device("sim:0"),
                                 Device("sim:1")};
  const std::vector<Tensor> parts = scatter(x, four);
  REQUIRE(parts.size() == 3);
  CHECK(parts[2].sizes() == Shape{1, 2});
  // Along another dim, negative dims counting from the end.
  const std::vector<Tensor> cols = scatter(x, kTwo, -1);
  REQUIRE(cols.size() == 2);
  CHECK(cols[0].sizes() == Shape{5, 1});
  CHECK(values(cols[1]) == std::vector<float>{1, 3, 5, 7, 9});
}

TEST_CASE("scatter and gather refuse what cannot be split or joined", "[nn][parallel]") {
  const Tensor x = arange_rows(4, 2, Device("cpu"));
  CHECK_THROWS_WITH(scatter(x, {}), Catch::Contains("no devices"));
  CHECK_THROWS_AS(scatter(x, kTwo, 2), ValueError);
  CHECK_THROWS_WITH(scatter(sum(x), kTwo), Catch::Contains("0-d"));
  CHECK_THROWS_WITH(gather({}, Device("sim:0")), Catch::Contains("no tensors"));
  CHECK_THROWS_WITH(gather({sum(x), x}, Device("sim:0")), Catch::Contains("mixes 0-d"));
  CHECK_THROWS_AS(gather({x, arange_rows(4, 3, Device("cpu"))}, Device("sim:0")), ValueError);
}

TEST_CASE("gather concatenates on one device; 0-d tensors become a vector", "[nn][parallel]") {
  const Tensor x = arange_rows(4, 2, Device("cpu"));
  const std::vector<Tensor> parts = scatter(x, kTwo);
  const Tensor back = gather(parts, Device("sim:1"));
  CHECK(back.device() == Device("sim:1"));
  CHECK(values(back) == values(x));
  const Tensor losses = gather({sum(parts[0]), sum(parts[1])}, Device("sim:0"));
  CHECK(losses.sizes() == Shape{2});
  CHECK(values(losses) == std::vector<float>{6, 22});
}

TEST_CASE("scatter and gather are differentiable across devices", "[nn][parallel]") {
  Tensor x = arange_rows(6, 3, Device("sim:0"));
  x.requires_grad_();
  std::vector<Tensor> parts = scatter(x, kTwo);
  parts[1] = mul(parts[1], 3.0);  // work on sim:1 before the gather
  const Tensor y = gather(parts, Device("cpu"));
  sum(y).backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().device() == Device("sim:0"));  // S7: the gradient comes home
  const std::vector<float> g = values(x.grad());
  for (size_t i = 0; i < g.size(); ++i) CHECK(g[i] == (i < 9 ? 1.0f : 3.0f));
}

// Records where and how its forward ran.
struct Probe : nn::Module {
  Probe() : Module("Probe") {}
  Tensor forward(const Tensor& x) override {
    seen_thread = std::this_thread::get_id();
    seen_stream = current_stream(x.device());
    seen_device = current_device();
    seen_grad_mode = grad_mode_enabled();
    if (fail) throw DeviceError("probe failed on purpose");
    return mul(x, 2.0);
  }
  std::thread::id seen_thread;
  Stream seen_stream = Stream::default_for(Device("cpu"));
  Device seen_device = Device("cpu");
  bool seen_grad_mode = false;
  bool fail = false;
};

TEST_CASE("parallel_apply runs each module on its own thread, device and stream",
          "[nn][parallel]") {
  auto a = std::make_shared<Probe>(), b = std::make_shared<Probe>();
  const Tensor x = arange_rows(4, 2, Device("cpu"));
  const Stream side = Stream::create(Device("sim:1"));
  {
    StreamGuard caller(side);  // the caller's current stream of sim:1: the workers use it
    const std::vector<Tensor> parts = scatter(x, kTwo);
    const std::vector<Tensor> outs = parallel_apply({a, b}, parts);
    REQUIRE(outs.size() == 2);
    CHECK(outs[1].device() == Device("sim:1"));
    // Read while `side` is still current: outs[1] was made there (reading it on sim:1's
    // default stream without a wait would be a race, which the stream sanitizer reports).
    CHECK(values(gather(outs, Device("cpu"))) == values(mul(x, 2.0)));
  }
  CHECK(a->seen_thread != b->seen_thread);
  CHECK(a->seen_device == Device("sim:0"));
  CHECK(b->seen_device == Device("sim:1"));
  CHECK(b->seen_stream == side);
  CHECK(a->seen_stream == Stream::default_for(Device("sim:0")));
  CHECK(a->seen_grad_mode);
  {
    NoGradGuard no_grad;  // the caller's grad mode reaches the workers
    parallel_apply({a, b}, scatter(x, kTwo));
  }
  CHECK_FALSE(a->seen_grad_mode);
  CHECK_FALSE(b->seen_grad_mode);
}

TEST_CASE("parallel_apply reports a failing replica by index and device, type kept",
          "[nn][parallel]") {
  auto a = std::make_shared<Probe>(), b = std::make_shared<Probe>();
  b->fail = true;
  const std::vector<Tensor> parts = scatter(arange_rows(4, 2, Device("cpu")), kTwo);
  CHECK_THROWS_AS(parallel_apply({a, b}, parts), DeviceError);
  CHECK_THROWS_WITH(parallel_apply({a, b}, parts), Catch::Contains("replica 1 on sim:1") &&
                                                       Catch::Contains("probe failed on purpose"));
  CHECK_THROWS_WITH(parallel_apply({a}, parts), Catch::Contains("1 modules but 2 inputs"));
}

TEST_CASE("parallel_apply of two Linear layers equals each layer's own forward", "[nn][parallel]") {
  manual_seed(3);
  auto l0 = std::make_shared<nn::Linear>(3, 4), l1 = std::make_shared<nn::Linear>(3, 4);
  l0->to(Device("sim:0"));
  l1->to(Device("sim:1"));
  const Tensor x = randn({6, 3}, TensorOptions().device(Device("cpu")));
  const std::vector<Tensor> parts = scatter(x, kTwo);
  const std::vector<Tensor> outs = parallel_apply({l0, l1}, parts);
  CHECK(values(outs[0]) == values(l0->forward(parts[0])));
  CHECK(values(outs[1]) == values(l1->forward(parts[1])));
}

}  // namespace
}  // namespace streamgrad
