// The convolution shapes the conv2d tests share: each {input, weight, {stride, padding,
// dilation, groups}} covers one feature of the window (tests/ops/conv_grad_test.cc,
// tests/ops/conv_onednn_test.cc, tests/ops/conv_cudnn_gpu_test.cc); and the walk through
// a device library's plan cache that the oneDNN and cuDNN tests share.
#ifndef STREAMGRAD_TESTS_OPS_CONV_CASES_H_
#define STREAMGRAD_TESTS_OPS_CONV_CASES_H_

#include <catch2/catch.hpp>
#include <cstdint>
#include <utility>

#include "kernels/plan_cache.h"
#include "ops/ops.h"
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {

struct ConvCase {
  Shape x, w;
  Conv2dParams p;
};

inline const ConvCase kConvCases[] = {
    {{2, 3, 5, 6}, {4, 3, 3, 3}, {}},
    {{1, 2, 7, 5}, {3, 2, 2, 3}, {{2, 1}, {1, 2}, {1, 1}, 1}},
    {{1, 2, 6, 6}, {2, 2, 3, 2}, {{1, 2}, {2, 0}, {2, 1}, 1}},  // dilation
    {{2, 4, 4, 4}, {6, 2, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 2}},  // groups
    {{1, 4, 3, 3}, {4, 1, 1, 1}, {{1, 1}, {0, 0}, {1, 1}, 4}},  // depthwise 1x1
};

// Clears `cache` (the plan cache of d's convolution library) and walks it with float32
// leaves that need no gradient, so that each plan is made by the call that says so: one
// problem and its reuse, its input-gradient pass, a second batch size, max_size 1, then
// max_size 0 (plans made and dropped, the result the same). Restores max_size, leaves
// the cache empty and returns the first problem's input and weight.
inline std::pair<Tensor, Tensor> walk_plan_cache(PlanCache& cache, const Device& d,
                                                 uint64_t seed) {
  const size_t old_max = cache.max_size();
  cache.clear();
  const Tensor x = random_input({2, 3, 5, 5}, d, seed).detach().to(DType::kFloat32);
  const Tensor w = random_input({4, 3, 3, 3}, d, seed + 1).detach().to(DType::kFloat32);
  const Tensor first = conv2d(x, w);
  CHECK(cache.size() == 1);
  (void)conv2d(x, w);
  CHECK(cache.size() == 1);  // the same problem reuses its plan
  Tensor xr = clone(x);
  xr.requires_grad_();
  sum(conv2d(xr, w)).backward();
  CHECK(cache.size() == 2);  // + the input-gradient pass (w needs no gradient)
  (void)conv2d(random_input({1, 3, 5, 5}, d, seed + 2).detach().to(DType::kFloat32), w);
  CHECK(cache.size() == 3);
  cache.set_max_size(1);
  CHECK(cache.size() == 1);
  cache.set_max_size(0);
  const Tensor uncached = conv2d(x, w);
  CHECK(cache.size() == 0);
  CHECK(values(uncached.to(DType::kFloat64)) == values(first.to(DType::kFloat64)));
  cache.set_max_size(old_max);
  return {x, w};
}

}  // namespace testing
}  // namespace streamgrad

#endif  // STREAMGRAD_TESTS_OPS_CONV_CASES_H_
