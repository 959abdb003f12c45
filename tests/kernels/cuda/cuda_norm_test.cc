// The cuda layer and RMS normalisation kernels (kernels/cuda/layer_norm.cu) against the
// cpu's: statistics, output and gradients within rounding (the device sums each row
// through its own tree and each column of the parameter gradients in one run of rows),
// and the same bits on a second run (no atomics). Rows longer than the block and more rows
// than one block covers, with and without weight and bias. Without a GPU each case says
// once that it skipped and why.
#include <catch2/catch.hpp>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/nn_kernels.h"
#include "runtime/runtime.h"
#include "tests/kernels/cuda/cuda_test_util.h"
#include "tests/kernels/kernel_test_util.h"

namespace streamgrad {
namespace {

namespace k = kernels;
using testing::Buffer;
using testing::Shape;

// out, mean, rstd, grad_in, grad_weight, grad_bias of one run, concatenated.
template <typename T>
std::vector<T> run(Device d, bool rms, bool affine, int64_t m, int64_t n) {
  const size_t total = static_cast<size_t>(m * n);
  const std::vector<T> x = testing::random_values<T>(total, -2, 3, 61);
  const std::vector<T> g = testing::random_values<T>(total, -1, 1, 62);
  const std::vector<T> w = testing::random_values<T>(static_cast<size_t>(n), 0.5, 2, 63);
  const std::vector<T> b = testing::random_values<T>(static_cast<size_t>(n), -1, 1, 64);
  const Shape rows({m, n}), per_row({m}), per_col({n});
  const Stream s = current_stream(d);
  Buffer<T> bx(d, x), bg(d, g), bw(d, w), bb(d, b), out(d, total, T(0)),
      mean(d, static_cast<size_t>(m), T(0)), rstd(d, static_cast<size_t>(m), T(0)),
      gin(d, total, T(0)), gw(d, static_cast<size_t>(n), T(0)), gb(d, static_cast<size_t>(n), T(0));
  const k::View wv = bw.view(per_col), bv = bb.view(per_col), gin_v = gin.view(rows),
                gw_v = gw.view(per_col), gb_v = gb.view(per_col);
  const k::View* wp = affine ? &wv : nullptr;
  if (rms) {
    k::rms_norm_forward(s, out.view(rows), rstd.view(per_row), bx.view(rows), wp, 1e-5);
    k::rms_norm_backward(s, &gin_v, &gw_v, bg.view(rows), bx.view(rows), rstd.view(per_row), wp);
  } else {
    k::layer_norm_forward(s, out.view(rows), mean.view(per_row), rstd.view(per_row),
                          bx.view(rows), wp, affine ? &bv : nullptr, 1e-5);
    k::layer_norm_backward(s, &gin_v, &gw_v, &gb_v, bg.view(rows), bx.view(rows),
                           mean.view(per_row), rstd.view(per_row), wp);
  }
  std::vector<T> all;
  for (const Buffer<T>* r : {&out, &mean, &rstd, &gin, &gw, &gb}) {
    const std::vector<T> v = r->read();
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

TEMPLATE_TEST_CASE("cuda layer_norm and rms_norm equal the cpu's within rounding",
                   "[cuda][kernels][norm]", float, double) {
  using T = TestType;
  testing::require_cuda_device();
  const double tol = std::is_same<T, float>::value ? 2e-5 : 1e-12;
  for (const bool rms : {false, true}) {
    for (const bool affine : {false, true}) {
      // More rows than the kernels' block cap: the rows' grid-stride loop (the interpreted
      // device caps blocks lower, kernels/cuda/indexing.cuh).
      const int64_t many = testing::interpreted_cuda() ? 100 : 70000;
      for (const auto& [m, n] : {std::pair<int64_t, int64_t>{5, 1000}, {many, 3}, {3, 17}}) {
        INFO("rms " << rms << " affine " << affine << " [" << m << ", " << n << "]");
        const std::vector<T> cpu = run<T>(Device("cpu"), rms, affine, m, n);
        const std::vector<T> gpu = run<T>(Device("cuda:0"), rms, affine, m, n);
        REQUIRE(gpu.size() == cpu.size());
        for (size_t j = 0; j < cpu.size(); ++j) {
          INFO("element " << j);
          // The parameter gradients sum m rows: their rounding grows with m.
          const double scale = j + 2 * static_cast<size_t>(n) >= cpu.size() ? double(m) : 1.0;
          CHECK(std::fabs(gpu[j] - cpu[j]) <= tol * scale * (1 + std::fabs(cpu[j])));
        }
        testing::check_ulps(run<T>(Device("cuda:0"), rms, affine, m, n), gpu, 0);
      }
    }
  }
}

}  // namespace
}  // namespace streamgrad
