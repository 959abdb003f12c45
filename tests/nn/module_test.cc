// nn::Module and the layers: names, sharing, train/eval, moves between devices,
// zero_grad and state dicts — behaviours of torch::nn::Module (test/cpp/api/module.cpp,
// test/test_nn.py's state_dict tests) ported to Catch2.
#include <catch2/catch.hpp>

#include <cmath>

#include "engine/factories.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/optim.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace {

std::vector<std::string> names(const nn::NamedTensors& list) {
  std::vector<std::string> out;
  for (const auto& [n, t] : list) out.push_back(n);
  return out;
}

struct Net : nn::Module {
  Net() : Module("Net") {
    body = register_module("body", std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
                                       std::make_shared<nn::Linear>(4, 3), std::make_shared<nn::ReLU>(),
                                       std::make_shared<nn::BatchNorm2d>(3)}));
    head = register_module("head", std::make_shared<nn::Linear>(3, 2, /*bias=*/false));
  }
  std::shared_ptr<nn::Sequential> body;
  std::shared_ptr<nn::Linear> head;
};

TEST_CASE("parameters and buffers have dotted names in registration order", "[nn][module]") {
  Net net;
  CHECK(names(net.named_parameters()) ==
        std::vector<std::string>{"body.0.weight", "body.0.bias", "body.2.weight", "body.2.bias",
                                 "head.weight"});
  CHECK(names(net.named_buffers()) == std::vector<std::string>{
                                          "body.2.running_mean", "body.2.running_var",
                                          "body.2.num_batches_tracked"});
  CHECK(names(net.named_parameters(/*recurse=*/false)).empty());
  CHECK(net.state_dict().size() == 8);
  CHECK(net.named_modules().size() == 5);  // body, its three layers, head
  CHECK(net.head->weight.sizes() == Shape{2, 3});
}

TEST_CASE("a module shared by two parents is listed once", "[nn][module]") {
  auto shared = std::make_shared<nn::Linear>(2, 2);
  nn::Sequential seq({shared, std::make_shared<nn::ReLU>(), shared});
  CHECK(seq.parameters().size() == 2);
  CHECK(names(seq.named_parameters()) == std::vector<std::string>{"0.weight", "0.bias"});
}

TEST_CASE("train and eval reach every submodule", "[nn][module]") {
  Net net;
  CHECK(net.body->is_training());
  net.eval();
  CHECK_FALSE(net.is_training());
  for (const auto& [path, m] : net.named_modules()) CHECK_FALSE(m->is_training());
  net.train();
  CHECK((*net.body)[2]->is_training());
}

TEST_CASE("Linear and Conv2d initialise as PyTorch: kaiming uniform bounds", "[nn][init]") {
  manual_seed(0);
  nn::Linear fc(400, 50);
  const double bound = 1 / std::sqrt(400.0);  // kaiming_uniform_(a = sqrt(5)) gives 1/sqrt(fan_in)
  double max_w = 0, sum_sq = 0;
  for (float v : fc.weight.to_vector<float>()) {
    max_w = std::max(max_w, std::abs(double(v)));
    sum_sq += double(v) * v;
  }
  CHECK(max_w <= bound);
  CHECK(max_w > 0.95 * bound);
  CHECK(std::sqrt(sum_sq / fc.weight.numel()) == Approx(bound / std::sqrt(3.0)).epsilon(0.05));
  for (float v : fc.bias.to_vector<float>()) CHECK(std::abs(v) <= bound);
  nn::Conv2d conv(3, 8, 3);
  CHECK(nn::init::calculate_fan_in_and_fan_out(conv.weight) == std::pair<int64_t, int64_t>{27, 72});
}

TEST_CASE("ConvTranspose2d: the reference's weight layout, initialisation and output size",
          "[nn][init]") {
  manual_seed(1);
  ConvTranspose2dParams p;
  p.stride = {2, 2};
  p.padding = {1, 1};
  p.output_padding = {1, 1};
  p.groups = 2;
  nn::ConvTranspose2d up(4, 6, 3, p);
  CHECK(up.weight.sizes() == Shape({4, 3, 3, 3}));
  CHECK(up.bias.sizes() == Shape({6}));
  const double bound = 1 / std::sqrt(27.0);  // fan-in from dim 1: 3 * 3 * 3
  for (float v : up.bias.to_vector<float>()) CHECK(std::abs(v) <= bound);
  double max_w = 0;
  for (float v : up.weight.to_vector<float>()) max_w = std::max(max_w, std::abs(double(v)));
  CHECK(max_w <= bound);
  CHECK(max_w > 0.8 * bound);
  CHECK(up.forward(randn({2, 4, 5, 5})).sizes() == Shape({2, 6, 10, 10}));  // doubles H, W
  CHECK(up.blank_copy()->named_parameters().size() == 2);
  CHECK_THROWS_WITH(nn::ConvTranspose2d(3, 4, 3, p), Catch::Contains("ConvTranspose2d: groups 2"));
}

TEST_CASE("Upsample is interpolate with its options", "[nn][layers]") {
  InterpolateOptions o;
  o.scale_factor = {2};
  o.mode = "bilinear";
  nn::Upsample up(o);
  const Tensor x = randn({1, 2, 3, 3});
  CHECK(up.forward(x).to_vector<float>() == interpolate(x, o).to_vector<float>());
  CHECK(up.forward(x).sizes() == Shape({1, 2, 6, 6}));
  CHECK(up.parameters().empty());
}

TEST_CASE("to(device) moves parameters in place: handles and optimisers follow", "[nn][module]") {
  Net net;
  nn::SGD opt(net.parameters(), nn::SGDOptions(0.1));
  const Tensor w = net.head->weight;
  const std::vector<float> before = w.to_vector<float>();
  net.to(Device("sim:0"));
  CHECK(w.device() == Device("sim:0"));
  CHECK(opt.params()[4].device() == Device("sim:0"));
  CHECK(net.body->named_buffers()[0].second.device() == Device("sim:0"));
  CHECK(w.to_vector<float>() == before);
  CHECK(w.requires_grad());
  CHECK(w.is_leaf());
  net.to(DType::kFloat64);
  CHECK(w.dtype() == DType::kFloat64);
  CHECK(net.named_buffers().back().first == "body.2.num_batches_tracked");
  CHECK(net.named_buffers().back().second.dtype() == DType::kInt64);  // integer buffers stay
}

TEST_CASE("a model split over cpu and sim:0 trains through the copies", "[nn][module]") {
  auto first = std::make_shared<nn::Linear>(3, 4);
  auto second = std::make_shared<nn::Linear>(4, 1);
  second->to(Device("sim:0"));
  const Tensor x = randn({5, 3});
  Tensor loss = sum(second->forward(to(relu(first->forward(x)), Device("sim:0"))));
  loss.backward();
  CHECK(first->weight.grad().device() == Device("cpu"));
  CHECK(second->weight.grad().device() == Device("sim:0"));
  first->zero_grad();
  CHECK_FALSE(first->weight.grad().defined());  // set to none, as PyTorch
}

TEST_CASE("load_state_dict copies values and refuses mismatches without changing anything",
          "[nn][module]") {
  Net a, b;
  b.load_state_dict(a.state_dict());
  CHECK(b.head->weight.to_vector<float>() == a.head->weight.to_vector<float>());
  const std::vector<float> kept = b.head->weight.to_vector<float>();
  nn::NamedTensors bad = Net().state_dict();
  bad[0].second = zeros({2, 2});  // first key's shape wrong; later keys fine
  CHECK_THROWS_WITH(b.load_state_dict(bad), Catch::Contains("body.0.weight") && Catch::Contains("[3, 4]"));
  const Net source;
  nn::NamedTensors missing = source.state_dict();
  missing.erase(missing.begin() + 6);  // body.2.num_batches_tracked
  CHECK_THROWS_WITH(b.load_state_dict(missing), Catch::Contains("num_batches_tracked"));
  nn::NamedTensors extra = Net().state_dict();
  extra.emplace_back("tail.weight", zeros({1}));
  CHECK_THROWS_WITH(b.load_state_dict(extra), Catch::Contains("unexpected key 'tail.weight'"));
  CHECK(b.head->weight.to_vector<float>() == kept);  // every failed load left it alone
  b.load_state_dict(missing, /*strict=*/false);  // what is there is loaded
  CHECK(b.head->weight.to_vector<float>() == source.head->weight.to_vector<float>());
}

TEST_CASE("module misuse is a clear error", "[nn][errors]") {
  CHECK_THROWS_AS(nn::Linear(0, 3), ValueError);
  CHECK_THROWS_WITH(nn::Conv2d(3, 4, 3, Conv2dParams{{1, 1}, {0, 0}, {1, 1}, 2}), Catch::Contains("groups"));
  CHECK_THROWS_AS(nn::Dropout(2.0), ValueError);
  CHECK_THROWS_AS(nn::Module().forward(zeros({1})), Error);
  CHECK_THROWS_WITH(nn::BatchNorm2d(3).forward(zeros({2, 3})), Catch::Contains("[N, C, H, W]"));
}

}  // namespace
}  // namespace streamgrad
