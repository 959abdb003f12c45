// reduce over every subset of dims (sum / max / min) and arg_reduce along each dim,
// against reference loops; accuracy of float32 sums, NaN, ties, empty inputs, errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/kernels.h"
#include "tests/kernels/kernel_test_util.h"

namespace streamgrad {
namespace {

using kernels::Reduce;
using testing::Buffer;
using testing::gather;
using testing::LaunchLog;
using testing::random_values;
using testing::Shape;
using Catch::Matchers::Contains;

// Row-major index of every element of `sizes`, as a multi-index.
std::vector<std::vector<int64_t>> all_indices(const std::vector<int64_t>& sizes) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t off : Shape(sizes).offsets()) {
    std::vector<int64_t> idx(sizes.size());
    for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
      idx[d] = off % sizes[d];
      off /= sizes[d];
    }
    out.push_back(idx);
  }
  return out;
}

int64_t flat(const std::vector<int64_t>& idx, const std::vector<int64_t>& sizes) {
  int64_t f = 0;
  for (size_t d = 0; d < sizes.size(); ++d) f = f * sizes[d] + idx[d];
  return f;
}

TEMPLATE_TEST_CASE("reduce over every subset of dims", "[reduce]", float, double) {
  using T = TestType;
  const Device dev = testing::test_device();
  const Reduce op = GENERATE(Reduce::kSum, Reduce::kMax, Reduce::kMin);
  const int mask = GENERATE(range(0, 8));
  // Contiguous, or a permutation of a [3, 4, 2] buffer: between them every mask runs
  // both the per-output and the by-columns walk.
  const bool permuted = GENERATE(false, true);
  INFO("device " << dev << ", op " << static_cast<int>(op) << ", dims mask " << mask
                 << (permuted ? ", permuted" : ""));
  const Stream s = current_stream(dev);

  const std::vector<int64_t> sizes = {2, 3, 4};
  const Shape is = permuted ? Shape(sizes, {1, 8, 2}) : Shape(sizes);
  const std::vector<T> host = random_values<T>(24, -1, 1, 9);
  Buffer<T> in(dev, host);
  std::vector<int64_t> out_sizes = sizes;
  for (int d = 0; d < 3; ++d) {
    if (mask & (1 << d)) out_sizes[d] = 1;
  }
  // Out is keepdim, every other element of a buffer twice its size.
  std::vector<int64_t> out_strides = kernels::contiguous_strides(out_sizes);
  for (int64_t& st : out_strides) st *= 2;
  const Shape os(out_sizes, out_strides);
  Buffer<T> out(dev, 48, T(-99));
  LaunchLog log;
  kernels::reduce(s, op, out.view(os), in.view(is));
  log.expect_ranges(op == Reduce::kSum ? "sum" : op == Reduce::kMax ? "max" : "min",
                    {in.view(is)}, {out.view(os)});

  const std::vector<T> values = gather(host, is);
  const double init = op == Reduce::kSum ? 0
                      : op == Reduce::kMax ? -std::numeric_limits<double>::infinity()
                                           : std::numeric_limits<double>::infinity();
  std::vector<double> want(static_cast<size_t>(Shape(out_sizes).numel()), init);
  const auto idx = all_indices(sizes);
  for (size_t e = 0; e < idx.size(); ++e) {
    std::vector<int64_t> o = idx[e];
    for (int d = 0; d < 3; ++d) {
      if (mask & (1 << d)) o[d] = 0;
    }
    double& w = want[static_cast<size_t>(flat(o, out_sizes))];
    const double v = values[e];
    w = op == Reduce::kSum ? w + v : op == Reduce::kMax ? std::max(w, v) : std::min(w, v);
  }
  testing::check_close(gather(out.read(), os), want);
}

TEST_CASE("float32 sums accumulate in double", "[reduce]") {
  const Device dev = testing::test_device();
  std::vector<float> host(1002, 1.0f);
  host.front() = 1e8f;
  host.back() = -1e8f;  // float accumulation would lose every 1 against 1e8
  Buffer<float> in(dev, host);
  Buffer<float> out(dev, 1, 0.0f);
  kernels::reduce(current_stream(dev), Reduce::kSum, out.view(Shape({1})), in.view());
  CHECK(out.read()[0] == 1000.0f);
  // The same sum down a column of a [1002, 2] input.
  std::vector<float> wide(2004, 0.0f);
  for (size_t i = 0; i < host.size(); ++i) wide[2 * i] = host[i];
  Buffer<float> win(dev, wide);
  Buffer<float> wout(dev, 2, -1.0f);
  kernels::reduce(current_stream(dev), Reduce::kSum, wout.view(Shape({1, 2})),
                  win.view(Shape({1002, 2})));
  CHECK(wout.read() == std::vector<float>{1000.0f, 0.0f});
}

TEST_CASE("max and min propagate NaN; sums of nothing are zero", "[reduce]") {
  const Device dev = testing::test_device();
  const Stream s = current_stream(dev);
  const double nan = std::nan("");
  Buffer<double> in(dev, {1, nan, 3, 4, 5, 6});
  Buffer<double> out(dev, 2, 0.0);
  const Shape is({2, 3}), os({2, 1});
  kernels::reduce(s, Reduce::kMax, out.view(os), in.view(is));
  testing::check_close(out.read(), {nan, 6});
  kernels::reduce(s, Reduce::kMin, out.view(os), in.view(is));
  testing::check_close(out.read(), {nan, 4});
  // Over the outer dim (the by-columns walk).
  Buffer<double> cols(dev, 3, 0.0);
  kernels::reduce(s, Reduce::kMax, cols.view(Shape({1, 3})), in.view(is));
  testing::check_close(cols.read(), {4, nan, 6});
  kernels::reduce(s, Reduce::kMin, cols.view(Shape({1, 3})), in.view(is));
  testing::check_close(cols.read(), {1, nan, 3});

  Buffer<double> empty(dev, 1, 0.0);
  Buffer<double> zeros(dev, 3, 7.0);
  kernels::reduce(s, Reduce::kSum, zeros.view(Shape({1, 3})), empty.view(Shape({0, 3})));
  CHECK(zeros.read() == std::vector<double>{0, 0, 0});
  CHECK_THROWS_WITH(
      kernels::reduce(s, Reduce::kMax, zeros.view(Shape({1, 3})), empty.view(Shape({0, 3}))),
      Contains("max") && Contains("empty"));
}

TEST_CASE("reduce errors", "[reduce][errors]") {
  const Device dev = testing::test_device();
  const Stream s = current_stream(dev);
  Buffer<float> f(dev, 12, 0.0f);
  Buffer<float> o(dev, 4, 0.0f);
  Buffer<double> d(dev, 4, 0.0);
  LaunchLog log;
  const Shape is({3, 4});
  CHECK_THROWS_WITH(kernels::reduce(s, Reduce::kSum, o.view(Shape({4})), f.view(is)),
                    Contains("sum") && Contains("rank"));
  CHECK_THROWS_AS(kernels::reduce(s, Reduce::kSum, o.view(Shape({2, 1})), f.view(is)),
                  ValueError);
  CHECK_THROWS_AS(kernels::reduce(s, Reduce::kSum, d.view(Shape({1, 4})), f.view(is)),
                  ValueError);
  CHECK_THROWS_WITH(kernels::reduce(s, Reduce::kSum, f.view(Shape({1, 4})), f.view(is)),
                    Contains("overlaps"));
  CHECK(log.count() == 0);
}

TEMPLATE_TEST_CASE("arg_reduce along each dim picks the first of equal values",
                   "[arg_reduce]", float, double) {
  using T = TestType;
  const Device dev = testing::test_device();
  const bool is_max = GENERATE(true, false);
  const int64_t dim = GENERATE(0, 1);
  INFO("device " << dev << (is_max ? ", max" : ", min") << ", dim " << dim);
  const Stream s = current_stream(dev);
  // Few distinct values, so ties are everywhere. Stored [4, 3], read transposed.
  const std::vector<T> host = {2, 1, 2, 0, 1, 2, 2, 0, 0, 1, 1, 2};
  const Shape is = Shape({4, 3}).transposed(0, 1);
  Buffer<T> in(dev, host);
  std::vector<int64_t> kept = {3, 4};
  kept[dim] = 1;
  Buffer<T> values(dev, 4, T(-1));
  Buffer<int64_t> indices(dev, 4, -1);
  LaunchLog log;
  kernels::arg_reduce(s, is_max, values.view(Shape(kept)), indices.view(Shape(kept)),
                      in.view(is), dim);
  log.expect_ranges(is_max ? "argmax" : "argmin", {in.view(is)},
                    {values.view(Shape(kept)), indices.view(Shape(kept))});

  const std::vector<T> x = gather(host, is);  // row-major [3, 4]
  const std::vector<T> gv = values.read();
  const std::vector<int64_t> gi = indices.read();
  const int64_t n = dim == 0 ? 3 : 4, others = dim == 0 ? 4 : 3;
  for (int64_t o = 0; o < others; ++o) {
    auto at = [&](int64_t k) { return dim == 0 ? x[k * 4 + o] : x[o * 4 + k]; };
    int64_t best = 0;
    for (int64_t k = 1; k < n; ++k) {
      if (is_max ? at(k) > at(best) : at(k) < at(best)) best = k;
    }
    INFO("slice " << o);
    CHECK(gi[o] == best);
    CHECK(gv[o] == at(best));
  }
}

TEST_CASE("arg_reduce returns the first NaN, and validates its views", "[arg_reduce]") {
  const Device dev = testing::test_device();
  const Stream s = current_stream(dev);
  const double nan = std::nan("");
  Buffer<double> in(dev, {1, nan, 5, nan});
  Buffer<double> v(dev, 1, 0.0);
  Buffer<int64_t> i(dev, 1, -1);
  const Shape is({1, 4}), os({1, 1});
  kernels::arg_reduce(s, true, v.view(os), i.view(os), in.view(is), 1);
  CHECK(std::isnan(v.read()[0]));
  CHECK(i.read()[0] == 1);

  LaunchLog log;
  CHECK_THROWS_WITH(kernels::arg_reduce(s, true, v.view(os), i.view(os), in.view(is), 2),
                    Contains("argmax") && Contains("dim 2"));
  CHECK_THROWS_AS(kernels::arg_reduce(s, false, v.view(os), i.view(os), in.view(is), -1),
                  ValueError);
  CHECK_THROWS_AS(kernels::arg_reduce(s, true, v.view(os), v.view(os), in.view(is), 1),
                  ValueError);  // indices must be int64
  CHECK_THROWS_AS(kernels::arg_reduce(s, true, v.view(Shape({1})), i.view(Shape({1})),
                                      in.view(is), 1),
                  ValueError);
  Buffer<double> empty(dev, 1, 0.0);
  CHECK_THROWS_AS(kernels::arg_reduce(s, true, v.view(os), i.view(os),
                                      empty.view(Shape({1, 0})), 1),
                  ValueError);
  CHECK(log.count() == 0);
}

}  // namespace
}  // namespace streamgrad
