// ModuleList, ModuleDict and the activation modules: the behaviours of the reference's
// containers (test_nn.py's ModuleList / ModuleDict tests, test/cpp/api/modulelist.cpp and
// moduledict.cpp) ported to Catch2.
#include <catch2/catch.hpp>

#include "engine/factories.h"
#include "nn/containers.h"
#include "nn/layers.h"
#include "ops/ops.h"
#include "runtime/runtime.h"
#include "tests/device_names.h"

namespace streamgrad {
namespace {

using Modules = std::vector<std::shared_ptr<nn::Module>>;

std::vector<std::string> names(const nn::NamedTensors& list) {
  std::vector<std::string> out;
  for (const auto& [n, t] : list) out.push_back(n);
  return out;
}

struct Tower : nn::Module {
  Tower() : Module("Tower") {
    blocks = register_module("blocks", std::make_shared<nn::ModuleList>(Modules{
                                           std::make_shared<nn::Linear>(3, 3),
                                           std::make_shared<nn::GELU>(),
                                           std::make_shared<nn::Linear>(3, 2)}));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (const auto& b : *blocks) h = b->forward(h);
    return h;
  }
  std::shared_ptr<nn::ModuleList> blocks;
};

TEST_CASE("ModuleList: children by index, parameters named by index, iteration in order",
          "[nn][containers]") {
  Tower t;
  CHECK(names(t.named_parameters()) == std::vector<std::string>{
                                           "blocks.0.weight", "blocks.0.bias", "blocks.2.weight",
                                           "blocks.2.bias"});
  CHECK(t.blocks->size() == 3);
  CHECK((*t.blocks)[-1] == (*t.blocks)[2]);
  CHECK((*t.blocks)[1]->type_name() == "GELU");
  t.blocks->push_back(std::make_shared<nn::Identity>());
  CHECK(t.blocks->size() == 4);
  CHECK(t.named_children()[0].second->named_children().back().first == "3");
  const Tensor y = t.forward(ones({5, 3}));
  CHECK(y.sizes() == Shape({5, 2}));
  REQUIRE_THROWS_AS((*t.blocks)[4], ValueError);
  REQUIRE_THROWS_AS((*t.blocks)[-5], ValueError);
  REQUIRE_THROWS_AS(t.blocks->forward(ones({1, 3})), Error);  // no forward of its own
}

TEST_CASE("ModuleList and ModuleDict clone with their children", "[nn][containers]") {
  Tower t;
  auto copy = std::dynamic_pointer_cast<nn::ModuleList>(t.blocks->clone());
  REQUIRE(copy != nullptr);
  REQUIRE(copy->size() == 3);
  CHECK((*copy)[0] != (*t.blocks)[0]);
  CHECK(names(copy->named_parameters()) == names(t.blocks->named_parameters()));
  nn::ModuleDict d(
      {{"a", std::make_shared<nn::Linear>(2, 2)}, {"b", std::make_shared<nn::SiLU>()}});
  auto dc = std::dynamic_pointer_cast<nn::ModuleDict>(d.clone());
  REQUIRE(dc != nullptr);
  CHECK(dc->keys() == std::vector<std::string>{"a", "b"});
}

TEST_CASE("ModuleDict: insertion order, replacement in place, pop, clear and errors",
          "[nn][containers]") {
  nn::ModuleDict d;
  auto first = std::make_shared<nn::Linear>(2, 3);
  d.insert("proj", first);
  d.insert("act", std::make_shared<nn::GELU>("tanh"));
  d.insert("out", std::make_shared<nn::Linear>(3, 1));
  CHECK(d.keys() == std::vector<std::string>{"proj", "act", "out"});
  CHECK(names(d.named_parameters()) ==
        std::vector<std::string>{"proj.weight", "proj.bias", "out.weight", "out.bias"});
  // The reference replaces a key's module where it is, keeping the order.
  auto second = std::make_shared<nn::Linear>(2, 4, /*bias=*/false);
  d.insert("proj", second);
  CHECK(d.size() == 3);
  CHECK(d["proj"] == second);
  CHECK(d.keys() == std::vector<std::string>{"proj", "act", "out"});
  CHECK(names(d.named_parameters()) ==
        std::vector<std::string>{"proj.weight", "out.weight", "out.bias"});
  CHECK(d.pop("act")->type_name() == "GELU");
  CHECK_FALSE(d.contains("act"));
  CHECK(d.named_children().size() == 2);
  REQUIRE_THROWS_WITH(d["act"], Catch::Contains("no key 'act'") && Catch::Contains("proj, out"));
  REQUIRE_THROWS_AS(d.pop("act"), ValueError);
  REQUIRE_THROWS_AS(d.insert("a.b", std::make_shared<nn::SiLU>()), ValueError);
  d.clear();
  CHECK(d.is_empty());
  CHECK(d.named_parameters().empty());
}

TEST_CASE("activation modules compute their functions", "[nn][containers]") {
  const Tensor x = from_vector(std::vector<float>{-1.5f, 0.f, 2.f}, {3});
  CHECK(nn::Identity().forward(x).is_same(x));
  const auto same = [](const Tensor& a, const Tensor& b) {
    return a.to_vector<float>() == b.to_vector<float>();
  };
  CHECK(same(nn::GELU().forward(x), gelu(x)));
  CHECK(same(nn::GELU("tanh").forward(x), gelu(x, "tanh")));
  CHECK_FALSE(same(nn::GELU("tanh").forward(x), gelu(x)));
  CHECK(same(nn::SiLU().forward(x), silu(x)));
  REQUIRE_THROWS_WITH(nn::GELU("fast"), Catch::Contains("\"none\" or \"tanh\""));
}

}  // namespace
}  // namespace streamgrad
