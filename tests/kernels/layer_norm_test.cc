// layer_norm_forward / rms_norm_forward and their backwards (kernels/nn_kernels.h): values
// against a long double reference of the formulas on cpu and sim, rows of odd lengths
// around the 16-lane width and past a sum block; the same bits at every instruction-set
// level and at 1 and 2 threads (the parameter gradients sum over rows in a fixed order);
// 16-bit views computed in float32 (chunked when large, with the same bits as whole);
// the checks' errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/nn_kernels.h"
#include "runtime/base/half.h"
#include "tests/kernels/level_test_util.h"

namespace streamgrad {
namespace {

namespace k = kernels;
using testing::Buffer;
using testing::Shape;

struct Config {
  int64_t m, n;
  bool rms, weight, bias;
};

// Inputs of one case, on the host.
template <typename T>
struct Inputs {
  std::vector<T> x, g, w, b;
};

template <typename T>
Inputs<T> make_inputs(const Config& c, uint32_t seed) {
  const size_t total = static_cast<size_t>(c.m * c.n), n = static_cast<size_t>(c.n);
  return {testing::random_values<T>(total, -2, 3, seed),
          testing::random_values<T>(total, -1, 1, seed + 1),
          testing::random_values<T>(n, 0.5, 2, seed + 2),
          testing::random_values<T>(n, -1, 1, seed + 3)};
}

// Everything the kernels write: out, mean (layer norm), rstd, grad_in, grad_weight,
// grad_bias.
template <typename T>
struct Results {
  std::vector<T> out, mean, rstd, gin, gw, gb;
};

template <typename T>
Results<T> run(Device d, const Config& c, const Inputs<T>& in, double eps = 1e-5) {
  const Stream s = current_stream(d);
  const size_t total = static_cast<size_t>(c.m * c.n);
  const size_t m = static_cast<size_t>(c.m), n = static_cast<size_t>(c.n);
  const Shape rows({c.m, c.n}), per_row({c.m}), per_col({c.n});
  const Buffer<T> x(d, in.x), g(d, in.g), w(d, in.w), b(d, in.b);
  const Buffer<T> out(d, total, T(-7)), mean(d, m, T(-7)), rstd(d, m, T(-7));
  const Buffer<T> gin(d, total, T(-7)), gw(d, n, T(-7)), gb(d, n, T(-7));
  const k::View wv = w.view(per_col), bv = b.view(per_col);
  const k::View* wp = c.weight ? &wv : nullptr;
  const k::View* bp = c.bias ? &bv : nullptr;
  const k::View gin_v = gin.view(rows), gw_v = gw.view(per_col), gb_v = gb.view(per_col);
  if (c.rms) {
    k::rms_norm_forward(s, out.view(rows), rstd.view(per_row), x.view(rows), wp, eps);
    k::rms_norm_backward(s, &gin_v, c.weight ? &gw_v : nullptr, g.view(rows), x.view(rows),
                         rstd.view(per_row), wp);
  } else {
    k::layer_norm_forward(s, out.view(rows), mean.view(per_row), rstd.view(per_row),
                          x.view(rows), wp, bp, eps);
    k::layer_norm_backward(s, &gin_v, c.weight ? &gw_v : nullptr, c.bias ? &gb_v : nullptr,
                           g.view(rows), x.view(rows), mean.view(per_row), rstd.view(per_row),
                           wp);
  }
  return {out.read(), mean.read(), rstd.read(), gin.read(), gw.read(), gb.read()};
}

// The formulas in long double, written from their definitions.
template <typename T>
Results<long double> reference(const Config& c, const Inputs<T>& in, long double eps) {
  using L = long double;
  const int64_t m = c.m, n = c.n;
  Results<L> r;
  r.gw.assign(static_cast<size_t>(n), 0);
  r.gb.assign(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < m; ++i) {
    auto x = [&](int64_t j) { return L(in.x[i * n + j]); };
    auto w = [&](int64_t j) { return c.weight ? L(in.w[j]) : L(1); };
    L mu = 0, var = 0;
    if (!c.rms) {
      for (int64_t j = 0; j < n; ++j) mu += x(j);
      mu /= n;
    }
    for (int64_t j = 0; j < n; ++j) var += (x(j) - mu) * (x(j) - mu);
    const L rstd = 1 / std::sqrt(var / n + eps);
    r.mean.push_back(mu);
    r.rstd.push_back(rstd);
    L mean_gw = 0, mean_gwx = 0;
    for (int64_t j = 0; j < n; ++j) {
      const L xhat = (x(j) - mu) * rstd, g = in.g[i * n + j];
      r.out.push_back(xhat * w(j) + (c.bias && !c.rms ? L(in.b[j]) : L(0)));
      mean_gw += g * w(j) / n;
      mean_gwx += g * w(j) * xhat / n;
      r.gw[j] += g * xhat;
      r.gb[j] += g;
    }
    for (int64_t j = 0; j < n; ++j) {
      const L xhat = (x(j) - mu) * rstd, gw = L(in.g[i * n + j]) * w(j);
      r.gin.push_back(rstd * (gw - (c.rms ? 0 : mean_gw) - xhat * mean_gwx));
    }
  }
  return r;
}

template <typename T>
void check_close(const std::vector<T>& got, const std::vector<long double>& want,
                 const char* what, double tol) {
  INFO(what);
  REQUIRE(got.size() >= want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    CHECK(static_cast<double>(got[i]) ==
          Approx(static_cast<double>(want[i])).epsilon(tol).margin(tol));
  }
}

template <typename T>
void check_against_reference(Device d, const Config& c) {
  INFO((c.rms ? "rms_norm" : "layer_norm") << " [" << c.m << ", " << c.n << "] weight "
                                           << c.weight << " bias " << c.bias << " on " << d);
  const Inputs<T> in = make_inputs<T>(c, 21);
  const Results<T> got = run(d, c, in);
  const Results<long double> want = reference(c, in, 1e-5L);
  // float32: a few ulps of the row's scale; float64: far below any formula slip.
  const double tol = std::is_same<T, float>::value ? 2e-5 : 1e-11;
  check_close(got.out, want.out, "out", tol);
  if (!c.rms) check_close(got.mean, want.mean, "mean", tol);
  check_close(got.rstd, want.rstd, "rstd", tol);
  check_close(got.gin, want.gin, "grad_in", tol);
  if (c.weight) check_close(got.gw, want.gw, "grad_weight", tol * c.m);
  if (c.bias && !c.rms) check_close(got.gb, want.gb, "grad_bias", tol * c.m);
}

TEMPLATE_TEST_CASE("layer_norm and rms_norm match the formulas in long double",
                   "[kernels][norm]", float, double) {
  const Device d = testing::test_device();
  for (const bool rms : {false, true}) {
    for (const int64_t n : {1, 3, 15, 16, 17, 33, 4097}) {
      check_against_reference<TestType>(d, {5, n, rms, true, true});
    }
    check_against_reference<TestType>(d, {3, 7, rms, false, false});
    check_against_reference<TestType>(d, {4, 9, rms, true, false});
    check_against_reference<TestType>(d, {1, 6, rms, false, true});
  }
}

TEMPLATE_TEST_CASE("layer_norm and rms_norm give the same bits at every level",
                   "[kernels][norm][levels]", float, double) {
  const Device cpu("cpu");
  for (const bool rms : {false, true}) {
    for (const int64_t n : {1, 15, 16, 17, 33, 196, 4097}) {
      const Config c{3, n, rms, true, true};
      INFO("rms " << rms << " n " << n);
      const Inputs<TestType> in = make_inputs<TestType>(c, 31);
      Results<TestType> first;
      for (CpuCapability level : testing::machine_levels()) {
        INFO("level " << cpu_capability_name(level));
        testing::CapabilityScope scope(level);
        const Results<TestType> r = run(cpu, c, in);
        if (first.out.empty()) {
          first = r;
          continue;
        }
        testing::same_bits(r.out, first.out);
        testing::same_bits(r.mean, first.mean);
        testing::same_bits(r.rstd, first.rstd);
        testing::same_bits(r.gin, first.gin);
        testing::same_bits(r.gw, first.gw);
        testing::same_bits(r.gb, first.gb);
      }
    }
  }
}

TEMPLATE_TEST_CASE("layer_norm and rms_norm give the same bits at 1 and 2 threads",
                   "[kernels][norm]", float, double) {
  // Large enough that both the rows and the backward's blocks of rows are split. (float64
  // shows a changed order of the parameter gradients' sums; float32 rounds most of it away.)
  // The thread count governs the host kernels only: cpu and sim (cuda's runs twice alike
  // are checked by tests/kernels/cuda).
  const Device d(GENERATE(as<std::string>{}, "cpu", "sim:0"));
  for (const bool rms : {false, true}) {
    const Config c{2048, 300, rms, true, true};
    INFO("rms " << rms << " on " << d);
    const Inputs<TestType> in = make_inputs<TestType>(c, 41);
    Results<TestType> one, two;
    {
      testing::ThreadsScope threads(1);
      one = run(d, c, in);
    }
    {
      testing::ThreadsScope threads(2);
      two = run(d, c, in);
    }
    testing::same_bits(two.out, one.out);
    testing::same_bits(two.mean, one.mean);
    testing::same_bits(two.rstd, one.rstd);
    testing::same_bits(two.gin, one.gin);
    testing::same_bits(two.gw, one.gw);
    testing::same_bits(two.gb, one.gb);
  }
}

TEST_CASE("layer_norm's parameter gradients over no rows are zeros", "[kernels][norm]") {
  const Device d = testing::test_device();
  const Buffer<float> x(d, 1, 0.0f), g(d, 1, 0.0f), stat(d, 1, 0.0f);
  const Buffer<float> gw(d, 3, 5.0f), gb(d, 3, 5.0f);
  const k::View gw_v = gw.view(Shape({3})), gb_v = gb.view(Shape({3}));
  k::layer_norm_backward(current_stream(d), nullptr, &gw_v, &gb_v, g.view(Shape({0, 3})),
                         x.view(Shape({0, 3})), stat.view(Shape({0})), stat.view(Shape({0})),
                         nullptr);
  CHECK(gw.read() == std::vector<float>(3, 0.0f));
  CHECK(gb.read() == std::vector<float>(3, 0.0f));
}

// float16 in and out beside float32 statistics, weight and bias (mixed precision): the
// float32 kernels on the exactly widened input, each 16-bit output rounded once. The
// large case is widened in chunks (rows forward and for grad_in, columns for the
// parameter gradients), with the same bits.
void check_half(Device d, const Config& c) {
  INFO((c.rms ? "rms_norm" : "layer_norm") << " [" << c.m << ", " << c.n << "] on " << d);
  Inputs<float> in = make_inputs<float>(c, 51);
  std::vector<Half> xh, gh;
  for (float& v : in.x) {
    xh.push_back(Half::from_float(v));
    v = xh.back().to_float();
  }
  for (float& v : in.g) {
    gh.push_back(Half::from_float(v));
    v = gh.back().to_float();
  }
  const Results<float> want = run(d, c, in);
  const Stream s = current_stream(d);
  const size_t total = static_cast<size_t>(c.m * c.n), m = static_cast<size_t>(c.m);
  const Shape rows({c.m, c.n}), per_row({c.m}), per_col({c.n});
  const Buffer<Half> x(d, xh), g(d, gh), out(d, total, Half{}), gin(d, total, Half{});
  const Buffer<float> w(d, in.w), b(d, in.b), mean(d, m, -7.0f), rstd(d, m, -7.0f);
  const Buffer<float> gw(d, in.w.size(), -7.0f), gb(d, in.w.size(), -7.0f);
  const k::View wv = w.view(per_col), bv = b.view(per_col), gin_v = gin.view(rows),
                gw_v = gw.view(per_col), gb_v = gb.view(per_col);
  if (c.rms) {
    k::rms_norm_forward(s, out.view(rows), rstd.view(per_row), x.view(rows), &wv, 1e-5);
    k::rms_norm_backward(s, &gin_v, &gw_v, g.view(rows), x.view(rows), rstd.view(per_row), &wv);
  } else {
    k::layer_norm_forward(s, out.view(rows), mean.view(per_row), rstd.view(per_row),
                          x.view(rows), &wv, &bv, 1e-5);
    k::layer_norm_backward(s, &gin_v, &gw_v, &gb_v, g.view(rows), x.view(rows),
                           mean.view(per_row), rstd.view(per_row), &wv);
  }
  auto rounded = [](const std::vector<float>& v) {
    std::vector<uint16_t> r;
    for (float f : v) r.push_back(Half::from_float(f).bits);
    return r;
  };
  auto bits = [](const std::vector<Half>& v) {
    std::vector<uint16_t> r;
    for (Half h : v) r.push_back(h.bits);
    return r;
  };
  CHECK(bits(out.read()) == rounded(want.out));
  CHECK(bits(gin.read()) == rounded(want.gin));
  testing::same_bits(rstd.read(), want.rstd);
  testing::same_bits(gw.read(), want.gw);
  if (!c.rms) {
    testing::same_bits(mean.read(), want.mean);
    testing::same_bits(gb.read(), want.gb);
  }
}

TEST_CASE("16-bit layer_norm and rms_norm compute in float32, whole or in chunks",
          "[kernels][norm][amp]") {
  const Device d = testing::test_device();
  for (const bool rms : {false, true}) {
    check_half(d, {6, 37, rms, true, true});
    // 2 * 1000 widened values per row: 131 rows per chunk; 2 * 300 per column: 436 columns.
    check_half(d, {300, 1000, rms, true, true});
  }
}

TEST_CASE("layer_norm's kernels refuse malformed views", "[kernels][norm][errors]") {
  const Device cpu("cpu");
  const Stream s(cpu);
  const Buffer<float> x(cpu, 12, 1.0f), out(cpu, 12, 0.0f), stat(cpu, 4, 0.0f);
  const Buffer<double> dbl(cpu, 12, 0.0);
  const Shape rows({3, 4}), per_row({3});
  const k::View w3 = stat.view(Shape({3})), w4 = stat.view(Shape({4}));
  CHECK_THROWS_WITH(k::layer_norm_forward(s, out.view(rows), stat.view(per_row),
                                          stat.view(per_row), x.view(rows), &w3, nullptr, 1e-5),
                    Catch::Contains("layer_norm: weight must be a contiguous [4], one per column"));
  CHECK_THROWS_WITH(k::rms_norm_forward(s, out.view(Shape({4, 3})), stat.view(per_row),
                                        x.view(rows), &w4, 1e-5),
                    Catch::Contains("rms_norm: out must be a contiguous [3, 4] view"));
  CHECK_THROWS_AS(k::layer_norm_forward(s, dbl.view(rows), stat.view(per_row),
                                        stat.view(per_row), x.view(rows), nullptr, nullptr, 1e-5),
                  ValueError);
  CHECK_THROWS_WITH(k::rms_norm_forward(s, out.view(rows), stat.view(per_row),
                                        x.view(Shape({3, 4}, {1, 3})), nullptr, 1e-5),
                    Catch::Contains("in must be a contiguous [M, N] view"));
  const k::View gin = out.view(rows);
  CHECK_THROWS_WITH(k::layer_norm_backward(s, &gin, nullptr, nullptr, x.view(rows), x.view(rows),
                                           stat.view(per_row), stat.view(Shape({4})), nullptr),
                    Catch::Contains("layer_norm_backward: rstd must be a contiguous [3], one per row"));
}

}  // namespace
}  // namespace streamgrad
