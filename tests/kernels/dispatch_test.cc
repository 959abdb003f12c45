// Kernels on a cuda stream without a GPU (made with Stream::unchecked): a DeviceError
// naming the kernel, nothing written (a build without nvcc refuses at the device check,
// one with nvcc when the backend finds no device; tests/kernels/cuda runs them on a GPU).
// And on sim, work that runs
// long after the call returned, with the caller's views gone, still computes the right
// thing (under ASan a captured reference would be a stack-use-after-scope).
#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/foreach.h"
#include "kernels/kernels.h"
#include "tests/kernels/kernel_test_util.h"

namespace streamgrad {
namespace {

namespace k = kernels;

TEST_CASE("kernels take cuda streams; without a GPU the launch fails cleanly, naming the kernel",
          "[dispatch]") {
  const Stream cuda = Stream::unchecked(Device(DeviceType::kCuda, 0), 0);
  std::vector<float> host(4, 1.0f), host2(4, 1.0f), host3(4, 1.0f), host4(4, 1.0f);
  auto view_of = [](std::vector<float>& h) {
    k::View v;
    v.data = h.data();
    v.dtype = DType::kFloat32;
    v.sizes = {4};
    v.strides = {1};
    return v;
  };
  const k::View v = view_of(host), v2 = view_of(host2), v3 = view_of(host3), v4 = view_of(host4);
  const std::vector<std::pair<std::string, std::function<void()>>> calls = {
      {"exp", [&] { k::unary(cuda, k::Unary::kExp, v, v); }},
      {"mul_scalar", [&] { k::unary_scalar(cuda, k::UnaryScalar::kMul, v, v, 2); }},
      {"add", [&] { k::binary(cuda, k::Binary::kAdd, v, v, v); }},
      {"axpy", [&] { k::axpy(cuda, v, v, v, 1); }},
      {"fill", [&] { k::fill(cuda, v, 0); }},
      {"copy", [&] { k::copy(cuda, v, v); }},
      {"uniform", [&] { k::uniform(cuda, v, 0, 1, 0, 0); }},
      {"normal", [&] { k::normal(cuda, v, 0, 1, 0, 0); }},
      {"sgd_update", [&] { k::sgd_update(cuda, {0.1}, {{v, v2, v3}}); }},
      {"adam_update", [&] { k::adam_update(cuda, {0.1}, {{v, v2, v3, v4, 1}}); }},
      {"non_finite_check_and_unscale",
       [&] {
         k::View flag = v4;
         flag.sizes = {1};
         k::non_finite_check_and_unscale(cuda, {v, v2}, flag, 0.5);
       }},
  };
  for (const auto& call : calls) {
    INFO(call.first);
    if (device_count(DeviceType::kCuda) > 0) break;  // a GPU: tests/kernels/cuda runs them
    try {
      call.second();
      FAIL("no DeviceError");
    } catch (const DeviceError& e) {
      // Built with nvcc: the check passes and the cuda backend refuses (no driver); built
      // without: the check names the missing build.
      INFO(e.what());
      const std::string what = e.what();
      CHECK((what.find(call.first + ": ") != std::string::npos));
      CHECK((what.find("cuda") != std::string::npos));
      CHECK((what.find("no cuda implementation yet") == std::string::npos));
    }
  }
  CHECK(host == std::vector<float>(4, 1.0f));
}

TEST_CASE("sim work runs after the call, from what the launch captured", "[dispatch]") {
  SimSchedulerOptions deterministic;
  deterministic.kind = SimSchedulerKind::kDeterministic;
  deterministic.policy = SimPolicy::kAdversarial;
  SimSchedulerScope scope(deterministic);  // nothing runs until the host waits
  const Device dev("sim:0");
  const Stream s = current_stream(dev);
  using testing::Buffer;
  using testing::Shape;
  Buffer<float> a(dev, {1, 2, 3, 4, 5, 6}), b(dev, {1, 0, 0, 1, 1, 1});
  Buffer<float> sum(dev, 6, 0.0f), red(dev, 2, 0.0f), prod(dev, 4, 0.0f), sel(dev, 4, 0.0f);
  Buffer<float> vals(dev, 2, 0.0f);
  Buffer<float> bt(dev, {1, 9, 0, 9, 0, 9, 1, 9, 1, 9, 1, 9});  // 9s are never read
  Buffer<int64_t> idx(dev, 2, -1), index(dev, {1, 0});
  {
    // Views and sizes die at the end of this scope, before any task has run.
    const k::View va = a.view(Shape({2, 3})), vb = b.view(Shape({2, 3}));
    k::binary(s, k::Binary::kAdd, sum.view(Shape({2, 3})), va, vb);
    k::reduce(s, k::Reduce::kSum, red.view(Shape({2, 1})), va);
    k::arg_reduce(s, false, vals.view(Shape({2, 1})), idx.view(Shape({2, 1})), va, 1);
    // b^T again, through strides BLAS cannot read, so the task packs it into scratch.
    k::matmul(s, prod.view(Shape({2, 2})), va, bt.view(Shape({3, 2}, {2, 6})));
    k::index_select(s, sel.view(Shape({2, 2})), a.view(Shape({2, 3}, {3, 1})), 1,
                    index.view());
  }
  CHECK_FALSE(s.query());  // all still queued
  CHECK(sum.read() == std::vector<float>{2, 2, 3, 5, 6, 7});
  CHECK(red.read() == std::vector<float>{6, 15});
  CHECK(vals.read() == std::vector<float>{1, 4});
  CHECK(idx.read() == std::vector<int64_t>{0, 0});
  // prod[i][j] = sum_k a[i][k] * b[j][k]
  CHECK(prod.read() == std::vector<float>{1, 6, 4, 15});
  CHECK(sel.read() == std::vector<float>{2, 1, 5, 4});
}

}  // namespace
}  // namespace streamgrad
