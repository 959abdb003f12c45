// Concurrent backward: independent graphs and a shared leaf, from 8 threads (run under
// --config=tsan in CI).
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "tests/engine/engine_test_util.h"

namespace streamgrad {
namespace {

TEST_CASE("8 threads each run backward on their own graph", "[engine][concurrency]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"));
  std::vector<double> got(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 10; ++rep) {
        Tensor x = full({4}, t + 1.0, TensorOptions().device(d)).requires_grad_();
        Tensor y = sum(mul(mul(x, x), 0.5));  // dy/dx = x
        y.backward();
        got[t] = x.grad().to_vector<float>()[3];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) CHECK(got[t] == t + 1.0);
}

TEST_CASE("8 threads run backward through a shared leaf; .grad is exact",
          "[engine][concurrency]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"), Device("sim:1"));
  Tensor w = zeros({16}, TensorOptions().device(d)).requires_grad_();
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 25; ++rep) {
        Tensor y = sum(mul(w, static_cast<double>(t + 1)));
        y.backward();
      }
    });
  }
  for (auto& th : threads) th.join();
  // Each thread adds 25 * (t + 1): 25 * 36 = 900 in every element.
  for (float v : w.grad().to_vector<float>()) CHECK(v == 900.0f);
}

}  // namespace
}  // namespace streamgrad
