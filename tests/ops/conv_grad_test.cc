// conv2d's gradient functions (conv2d_input_grad, conv2d_weight_grad) against autograd of
// conv2d on every test device, and which inputs never take cuDNN. The cuDNN path on a cuda
// device is conv_cudnn_gpu_test's.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "kernels/nn_kernels.h"
#include "tests/ops/conv_cases.h"
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace {

using testing::check_values;
using testing::ConvCase;
using testing::kConvCases;
using testing::expect_error;
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
  // Integer inputs, sizes past 32 bits, 16-bit calls whose float32 copies pass the
  // widening cap: never cuDNN (small 16-bit calls are: tests/ops/conv_cudnn_gpu_test.cc).
  const Device cuda(DeviceType::kCuda, 0);
  CHECK_FALSE(kernels::library_conv2d_supported(cuda, DType::kFloat16, {64, 64, 128, 128},
                                                {4, 64, 3, 3}, win, 1));
  CHECK_FALSE(
      kernels::library_conv2d_supported(cuda, DType::kInt64, {2, 3, 5, 5}, {4, 3, 3, 3}, win, 1));
  CHECK_FALSE(kernels::library_conv2d_supported(
      cuda, DType::kFloat32, {int64_t(1) << 31, 3, 5, 5}, {4, 3, 3, 3}, win, 1));
  CHECK_FALSE(kernels::library_conv2d_supported(cuda, DType::kFloat32, {4096, 4096, 512, 512},
                                                {4, 4096, 3, 3}, win, 1));
}

}  // namespace
}  // namespace streamgrad
