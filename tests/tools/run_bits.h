// What the stream-placement tests of tools/train's models compare: the losses of a few
// training steps and, after the last, every parameter's gradient and value, read back
// once at the end (so a missing wait shows as other bits), and the check that two runs
// agree to the bit.
//
// Thread-safety: call from the test thread. Failure: Catch2 assertions.
#ifndef STREAMGRAD_TESTS_TOOLS_RUN_BITS_H_
#define STREAMGRAD_TESTS_TOOLS_RUN_BITS_H_

#include <catch2/catch.hpp>

#include <vector>

#include "nn/module.h"

namespace streamgrad {
namespace testing {

struct RunBits {
  std::vector<float> losses;
  std::vector<std::vector<float>> grads;  // after the last step, per parameter
  std::vector<std::vector<float>> params;
};

inline RunBits record(const std::vector<Tensor>& losses, const nn::Module& model) {
  RunBits r;
  for (const Tensor& l : losses) r.losses.push_back(l.item<float>());
  for (const Tensor& p : model.parameters()) {
    r.grads.push_back(p.grad().to_vector<float>());
    r.params.push_back(p.to_vector<float>());
  }
  return r;
}

inline void check_same_bits(const RunBits& a, const RunBits& b) {
  REQUIRE(a.grads.size() == b.grads.size());
  CHECK(a.losses == b.losses);
  for (size_t i = 0; i < a.grads.size(); ++i) {
    INFO("parameter " << i);
    CHECK(a.grads[i] == b.grads[i]);
    CHECK(a.params[i] == b.params[i]);
  }
}

}  // namespace testing
}  // namespace streamgrad

#endif  // STREAMGRAD_TESTS_TOOLS_RUN_BITS_H_
