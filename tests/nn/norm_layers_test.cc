// nn::LayerNorm, nn::RMSNorm and nn::GroupNorm (nn/layers.h): parameters as the reference
// registers and initialises them, forward through the ops, training, clones and moves,
// checkpoints, and the errors of a bad configuration.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/backward.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "nn/checkpoint.h"
#include "nn/layers.h"
#include "nn/optim.h"
#include "ops/ops.h"
#include "runtime/runtime.h"
#include "tests/device_names.h"

namespace streamgrad {
namespace {

std::vector<std::string> names(const nn::NamedTensors& t) {
  std::vector<std::string> out;
  for (const auto& [name, tensor] : t) out.push_back(name);
  return out;
}

std::vector<float> floats(const Tensor& t) { return to(t, Device("cpu")).to_vector<float>(); }

TEST_CASE("LayerNorm and RMSNorm register the reference's parameters", "[nn][norm]") {
  nn::LayerNorm ln(Shape{2, 3});
  CHECK(names(ln.named_parameters()) == std::vector<std::string>{"weight", "bias"});
  CHECK(ln.weight.sizes() == Shape{2, 3});
  CHECK(floats(ln.weight) == std::vector<float>(6, 1.0f));
  CHECK(floats(ln.bias) == std::vector<float>(6, 0.0f));
  CHECK(ln.weight.requires_grad());
  CHECK(ln.eps == 1e-5);
  CHECK(ln.type_name() == "LayerNorm");
  CHECK(names(nn::LayerNorm(4, 1e-5, true, /*bias=*/false).named_parameters()) ==
        std::vector<std::string>{"weight"});
  CHECK(nn::LayerNorm(4, 1e-5, /*elementwise_affine=*/false).named_parameters().empty());
  CHECK(nn::LayerNorm({8}).weight.sizes() == Shape{8});

  nn::RMSNorm rms(4);
  CHECK(names(rms.named_parameters()) == std::vector<std::string>{"weight"});
  CHECK(floats(rms.weight) == std::vector<float>(4, 1.0f));
  CHECK(!rms.eps.has_value());
  CHECK(rms.type_name() == "RMSNorm");
  CHECK(nn::RMSNorm(Shape{2, 2}, 1e-6, /*elementwise_affine=*/false).parameters().empty());
  CHECK(nn::LayerNorm(4).named_buffers().empty());
}

TEST_CASE("LayerNorm and RMSNorm forward through layer_norm and rms_norm, and train",
          "[nn][norm]") {
  const Device d(GENERATE(from_range(testing::device_names())));
  manual_seed(3);
  auto ln = std::make_shared<nn::LayerNorm>(Shape{3, 4}, 1e-3);
  auto rms = std::make_shared<nn::RMSNorm>(4, 1e-6);
  ln->to(d);
  rms->to(d);
  const Tensor x = randn({2, 3, 4}, TensorOptions().device(d));
  CHECK(floats(ln->forward(x)) == floats(layer_norm(x, {3, 4}, ln->weight, ln->bias, 1e-3)));
  CHECK(floats(rms->forward(x)) == floats(rms_norm(x, {4}, rms->weight, 1e-6)));
  // One SGD step moves the parameters by their gradients.
  std::vector<Tensor> params = ln->parameters();
  for (const Tensor& p : rms->parameters()) params.push_back(p);
  nn::SGD opt(params, nn::SGDOptions(0.5));
  const Tensor target = randn({2, 3, 4}, TensorOptions().device(d));
  const Tensor loss = mse_loss(rms->forward(ln->forward(x)), target);
  loss.backward();
  REQUIRE(ln->bias.grad().defined());
  REQUIRE(rms->weight.grad().defined());
  const std::vector<float> before = floats(ln->bias);
  const std::vector<float> g = floats(ln->bias.grad());
  opt.step();
  const std::vector<float> after = floats(ln->bias);
  for (size_t i = 0; i < g.size(); ++i) CHECK(after[i] == Approx(before[i] - 0.5f * g[i]));
}

TEST_CASE("LayerNorm and RMSNorm clone and round-trip through a checkpoint", "[nn][norm]") {
  auto net = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::LayerNorm>(4), std::make_shared<nn::RMSNorm>(4, 1e-4)});
  {
    NoGradGuard no_grad;
    for (Tensor& p : net->parameters()) copy_(p, randn(p.sizes()));
  }
  CHECK(names(net->state_dict()) == std::vector<std::string>{"0.weight", "0.bias", "1.weight"});
  const Tensor x = randn({3, 4});
  const std::vector<float> want = floats(net->forward(x));
  CHECK(floats(net->clone()->forward(x)) == want);

  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/norm_layers.safetensors";
  nn::save_checkpoint(path, *net);
  auto loaded = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::LayerNorm>(4), std::make_shared<nn::RMSNorm>(4, 1e-4)});
  CHECK(floats(loaded->forward(x)) != want);
  nn::load_checkpoint(path, *loaded);
  CHECK(floats(loaded->forward(x)) == want);
  // A layer of another shape refuses the file, naming the key.
  nn::Sequential other({std::make_shared<nn::LayerNorm>(5), std::make_shared<nn::RMSNorm>(4)});
  CHECK_THROWS_WITH(nn::load_checkpoint(path, other), Catch::Contains("0.weight"));
}

TEST_CASE("LayerNorm and RMSNorm refuse bad configurations and inputs", "[nn][norm][errors]") {
  CHECK_THROWS_WITH(nn::LayerNorm(Shape{}), Catch::Contains("LayerNorm: normalized_shape"));
  CHECK_THROWS_WITH(nn::RMSNorm(Shape{4, 0}), Catch::Contains("RMSNorm"));
  CHECK_THROWS_WITH(nn::LayerNorm(4).forward(zeros({2, 5})),
                    Catch::Contains("layer_norm: normalized_shape [4]"));
  CHECK_THROWS_WITH(nn::RMSNorm(Shape{2, 4}).forward(zeros({4, 2})),
                    Catch::Contains("rms_norm: normalized_shape [2, 4]"));
}

TEST_CASE("GroupNorm registers the reference's parameters and forwards through group_norm",
          "[nn][norm]") {
  nn::GroupNorm gn(2, 6);
  CHECK(names(gn.named_parameters()) == std::vector<std::string>{"weight", "bias"});
  CHECK(floats(gn.weight) == std::vector<float>(6, 1.0f));
  CHECK(floats(gn.bias) == std::vector<float>(6, 0.0f));
  CHECK(gn.eps == 1e-5);
  CHECK(gn.type_name() == "GroupNorm");
  CHECK(gn.named_buffers().empty());
  CHECK(nn::GroupNorm(3, 6, 1e-5, /*affine=*/false).named_parameters().empty());

  const Device d(GENERATE(from_range(testing::device_names())));
  manual_seed(5);
  auto m = std::make_shared<nn::GroupNorm>(3, 6, 1e-3);
  {
    NoGradGuard no_grad;
    for (Tensor& p : m->parameters()) copy_(p, randn(p.sizes()));
  }
  m->to(d);
  const Tensor x = randn({2, 6, 2, 3}, TensorOptions().device(d)).requires_grad_(true);
  const Tensor y = m->forward(x);
  CHECK(floats(y) == floats(group_norm(x, 3, m->weight, m->bias, 1e-3)));
  sum(mul(y, y)).backward();
  CHECK(m->weight.grad().defined());
  CHECK(m->bias.grad().defined());
  CHECK(x.grad().defined());
  CHECK(floats(m->clone()->forward(x)) == floats(y));
  // Without affine: the op alone, on any channel count num_groups divides.
  CHECK(floats(nn::GroupNorm(3, 6, 1e-5, false).forward(to(x, Device("cpu")))) ==
        floats(group_norm(to(x, Device("cpu")), 3)));
}

TEST_CASE("GroupNorm refuses bad configurations and inputs", "[nn][norm][errors]") {
  CHECK_THROWS_WITH(nn::GroupNorm(4, 6),
                    Catch::Contains("GroupNorm: num_channels 6 must be divisible by num_groups 4"));
  CHECK_THROWS_WITH(nn::GroupNorm(0, 6), Catch::Contains("GroupNorm: num_groups"));
  CHECK_THROWS_WITH(nn::GroupNorm(2, 4).forward(zeros({2, 6, 3})),
                    Catch::Contains("GroupNorm: input float32[2, 6, 3]") &&
                        Catch::Contains("num_channels 4"));
  CHECK_THROWS_WITH(nn::GroupNorm(2, 4).forward(zeros({4})),
                    Catch::Contains("group_norm: expected an [N, C]"));
}

}  // namespace
}  // namespace streamgrad
