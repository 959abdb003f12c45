// Saved-tensor hooks, with the behaviours the reference framework's users rely on: pack at
// save time and unpack in backward, the pair in force at save time kept with the graph,
// nesting, history given back (double backward), the in-place and unpack checks, the
// disabling scope, per-thread stacks, and streams: pack sees the saving op's stream and
// unpack runs with the node's stream current.
#include <catch2/catch.hpp>

#include <any>
#include <thread>

#include "engine/saved_hooks.h"
#include "tests/engine/engine_test_util.h"

namespace streamgrad {
namespace {

using testing::error_of;

// Hooks that count their calls and keep the tensor as it is.
struct Counting {
  int packed = 0;
  int unpacked = 0;
  SavedTensorsHooks guard() {
    return SavedTensorsHooks(
        [this](const Tensor& t) -> std::any {
          ++packed;
          return t;
        },
        [this](const std::any& p) {
          ++unpacked;
          return std::any_cast<Tensor>(p);
        });
  }
};

std::vector<double> v(const Tensor& t) { return t.to_vector<double>(); }

TEST_CASE("pack runs when a tensor is saved, unpack when backward needs it", "[engine][saved]") {
  Tensor x = from_vector<double>({1, 2, 3}, {3}).requires_grad_();
  Counting c;
  Tensor y;
  {
    SavedTensorsHooks g = c.guard();
    y = mul(x, x);  // saves x twice (as self and as other)
    CHECK(c.packed == 2);
    CHECK(c.unpacked == 0);
  }
  sum(y).backward();  // the guard is gone: the pair stays with the graph
  CHECK(c.unpacked == 2);
  CHECK(v(x.grad()) == std::vector<double>{2, 4, 6});
  // Nothing is saved where no graph is recorded.
  Tensor plain = from_vector<double>({1, 2}, {2});
  {
    SavedTensorsHooks g = c.guard();
    mul(plain, plain);
    NoGradGuard off;
    mul(x, x);
  }
  CHECK(c.packed == 2);
}

TEST_CASE("a pack hook's value replaces the tensor until unpack", "[engine][saved]") {
  Tensor x = from_vector<double>({1, 2, 3}, {3}).requires_grad_();
  Tensor y;
  {
    // What backward computes with is what unpack returns: doubled here.
    SavedTensorsHooks g([](const Tensor& t) -> std::any { return mul(t, 2.0); },
                        [](const std::any& p) { return std::any_cast<Tensor>(p); });
    y = mul(x, 3.0);  // saves nothing
    y = mul(y, y);    // saves y twice
  }
  sum(y).backward();
  // d/dx (3x)^2 = 18x, computed with 2y in place of y: 36x.
  CHECK(v(x.grad()) == std::vector<double>{36, 72, 108});
}

TEST_CASE("hooks nest, the innermost pair applies", "[engine][saved]") {
  Tensor x = from_vector<double>({1, 2}, {2}).requires_grad_();
  Counting outer, inner;
  Tensor a, b, c;
  {
    SavedTensorsHooks go = outer.guard();
    a = exp(x);
    {
      SavedTensorsHooks gi = inner.guard();
      b = exp(x);
    }
    c = exp(x);
  }
  CHECK(outer.packed == 2);
  CHECK(inner.packed == 1);
  sum(add(add(a, b), c)).backward();
  CHECK(outer.unpacked == 2);
  CHECK(inner.unpacked == 1);
}

TEST_CASE("the unpacked tensor keeps the saved tensor's history (double backward)",
          "[engine][saved]") {
  Counting c;
  SECTION("a saved leaf") {
    Tensor a = from_vector<double>({1, 2, 3}, {3}).requires_grad_();
    Tensor s;
    {
      SavedTensorsHooks g = c.guard();
      s = sum(pow(a, 3));
    }
    Tensor ga = grad({s}, {a}, {}, false, true)[0];  // 3a^2, through the unpacked a
    CHECK(v(ga) == std::vector<double>{3, 12, 27});
    sum(ga).backward();
    CHECK(v(a.grad()) == std::vector<double>{6, 12, 18});
  }
  SECTION("a saved non-leaf") {
    Tensor a = from_vector<double>({1, 2, 3}, {3}).requires_grad_();
    Tensor s;
    {
      SavedTensorsHooks g = c.guard();
      Tensor b = mul(a, 2.0);
      s = sum(mul(b, b));  // 4a^2
    }
    Tensor ga = grad({s}, {a}, {}, false, true)[0];  // 8a
    sum(ga).backward();
    CHECK(v(a.grad()) == std::vector<double>{8, 8, 8});
  }
  SECTION("a saved output") {
    Tensor a = from_vector<double>({0, 1}, {2}).requires_grad_();
    Tensor s;
    {
      SavedTensorsHooks g = c.guard();
      s = sum(exp(a));  // ExpBackward saves its own output
    }
    Tensor ga = grad({s}, {a}, {}, false, true)[0];
    sum(ga).backward();
    CHECK(v(a.grad()) == std::vector<double>{std::exp(0.0), std::exp(1.0)});
  }
}

TEST_CASE("a graph kept only by what pack returned is still freed", "[engine][saved]") {
  struct Square : Function<Square> {
    static TensorList forward(FunctionCtx& ctx, const TensorList& in) {
      Tensor out = mul(in[0], in[0]);
      ctx.save_for_backward({in[0], out});
      return {out};
    }
    static TensorList backward(FunctionCtx& ctx, const TensorList& g) {
      const TensorList s = ctx.saved_tensors();
      return {mul(mul(g[0], s[0]), 2.0)};
    }
  };
  Tensor x = from_vector<double>({1, 2}, {2}).requires_grad_();
  Counting c;
  std::weak_ptr<Node> node;
  {
    SavedTensorsHooks g = c.guard();
    Tensor y = Square::apply({x})[0];
    node = y.grad_fn();
    CHECK(c.packed == 2);
    sum(y).backward(/*gradient=*/{}, /*retain_graph=*/true);
    CHECK(v(x.grad()) == std::vector<double>{2, 4});
  }
  // The output's packed value holds the output, whose history is the node: kept weakly.
  CHECK(node.expired());
  // The same for an op that saves its output once the output has its history.
  {
    SavedTensorsHooks g = c.guard();
    Tensor n = norm(x);  // dropped without a backward, which would free what is saved
    node = n.grad_fn();
  }
  CHECK(node.expired());
}

TEST_CASE("backward twice through packed tensors needs retain_graph", "[engine][saved]") {
  Tensor x = from_vector<double>({1, 2}, {2}).requires_grad_();
  Counting c;
  Tensor y;
  {
    SavedTensorsHooks g = c.guard();
    y = sum(mul(x, x));
  }
  y.backward({}, /*retain_graph=*/true);
  y.backward();
  CHECK(c.unpacked == 4);
  CHECK(v(x.grad()) == std::vector<double>{4, 8});
  CHECK_THAT(error_of<Error>([&] { y.backward(); }),
             Catch::Contains("backward through the graph a second time"));
}

TEST_CASE("hooks that break the contract are refused with what to change", "[engine][saved]") {
  Tensor x = from_vector<double>({1, 2}, {2}).requires_grad_();
  SECTION("pack modifies its input in place") {
    SavedTensorsHooks g(
        [](const Tensor& t) -> std::any {
          Tensor same = t;
          mul_(same, 2.0);
          return t;
        },
        [](const std::any& p) { return std::any_cast<Tensor>(p); });
    Tensor b = mul(x, 1.0);
    CHECK_THAT(error_of<Error>([&] { exp(b); }),
               Catch::Contains("pack hook modified its input in place") &&
                   Catch::Contains("float64[2] on cpu") && Catch::Contains("clone"));
  }
  SECTION("unpack returns another shape, or nothing") {
    const bool nothing = GENERATE(false, true);
    Tensor y;
    {
      SavedTensorsHooks g([](const Tensor&) -> std::any { return 0; },
                          [nothing](const std::any&) {
                            return nothing ? Tensor() : zeros({3}, testing::f64());
                          });
      y = sum(exp(x));
    }
    const std::string e = error_of<Error>([&] { y.backward(); });
    CHECK_THAT(e, Catch::Contains("ExpBackward") && Catch::Contains("unpack hook") &&
                      Catch::Contains("float64[2] on cpu"));
    if (!nothing) CHECK_THAT(e, Catch::Contains("float64[3] on cpu"));
  }
  SECTION("hooks pushed where they are disabled") {
    Counting outer;
    SavedTensorsHooks go = outer.guard();
    {
      DisableSavedTensorsHooks off("saved tensors must stay on the device here");
      CHECK(error_of<Error>([] {
              SavedTensorsHooks g([](const Tensor& t) -> std::any { return t; },
                                  [](const std::any& p) { return std::any_cast<Tensor>(p); });
            }) == "saved tensors must stay on the device here");
      exp(x);  // the pair pushed before still applies
      CHECK(outer.packed == 1);
    }
    SavedTensorsHooks again = outer.guard();  // allowed once the scope is over
  }
}

TEST_CASE("the hook stack is the calling thread's", "[engine][saved]") {
  Tensor x = from_vector<double>({1, 2}, {2}).requires_grad_();
  Counting c;
  SavedTensorsHooks g = c.guard();
  std::thread other([&] { exp(x); });
  other.join();
  CHECK(c.packed == 0);
  exp(x);
  CHECK(c.packed == 1);
}

TEST_CASE("pack sees the saving op's stream and the producer; unpack runs on the node's",
          "[engine][saved][streams]") {
  SimSchedulerScope scope(testing::adversarial(7));
  const Stream side = testing::side_stream(0, 0);
  Tensor x = ones({4}, testing::f64(Device("sim:0"))).requires_grad_();
  std::vector<Stream> packed_on, unpacked_on;
  std::vector<std::string> producers;
  Tensor y;
  Tensor a;
  {
    StreamGuard on(side);
    side.wait_stream(x.stream());
    SavedTensorsHooks g(
        [&](const Tensor& t, const SavedTensorInfo& info) -> std::any {
          packed_on.push_back(info.stream);
          producers.push_back(info.producer != nullptr ? info.producer->name() : "leaf");
          return t;
        },
        [&](const std::any& p) {
          unpacked_on.push_back(current_stream(Device("sim:0")));
          return std::any_cast<Tensor>(p);
        });
    a = mul(x, 2.0);
    y = sum(mul(a, a));
  }
  REQUIRE(packed_on.size() == 2);
  CHECK(packed_on[0] == side);
  CHECK(producers == std::vector<std::string>{"MulBackward", "MulBackward"});
  y.backward();
  REQUIRE(unpacked_on.size() == 2);
  CHECK(unpacked_on[0] == side);  // the node's stream (S2), not the caller's
  CHECK(v(to(x.grad(), Device("cpu"))) == std::vector<double>{8, 8, 8, 8});
}

TEST_CASE("a pack hook that moves the tensor to the host frees its device memory",
          "[engine][saved][memory]") {
  const Device d("sim:1");
  synchronize(d);
  Tensor x = ones({1 << 16}, testing::f64(d)).requires_grad_();
  Tensor y;
  int64_t with_saved_on_device = 0;
  {
    Tensor a = exp(x);  // saves its 512 KiB output on the device
    synchronize(d);
    with_saved_on_device = memory_stats(d).allocated_bytes.current;
  }
  Tensor s;
  {
    SavedTensorsHooks g(
        [](const Tensor& t) -> std::any { return std::make_pair(t.device(), to(t, Device("cpu"))); },
        [](const std::any& p) {
          const auto& [dev, host] = std::any_cast<const std::pair<Device, Tensor>&>(p);
          return to(host, dev);
        });
    Tensor a = exp(x);
    s = sum(a);
  }
  synchronize(d);
  // a's device memory went back when a did: only x and s are left on the device.
  CHECK(memory_stats(d).allocated_bytes.current < with_saved_on_device);
  s.backward();
  CHECK(v(to(x.grad(), Device("cpu")))[0] == Approx(std::exp(1.0)));
}

}  // namespace
}  // namespace streamgrad
