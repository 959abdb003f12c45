// The warning channel (issue 9, defect 15): collectors, the process-wide handler, and
// warnings raised on a device worker delivered to the thread that called backward(), as
// the reference framework's engine hands worker warnings to the caller.
#include <catch2/catch.hpp>

#include <thread>

#include "tests/engine/engine_test_util.h"

namespace streamgrad {
namespace {

TEST_CASE("a collector receives this thread's warnings, in order", "[warnings]") {
  WarningCollector collect;
  SG_WARN("first ", 1);
  SG_WARN("second");
  REQUIRE(collect.warnings().size() == 2);
  CHECK(collect.warnings()[0].message == "first 1");
  CHECK(collect.warnings()[1].message == "second");
  CHECK(collect.warnings()[0].line > 0);
}

TEST_CASE("collectors nest and are per thread", "[warnings]") {
  WarningCollector outer;
  {
    WarningCollector inner;
    SG_WARN("inner");
    CHECK(inner.warnings().size() == 1);
  }
  SG_WARN("outer");
  std::vector<Warning> other_thread;
  std::thread([&] {
    WarningCollector mine;
    SG_WARN("elsewhere");
    other_thread = mine.warnings();
  }).join();
  REQUIRE(outer.warnings().size() == 1);
  CHECK(outer.warnings()[0].message == "outer");
  REQUIRE(other_thread.size() == 1);
}

TEST_CASE("the process-wide handler gets warnings no collector takes", "[warnings]") {
  std::vector<std::string> got;
  set_warning_handler([&](const Warning& w) { got.push_back(w.message); });
  std::thread([] { SG_WARN("from a thread"); }).join();
  set_warning_handler(nullptr);
  CHECK(got == std::vector<std::string>{"from a thread"});
}

struct WarnsInBackward : Function<WarnsInBackward> {
  static TensorList forward(FunctionCtx&, const TensorList& in) { return {clone(in[0])}; }
  static TensorList backward(FunctionCtx&, const TensorList& g) {
    SG_WARN("raised in backward");
    return {g[0]};
  }
};

TEST_CASE("a warning raised in a backward node reaches the thread that called backward",
          "[warnings][engine]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"), Device("sim:1"));
  Tensor x = ones({1}, TensorOptions().device(d)).requires_grad_();
  Tensor y = WarnsInBackward::apply({x}, "WarnsInBackward")[0];
  WarningCollector collect;
  sum(y).backward();
  REQUIRE(collect.warnings().size() == 1);
  CHECK(collect.warnings()[0].message == "raised in backward");
}

TEST_CASE("a warning is delivered even when the backward fails", "[warnings][engine]") {
  struct WarnsThenFails : Function<WarnsThenFails> {
    static TensorList forward(FunctionCtx&, const TensorList& in) { return {clone(in[0])}; }
    static TensorList backward(FunctionCtx&, const TensorList&) {
      SG_WARN("before failing");
      throw ValueError("failed");
    }
  };
  Tensor x = ones({1}, TensorOptions().device("sim:0")).requires_grad_();
  Tensor y = WarnsThenFails::apply({x}, "WarnsThenFails")[0];
  WarningCollector collect;
  CHECK_THROWS_AS(sum(y).backward(), ValueError);
  REQUIRE(collect.warnings().size() == 1);
  CHECK(collect.warnings()[0].message == "before failing");
}

// S5 with the accumulation on another stream than the producer's (the leaf was first used
// on another stream than the one its gradient comes from): correct (an event orders
// them) but costly, which the engine says once per backward that does it.
TEST_CASE("a leaf whose accumulation stream differs from the producer's warns",
          "[warnings][engine]") {
  Tensor x = ones({2}, TensorOptions().device("sim:0")).requires_grad_();
  // First used on the default stream: the accumulator runs there (S5) and is kept alive.
  const Tensor first_use = mul(x, 1.0);
  Tensor loss;
  {
    StreamGuard side(testing::side_stream(0, 1));
    side.stream().wait_stream(x.stream());
    loss = sum(mul(x, 2.0));
  }
  WarningCollector collect;
  loss.backward();
  REQUIRE(collect.warnings().size() == 1);
  CHECK_THAT(collect.warnings()[0].message, Catch::Contains("sim:0/s0") &&
                                               Catch::Contains("produced on"));
  CHECK(x.grad().to_vector<float>() == std::vector<float>{2, 2});
  // Same stream: no warning.
  Tensor z = ones({2}, TensorOptions().device("sim:0")).requires_grad_();
  WarningCollector quiet;
  sum(mul(z, 2.0)).backward();
  CHECK(quiet.warnings().empty());
}

// As the reference: .grad of a non-leaf is never filled by backward() unless it retains
// its gradient, so reading it is almost always a mistake worth a warning.
TEST_CASE("reading .grad() of a non-leaf that does not retain it warns", "[warnings][engine]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"));
  Tensor x = ones({2}, TensorOptions().device(d)).requires_grad_();
  Tensor y = mul(x, 2.0);
  sum(y).backward();
  WarningCollector collect;
  CHECK_FALSE(y.grad().defined());
  REQUIRE(collect.warnings().size() == 1);
  CHECK_THAT(collect.warnings()[0].message,
             Catch::Contains("grad(): reading .grad of float32[2] on " + d.str()) &&
                 Catch::Contains("not a leaf") && Catch::Contains("retain_grad()"));
  CHECK_FALSE(y.grad().defined());  // every read warns (stderr shows one per call site)
  CHECK(collect.warnings().size() == 2);
}

TEST_CASE("leaves, retained non-leaves and the library's own reads do not warn",
          "[warnings][engine]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"));
  Tensor x = ones({2}, TensorOptions().device(d)).requires_grad_();
  Tensor plain = ones({2}, TensorOptions().device(d));  // a leaf without grad
  Tensor y = mul(x, 3.0);
  y.retain_grad();
  Tensor z = mul(y, 2.0);
  WarningCollector collect;
  CHECK_FALSE(x.grad().defined());  // a leaf before backward
  CHECK_FALSE(plain.grad().defined());
  CHECK_FALSE(y.grad().defined());  // retains its gradient, not yet computed
  {
    NoGradGuard no_grad;
    CHECK_FALSE(mul(x, 2.0).grad().defined());  // no history: a leaf
  }
  // The engine's own work: backward twice through retained graphs, grad(), double
  // backward, hooks, and a gradient set by hand on a non-leaf.
  sum(z).backward(Tensor(), /*retain_graph=*/true);
  sum(z).backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{12, 12});
  CHECK(y.grad().to_vector<float>() == std::vector<float>{4, 4});
  Tensor w = mul(x, x);
  w.register_hook([](const Tensor& g) { return mul(g, 1.0); });
  const TensorList g = grad({sum(w)}, {x}, {}, /*retain_graph=*/false, /*create_graph=*/true);
  sum(g[0]).backward();
  Tensor v = mul(x, 5.0);
  v.set_grad(ones({2}, TensorOptions().device(d)));
  CHECK(v.grad().defined());
  // backward(inputs=) of a non-leaf accumulates into its .grad, reading the old one.
  Tensor u = mul(x, 2.0);
  sum(mul(u, u)).backward(Tensor(), false, false, {u});
  CHECK(collect.warnings().empty());
}

}  // namespace
}  // namespace streamgrad
