// Module::clone, replicate and DataParallel on sim:0 and sim:1 — behaviours of the
// reference framework's nn.DataParallel and replicate (test/distributed/
// test_data_parallel.py: gradients equal to the single-device module's, buffers of the
// first replica kept, a 0-d output per replica gathered into a vector, the placement
// check) and of libtorch's clone (test/cpp/api/module.cpp) ported to Catch2.
#include <catch2/catch.hpp>

#include <cmath>

#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/optim.h"
#include "nn/parallel/data_parallel.h"
#include "nn/parallel/replicate.h"
#include "ops/ops.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace {

using nn::parallel::DataParallel;
using nn::parallel::replicate;

const Device kSim0("sim:0"), kSim1("sim:1");
const std::vector<Device> kTwo{kSim0, kSim1};

std::vector<float> values(const Tensor& t) { return to(t, Device("cpu")).to_vector<float>(); }

// Within float32 rounding of sums taken in another order.
void check_close(const Tensor& got, const Tensor& want, double tol = 1e-5) {
  const std::vector<float> g = values(got), w = values(want);
  REQUIRE(g.size() == w.size());
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i << ": got " << g[i] << ", want " << w[i]);
    CHECK(std::abs(g[i] - w[i]) <= tol * (1 + std::abs(w[i])));
  }
}

std::shared_ptr<nn::Sequential> mlp() {
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(6, 8), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(8, 3)});
}

std::shared_ptr<nn::Sequential> convnet(bool batch_norm) {
  std::vector<std::shared_ptr<nn::Module>> layers{std::make_shared<nn::Conv2d>(2, 4, 3)};
  if (batch_norm) layers.push_back(std::make_shared<nn::BatchNorm2d>(4));
  layers.push_back(std::make_shared<nn::ReLU>());
  layers.push_back(std::make_shared<nn::MaxPool2d>(2));
  layers.push_back(std::make_shared<nn::Flatten>());
  layers.push_back(std::make_shared<nn::Linear>(16, 3));
  return std::make_shared<nn::Sequential>(layers);
}

TEST_CASE("clone is a deep copy that draws no random numbers", "[nn][clone]") {
  manual_seed(1);
  auto net = convnet(true);
  net->to(kSim0);
  (*net)[1]->eval();  // the batch norm only
  net->forward(randn({2, 2, 6, 6}, TensorOptions().device(kSim0)));  // one batch counted
  manual_seed(7);
  const std::shared_ptr<nn::Module> copy = net->clone();
  const float next = randn({1}).item<float>();
  manual_seed(7);
  CHECK(randn({1}).item<float>() == next);  // the copy moved no generator
  const nn::NamedTensors a = net->state_dict(), b = copy->state_dict();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    CHECK(b[i].first == a[i].first);
    CHECK(b[i].second.device() == kSim0);
    CHECK(b[i].second.data_ptr() != a[i].second.data_ptr());
    CHECK(b[i].second.requires_grad() == a[i].second.requires_grad());
    CHECK(b[i].second.is_leaf());
    CHECK(values(to(b[i].second, DType::kFloat32)) == values(to(a[i].second, DType::kFloat32)));
  }
  CHECK(copy->is_training());
  CHECK_FALSE(copy->named_modules()[1].second->is_training());
  // The batch count continues from the original's.
  auto bn = std::dynamic_pointer_cast<nn::BatchNorm2d>(copy->named_modules()[1].second);
  REQUIRE(bn != nullptr);
  bn->train();
  bn->forward(randn({2, 4, 3, 3}, TensorOptions().device(kSim0)));
  CHECK(bn->num_batches_tracked.item<int64_t>() == 1);  // the original counted none in eval
}

TEST_CASE("a module without blank_copy cannot be cloned or replicated, and says so",
          "[nn][clone]") {
  struct Custom : nn::Module {
    Custom() : Module("Custom") { register_parameter("w", ones({2})); }
  };
  auto custom = std::make_shared<Custom>();
  CHECK_THROWS_WITH(custom->clone(), Catch::Contains("Custom: blank_copy() is not implemented"));
  CHECK_THROWS_AS(replicate(custom, kTwo), ValueError);
  // A blank_copy that builds another module is caught, naming the tensor.
  struct Wrong : nn::Module {
    Wrong() : Module("Wrong") { register_parameter("w", ones({2})); }
    std::shared_ptr<Module> blank_copy() const override {
      return std::make_shared<nn::Linear>(2, 2);
    }
  };
  CHECK_THROWS_WITH(std::make_shared<Wrong>()->clone(),
                    Catch::Contains("blank_copy() must build the same module"));
}

TEST_CASE("replicas' parameters are differentiable copies; gradients sum on the module",
          "[nn][parallel][replicate]") {
  manual_seed(2);
  auto net = mlp();
  net->to(kSim0);
  const auto replicas = replicate(net, kTwo);
  REQUIRE(replicas.size() == 2);
  const nn::NamedTensors p = net->named_parameters();
  for (size_t r = 0; r < 2; ++r) {
    const nn::NamedTensors q = replicas[r]->named_parameters();
    for (size_t i = 0; i < p.size(); ++i) {
      INFO("replica " << r << " " << q[i].first);
      CHECK(q[i].second.device() == kTwo[r]);
      CHECK_FALSE(q[i].second.is_leaf());
      CHECK(values(q[i].second) == values(p[i].second));
    }
  }
  // Replica 0's parameters are views of the module's: no copy on the module's device.
  CHECK(replicas[0]->parameters()[0].data_ptr() == net->parameters()[0].data_ptr());
  const Tensor x = randn({4, 6});
  Tensor loss = add(sum(replicas[0]->forward(to(x, kSim0))),
                    to(sum(replicas[1]->forward(to(x, kSim1))), kSim0));
  loss.backward();
  // Both replicas saw the same input: the module's gradient is twice one replica's.
  auto single = net->clone();
  sum(single->forward(to(x, kSim0))).backward();
  const std::vector<Tensor> got = net->parameters(), one = single->parameters();
  for (size_t i = 0; i < got.size(); ++i) {
    REQUIRE(got[i].grad().defined());
    CHECK(got[i].grad().device() == kSim0);
    check_close(got[i].grad(), mul(one[i].grad(), 2.0));
  }
  for (const Tensor& q : replicas[1]->parameters()) CHECK_FALSE(q.grad().defined());
}

TEST_CASE("replicate shares the first replica's buffers with the module and keeps modes",
          "[nn][parallel][replicate]") {
  auto net = convnet(true);
  net->to(kSim0);
  net->eval();
  const auto replicas = replicate(net, kTwo);
  const Tensor mean = net->named_buffers()[0].second;
  CHECK(replicas[0]->named_buffers()[0].second.data_ptr() == mean.data_ptr());
  CHECK(replicas[1]->named_buffers()[0].second.device() == kSim1);
  CHECK_FALSE(replicas[1]->is_training());
  CHECK_FALSE(replicas[1]->named_modules()[1].second->is_training());
  NoGradGuard no_grad;
  for (const Tensor& q : replicate(net, kTwo)[1]->parameters()) CHECK(q.is_leaf());
}

TEST_CASE("DataParallel over sim:0 and sim:1 gives the single-device gradients",
          "[nn][parallel][data_parallel]") {
  const bool conv = GENERATE(false, true);
  INFO((conv ? "convnet" : "mlp"));
  manual_seed(3);
  std::shared_ptr<nn::Module> net = conv ? std::shared_ptr<nn::Module>(convnet(false)) : mlp();
  net->to(kSim0);
  std::shared_ptr<nn::Module> reference = net->clone();
  auto dp = std::make_shared<DataParallel>(net, kTwo);
  const Tensor x = conv ? randn({5, 2, 6, 6}) : randn({5, 6});
  const Tensor labels = to(from_vector<int64_t>({0, 1, 2, 0, 1}), kSim0);
  const Tensor out = dp->forward(x);
  CHECK(out.device() == kSim0);
  CHECK(out.sizes() == Shape{5, 3});
  cross_entropy(out, labels).backward();
  const Tensor ref_out = reference->forward(to(x, kSim0));
  check_close(out, ref_out);
  cross_entropy(ref_out, labels).backward();
  const nn::NamedTensors got = dp->named_parameters(), want = reference->named_parameters();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(got[i].first);
    CHECK(got[i].first == "module." + want[i].first);
    REQUIRE(got[i].second.grad().defined());
    check_close(got[i].second.grad(), want[i].second.grad());
  }
}

TEST_CASE("DataParallel training steps follow single-device training",
          "[nn][parallel][data_parallel]") {
  manual_seed(4);
  auto net = mlp();
  net->to(kSim0);
  auto reference = net->clone();
  auto dp = std::make_shared<DataParallel>(net, kTwo);
  nn::SGD opt(dp->parameters(), nn::SGDOptions(0.1).momentum(0.9));
  nn::SGD ref_opt(reference->parameters(), nn::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < 5; ++step) {
    const Tensor x = randn({8, 6});
    const Tensor y = to(from_vector<int64_t>({0, 1, 2, 0, 1, 2, 0, 1}), kSim0);
    opt.zero_grad();
    cross_entropy(dp->forward(x), y).backward();
    opt.step();
    ref_opt.zero_grad();
    cross_entropy(reference->forward(to(x, kSim0)), y).backward();
    ref_opt.step();
  }
  const std::vector<Tensor> a = net->parameters(), b = reference->parameters();
  for (size_t i = 0; i < a.size(); ++i) check_close(a[i], b[i], 1e-4);
}

TEST_CASE("DataParallel keeps the first replica's buffer updates and batch counts",
          "[nn][parallel][data_parallel]") {
  manual_seed(5);
  auto net = convnet(true);
  net->to(kSim0);
  auto probe = net->clone();  // the same module run on the first replica's chunk alone
  auto dp = std::make_shared<DataParallel>(net, kTwo);
  const Tensor x = randn({4, 2, 6, 6});
  dp->forward(x);
  probe->forward(to(narrow(x, 0, 0, 2), kSim0));
  const nn::NamedTensors got = net->named_buffers(), want = probe->named_buffers();
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(got[i].first);
    check_close(to(got[i].second, DType::kFloat32), to(want[i].second, DType::kFloat32));
  }
  dp->forward(x);
  auto bn = std::dynamic_pointer_cast<nn::BatchNorm2d>((*net)[1]);
  CHECK(bn->num_batches_tracked.item<int64_t>() == 2);
}

TEST_CASE("DataParallel gathers a 0-d output per replica into a vector",
          "[nn][parallel][data_parallel]") {
  struct SumNet : nn::Module {
    SumNet() : Module("SumNet") { fc = register_module("fc", std::make_shared<nn::Linear>(3, 2)); }
    Tensor forward(const Tensor& x) override { return sum(fc->forward(x)); }
    std::shared_ptr<nn::Module> blank_copy() const override {
      nn::init::NoInitGuard no_init;
      return std::make_shared<SumNet>();
    }
    std::shared_ptr<nn::Linear> fc;
  };
  auto net = std::make_shared<SumNet>();
  net->to(kSim0);
  DataParallel dp(net, kTwo);
  const Tensor x = randn({4, 3});
  const Tensor out = dp.forward(x);
  CHECK(out.sizes() == Shape{2});
  check_close(sum(out), net->forward(to(x, kSim0)));
}

TEST_CASE("DataParallel refuses a misplaced module, a small batch and mixed devices",
          "[nn][parallel][data_parallel]") {
  auto net = mlp();
  net->to(kSim1);
  CHECK_THROWS_WITH(DataParallel(net, kTwo),
                    Catch::Contains("device_ids[0] = sim:0") && Catch::Contains("is on sim:1"));
  net->to(kSim0);
  DataParallel dp(net, kTwo);
  CHECK_THROWS_WITH(dp.forward(randn({1, 6})),
                    Catch::Contains("a batch of 1") && Catch::Contains("2 devices"));
  CHECK_THROWS_WITH(DataParallel(net, {kSim0, Device("cpu")}),
                    Catch::Contains("different types"));
  // One device: the module's own forward, nothing replicated.
  DataParallel one(net, {kSim0});
  const Tensor x = randn({3, 6});
  CHECK(values(one.forward(x)) == values(net->forward(to(x, kSim0))));
}

}  // namespace
}  // namespace streamgrad
