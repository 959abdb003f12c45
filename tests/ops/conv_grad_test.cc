// conv2d's gradient functions (conv2d_input_grad, conv2d_weight_grad) against autograd of
// conv2d on every test device, and the cuDNN path: which inputs take it, and on cuda (where a GPU is present) that conv2d is
// one cuDNN kernel each way with the composed path's values, stays differentiable under
// create_graph, and fills and obeys its device's plan cache.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "kernels/nn_kernels.h"
#include "kernels/plan_cache.h"
#include "runtime/backend/cuda_settings.h"
#include "tests/ops/conv_cases.h"
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace {

using testing::check_values;
using testing::ConvCase;
using testing::kConvCases;
using testing::expect_error;
using testing::KernelNames;
using testing::random_input;
using testing::test_device;
using testing::values;

TEST_CASE("conv2d_input_grad and conv2d_weight_grad are conv2d's gradients", "[ops][conv]") {
  const Device d = test_device();
  uint64_t seed = 40;
  for (const ConvCase& k : kConvCases) {
    const Tensor x = random_input(k.x, d, seed++), w = random_input(k.w, d, seed++);
    const Tensor y = conv2d(x, w, Tensor(), k.p);
    const Tensor g = random_input(y.sizes(), d, seed++);
    const TensorList want = grad({y}, {x, w}, {g});
    check_values(conv2d_input_grad(k.x, w, g, k.p), values(want[0]));
    check_values(conv2d_weight_grad(x, k.w, g, k.p), values(want[1]));
  }
}

TEST_CASE("conv2d's gradient functions refuse mismatched arguments", "[ops][conv][errors]") {
  const Tensor w = random_input({4, 3, 3, 3}, Device("cpu"), 1);
  const Tensor g = random_input({2, 4, 3, 4}, Device("cpu"), 2);
  expect_error<ValueError>(
      [&] {
        conv2d_input_grad({2, 3, 5, 5}, w, g);
      },
      {"conv2d_input_grad", "grad_output float64[2, 4, 3, 4]", "expected [2, 4, 3, 3]"});
  expect_error<ValueError>(
      [&] {
        conv2d_input_grad({2, 3, 5}, w, g);
      },
      {"conv2d_input_grad", "4-d"});
  Conv2dParams two;
  two.groups = 2;
  expect_error<ValueError>(
      [&] {
        conv2d_input_grad({2, 3, 5, 6}, w, g, two);
      },
      {"conv2d_input_grad", "2 groups"});
  const Tensor x = random_input({2, 3, 5, 6}, Device("cpu"), 3);
  expect_error<ValueError>(
      [&] {
        conv2d_weight_grad(x, {4, 2, 3, 3}, g);
      },
      {"conv2d_weight_grad", "1 groups"});
  const Tensor g_sim = random_input({2, 4, 3, 4}, Device("sim:0"), 4);
  expect_error<DeviceError>(
      [&] {
        conv2d_weight_grad(x, {4, 3, 3, 3}, g_sim);
      },
      {"conv2d_weight_grad"});
}

TEST_CASE("float64 conv2d on cpu and sim runs the composed path", "[ops][conv]") {
  kernels::Window2d win;
  win.kernel[0] = win.kernel[1] = 3;
  for (const char* name : {"cpu", "sim:0"}) {
    const Device d(name);
    INFO(name);
    // oneDNN takes float32 only (tests/ops/conv_onednn_test.cc).
    CHECK_FALSE(kernels::library_conv2d_supported(d, DType::kFloat64, {2, 3, 5, 5},
                                                  {4, 3, 3, 3}, win, 1));
    Tensor x1 = random_input({2, 3, 5, 5}, d, 7);
    const Tensor w = random_input({4, 3, 3, 3}, d, 6);
    const std::string node = conv2d(x1, w).grad_fn()->name();
    CHECK(node != "CudnnConvolutionBackward");
    CHECK(node != "MkldnnConvolutionBackward");
  }
  // float16 or integer inputs, sizes past 32 bits: never cuDNN, on any device.
  const Device cuda(DeviceType::kCuda, 0);
  CHECK_FALSE(
      kernels::library_conv2d_supported(cuda, DType::kInt64, {2, 3, 5, 5}, {4, 3, 3, 3}, win, 1));
  CHECK_FALSE(kernels::library_conv2d_supported(
      cuda, DType::kFloat32, {int64_t(1) << 31, 3, 5, 5}, {4, 3, 3, 3}, win, 1));
  CHECK_FALSE(kernels::library_conv2d_supported(cuda, DType::kFloat32, {4096, 4096, 512, 512},
                                                {4, 4096, 3, 3}, win, 1));
}

// The GPU half: skipped, once, where there is none.
bool have_cuda() {
  if (device_count(DeviceType::kCuda) > 0) return true;
  WARN("cuDNN convolution checks skipped: no usable GPU or driver on this machine");
  return false;
}

TEST_CASE("conv2d on cuda is one cuDNN kernel each way and equals the composed path",
          "[ops][conv][cuda]") {
  if (!have_cuda()) return;
  const Device cuda("cuda:0"), cpu("cpu");
  uint64_t seed = 60;
  for (const ConvCase& k : kConvCases) {
    Tensor xr = random_input(k.x, cpu, seed++), wr = random_input(k.w, cpu, seed++);
    Tensor x = to(xr, cuda), w = to(wr, cuda);
    for (Tensor* t : {&xr, &wr, &x, &w}) t->requires_grad_();
    const Tensor yr = conv2d(xr, wr, Tensor(), k.p);
    const Tensor g = random_input(yr.sizes(), cpu, seed++), g_cuda = to(g, cuda);
    const TensorList want = grad({yr}, {xr, wr}, {g});
    KernelNames seen;
    const Tensor y = conv2d(x, w, Tensor(), k.p);
    CHECK(seen.names == std::vector<std::string>{"cudnn_conv2d"});
    CHECK(y.grad_fn()->name() == "CudnnConvolutionBackward");
    seen.names.clear();
    const TensorList got = grad({y}, {x, w}, {g_cuda});
    CHECK(seen.names == std::vector<std::string>{"cudnn_conv2d_backward"});
    // float64 sums in cuDNN's order: within rounding of the cpu's.
    check_values(to(y, cpu), values(yr));
    check_values(to(got[0], cpu), values(want[0]));
    check_values(to(got[1], cpu), values(want[1]));
  }
}

TEST_CASE("conv2d on cuda stays differentiable under create_graph", "[ops][conv][cuda]") {
  if (!have_cuda()) return;
  const Device cuda("cuda:0");
  Conv2dParams p;
  p.padding = {1, 1};
  p.groups = 2;
  testing::check_second_order(
      [&](const TensorList& in) { return conv2d(in[0], in[1], Tensor(), p); },
      {random_input({1, 2, 3, 3}, cuda, 70), random_input({2, 1, 2, 2}, cuda, 71)});
  // A non-contiguous weight: the node must keep the weight's history, not a copy's.
  testing::check_second_order(
      [&](const TensorList& in) { return conv2d(in[0], transpose(in[1], 2, 3), Tensor(), p); },
      {random_input({1, 2, 3, 3}, cuda, 72), random_input({2, 1, 3, 2}, cuda, 73)});
}

TEST_CASE("the cuDNN plan cache holds one plan per problem and obeys max_size and clear",
          "[ops][conv][cuda]") {
  PlanCache& cache = cudnn_conv_plan_cache(0);
  const size_t old_max = cache.max_size();
  CHECK(old_max == PlanCache::kDefaultMaxSize);
  if (!have_cuda()) return;
  const Device cuda("cuda:0");
  cache.clear();
  // float32 (tf32 is a float32 setting) and leaves that need no gradient, so that each
  // plan below is made by the call that says so.
  const Tensor x = random_input({2, 3, 5, 5}, cuda, 80).detach().to(DType::kFloat32);
  const Tensor w = random_input({4, 3, 3, 3}, cuda, 81).detach().to(DType::kFloat32);
  (void)conv2d(x, w);
  CHECK(cache.size() == 1);
  (void)conv2d(x, w);
  CHECK(cache.size() == 1);  // the same problem reuses its plan
  Tensor xr = clone(x);
  xr.requires_grad_();
  sum(conv2d(xr, w)).backward();
  CHECK(cache.size() == 2);  // + the input-gradient pass (w needs no gradient)
  (void)conv2d(random_input({1, 3, 5, 5}, cuda, 82).detach().to(DType::kFloat32), w);
  CHECK(cache.size() == 3);
  cache.set_max_size(1);
  CHECK(cache.size() == 1);
  cache.set_max_size(0);  // caching off: plans are made and dropped
  (void)conv2d(x, w);
  CHECK(cache.size() == 0);
  cache.set_max_size(old_max);
  set_cudnn_allow_tf32(true);  // a different plan: the setting is part of the key
  (void)conv2d(x, w);
  set_cudnn_allow_tf32(false);
  (void)conv2d(x, w);
  CHECK(cache.size() == 2);
  cache.clear();
  CHECK(cache.size() == 0);
}

}  // namespace
}  // namespace streamgrad
