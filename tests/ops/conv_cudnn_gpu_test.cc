// conv2d on a cuda device through cuDNN (GPU-only: tag "gpu", tests/gpu_required.h; run
// on a GPU by bench/gpu.sh and on the interpreted CUDA device by --config=cudaemu): one
// cuDNN kernel each way with the composed path's values, differentiable under
// create_graph, and the device's plan cache filled and obeyed; float16 and bfloat16 on
// float32 copies.
#include <catch2/catch.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/nn_kernels.h"
#include "kernels/plan_cache.h"
#include "runtime/backend/cuda_settings.h"
#include "tests/gpu_required.h"
#include "tests/ops/conv_cases.h"
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace {

using testing::check_values;
using testing::ConvCase;
using testing::kConvCases;
using testing::KernelNames;
using testing::random_input;
using testing::require_cuda_device;
using testing::values;

TEST_CASE("conv2d on cuda is one cuDNN kernel each way and equals the composed path",
          "[ops][conv][cuda]") {
  require_cuda_device();
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

// On an H200 (2026-12-04, bench/RESULTS.md) cuDNN's own 16-bit descriptors trained the
// ResNet under --amp=fp16 slower (666-762 examples/s) than unfold and matmul (1,127),
// against 5,400+ in float32: 16-bit convolutions run cuDNN's float32 plan on float32
// copies (kernels/library_conv.cc), which this case pins.
TEST_CASE("float16 and bfloat16 conv2d on cuda run cuDNN's float32 plan on float32 copies",
          "[ops][conv][cuda]") {
  require_cuda_device();
  const Device cuda(DeviceType::kCuda, 0), cpu("cpu");
  kernels::Window2d win;
  win.kernel[0] = win.kernel[1] = 3;
  uint64_t seed = 90;
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    INFO(dtype_name(dt));
    CHECK(kernels::library_conv2d_supported(cuda, dt, {2, 3, 5, 5}, {4, 3, 3, 3}, win, 1));
    // Sums in float32, each result rounded once: within the 16-bit type's rounding of
    // float64 sums of the same 16-bit inputs.
    const double tol = dt == DType::kFloat16 ? 2e-3 : 1.6e-2;
    for (const ConvCase& k : kConvCases) {
      const Tensor x16 = random_input(k.x, cpu, seed++).to(dt).to(cuda);
      const Tensor w16 = random_input(k.w, cpu, seed++).to(dt).to(cuda);
      Tensor x = x16.detach(), w = w16.detach();
      x.requires_grad_();
      w.requires_grad_();
      Tensor xr = x16.to(cpu).to(DType::kFloat64), wr = w16.to(cpu).to(DType::kFloat64);
      xr.requires_grad_();
      wr.requires_grad_();
      const Tensor yr = conv2d(xr, wr, Tensor(), k.p);
      const Tensor g = random_input(yr.sizes(), cpu, seed++).to(dt);
      const TensorList want = grad({yr}, {xr, wr}, {g.to(DType::kFloat64)});
      const Tensor g_cuda = g.to(cuda);
      KernelNames seen;
      const Tensor y = conv2d(x, w, Tensor(), k.p);
      CHECK(y.grad_fn()->name() == "CudnnConvolutionBackward");
      CHECK(std::count(seen.names.begin(), seen.names.end(), "cudnn_conv2d") == 1);
      CHECK(y.dtype() == dt);
      seen.names.clear();
      const TensorList got = grad({y}, {x, w}, {g_cuda});
      CHECK(std::count(seen.names.begin(), seen.names.end(), "cudnn_conv2d_backward") == 1);
      check_values(y.to(cpu).to(DType::kFloat64), values(yr), tol);
      check_values(got[0].to(cpu).to(DType::kFloat64), values(want[0]), tol);
      check_values(got[1].to(cpu).to(DType::kFloat64), values(want[1]), tol);
    }
  }
}

TEST_CASE("conv2d on cuda stays differentiable under create_graph", "[ops][conv][cuda]") {
  require_cuda_device();
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
  require_cuda_device();
  PlanCache& cache = cudnn_conv_plan_cache(0);
  CHECK(cache.max_size() == PlanCache::kDefaultMaxSize);
  const auto [x, w] = testing::walk_plan_cache(cache, Device("cuda:0"), 80);
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
