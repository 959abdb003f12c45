// index_select, index_add (duplicates accumulate) and scatter_add, along each dim and
// with strided views; out-of-range indices (a ValueError at the call on cpu, at the next
// synchronize on sim, never a stray access) and argument errors.
#include <catch2/catch.hpp>
#include <functional>
#include <vector>

#include "kernels/dispatch/kernel_args.h"
#include "kernels/kernels.h"
#include "tests/kernels/kernel_test_util.h"

namespace streamgrad {
namespace {

using testing::Buffer;
using testing::gather;
using testing::LaunchLog;
using testing::random_values;
using testing::Shape;
using Catch::Matchers::Contains;

TEMPLATE_TEST_CASE("index_select along each dim of a transposed input", "[index]", float,
                   double, int64_t) {
  using T = TestType;
  const Device dev = testing::test_device();
  const int64_t dim = GENERATE(0, 1);
  INFO("device " << dev << ", dim " << dim);
  const Stream s = current_stream(dev);
  std::vector<T> host(12);
  for (int i = 0; i < 12; ++i) host[i] = static_cast<T>(i * 3 + 1);
  const Shape is = Shape({3, 4}).transposed(0, 1);  // [4, 3]
  Buffer<T> in(dev, host);
  // Index {2, 0, 2, 1} read with stride 2 from {2, 9, 0, 9, 2, 9, 1, 9}.
  Buffer<int64_t> index(dev, {2, 9, 0, 9, 2, 9, 1, 9});
  const Shape xs({4}, {2});
  std::vector<int64_t> out_sizes = {4, 3};
  out_sizes[dim] = 4;
  Buffer<T> out(dev, 16, T(0));
  const Shape os(out_sizes);
  LaunchLog log;
  kernels::index_select(s, out.view(os), in.view(is), dim, index.view(xs));
  log.expect_ranges("index_select", {in.view(is), index.view(xs)}, {out.view(os)});

  const std::vector<T> x = gather(host, is);  // row-major [4, 3]
  const std::vector<int64_t> idx = {2, 0, 2, 1};
  const std::vector<T> got = gather(out.read(), os);
  for (int64_t i = 0; i < out_sizes[0]; ++i) {
    for (int64_t j = 0; j < out_sizes[1]; ++j) {
      const T want = dim == 0 ? x[idx[i] * 3 + j] : x[i * 3 + idx[j]];
      CHECK(got[i * out_sizes[1] + j] == want);
    }
  }
}

TEMPLATE_TEST_CASE("index_add accumulates duplicate indices", "[index]", float, double) {
  using T = TestType;
  const Device dev = testing::test_device();
  const int64_t dim = GENERATE(0, 1);
  INFO("device " << dev << ", dim " << dim);
  const Stream s = current_stream(dev);
  const std::vector<T> hout = random_values<T>(12, -1, 1, 41);
  const std::vector<T> hsrc = random_values<T>(16, -1, 1, 42);
  Buffer<T> out(dev, hout), src(dev, hsrc);
  // out is [4, 3]; src has index.numel() == 4 entries along dim.
  const std::vector<int64_t> idx = dim == 0 ? std::vector<int64_t>{1, 3, 1, 1}
                                            : std::vector<int64_t>{2, 0, 2, 2};
  Buffer<int64_t> index(dev, idx);
  const Shape os({4, 3});
  const Shape ss = dim == 0 ? Shape({4, 3}, {1, 4}) : Shape({4, 4}, {1, 4});  // transposed
  LaunchLog log;
  kernels::index_add(s, out.view(os), dim, index.view(), src.view(ss));
  log.expect_ranges("index_add", {out.view(os), src.view(ss), index.view()}, {out.view(os)});

  std::vector<double> want(hout.begin(), hout.end());
  const std::vector<T> g = gather(hsrc, ss);
  const int64_t src_cols = ss.sizes[1];
  for (int64_t i = 0; i < ss.sizes[0]; ++i) {
    for (int64_t j = 0; j < src_cols; ++j) {
      const int64_t r = dim == 0 ? idx[i] : i, c = dim == 0 ? j : idx[j];
      want[r * 3 + c] += g[i * src_cols + j];
    }
  }
  testing::check_close(out.read(), want);
}

TEMPLATE_TEST_CASE("scatter_add routes gradients to arg_reduce's indices", "[index]", float,
                   double) {
  using T = TestType;
  const Device dev = testing::test_device();
  INFO("device " << dev);
  const Stream s = current_stream(dev);

  SECTION("the backward of max along dim 1") {
    Buffer<T> in(dev, {1, 5, 2, 7, 3, 7, 0, 0, 4});
    Buffer<T> values(dev, 3, T(0)), grad(dev, {10, 20, 30}), out(dev, 9, T(0));
    Buffer<int64_t> indices(dev, 3, 0);
    const Shape ks({3, 1});
    kernels::arg_reduce(s, true, values.view(ks), indices.view(ks), in.view(Shape({3, 3})), 1);
    LaunchLog log;
    kernels::scatter_add(s, out.view(Shape({3, 3})), 1, indices.view(ks), grad.view(ks));
    log.expect_ranges("scatter_add", {out.view(Shape({3, 3})), grad.view(ks), indices.view(ks)},
                      {out.view(Shape({3, 3}))});
    CHECK(out.read() == std::vector<T>{0, 10, 0, 20, 0, 0, 0, 0, 30});
  }
  SECTION("along dim 0 with duplicates, src narrower than out") {
    Buffer<T> out(dev, 12, T(1));  // [3, 4]
    Buffer<int64_t> index(dev, {2, 0, 2, 1, 2, 2, 2, 0});  // [2, 3] in a [2, 4] buffer
    Buffer<T> src(dev, {1, 2, 3, 4, 5, 6, 7, 8});
    const Shape xs({2, 3}, {4, 1});
    kernels::scatter_add(s, out.view(Shape({3, 4})), 0, index.view(xs), src.view(xs));
    // out[index[i][j]][j] += src[i][j]
    CHECK(out.read() == std::vector<T>{1, 3, 1, 1, 1, 1, 1, 1, 7, 7, 11, 1});
  }
}

TEST_CASE("index_linear flattens wrapped indices; index_copy assigns through them", "[index]") {
  const Device dev = testing::test_device();
  INFO("device " << dev);
  const Stream s = current_stream(dev);
  // Positions in a [3, 4] from rows {2, -3} (a [2, 1] column) and columns {-1, 1}.
  Buffer<int64_t> rows(dev, {2, -3}), cols(dev, {-1, 1}), flat(dev, 4, 7);
  const Shape out({2, 2});
  LaunchLog log;
  kernels::index_linear(s, flat.view(out), rows.view(Shape({2, 2}, {1, 0})), 3, 4, false);
  log.expect_ranges("index_linear", {rows.view(Shape({2, 2}, {1, 0}))}, {flat.view(out)});
  kernels::index_linear(s, flat.view(out), cols.view(Shape({2, 2}, {0, 1})), 4, 1, true);
  CHECK(flat.read() == std::vector<int64_t>{11, 9, 3, 1});
  // An index outside [-size, size) marks its position bad for good.
  Buffer<int64_t> wild(dev, {4, 0}), marked(dev, 2, 0);
  kernels::index_linear(s, marked.view(Shape({2})), wild.view(), 4, 1, false);
  kernels::index_linear(s, marked.view(Shape({2})), rows.view(), 3, 100, true);
  CHECK(marked.read() == std::vector<int64_t>{kernels::kBadPosition, 0});
  Buffer<double> dst(dev, 12, 0.0), src(dev, {1, 2, 3, 4});
  kernels::index_copy(s, dst.view(Shape({12})), 0, flat.view(Shape({4})), src.view(Shape({4})));
  CHECK(dst.read() == std::vector<double>{0, 4, 0, 3, 0, 0, 0, 0, 0, 2, 0, 1});
  // check_index_range over [low, limit): -3..2 passes, -4 is reported with the range.
  kernels::check_index_range(s, rows.view(), -3, 3, "test");
  Buffer<int64_t> bad(dev, {0, -4});
  auto check_bad = [&] { kernels::check_index_range(s, bad.view(), -3, 3, "rows of x"); };
  if (dev.type() == DeviceType::kSim) {
    check_bad();
    CHECK_THROWS_AS(s.synchronize(), IndexError);
  } else {
    CHECK_THROWS_WITH(check_bad(), Contains("rows of x; element 1 (row-major) is -4, out of "
                                            "range -3..2"));
  }
}

TEST_CASE("out-of-range indices never touch memory and are reported", "[index][errors]") {
  const Device dev = testing::test_device();
  INFO("device " << dev);
  const Stream s = current_stream(dev);
  Buffer<float> in(dev, {1, 2, 3, 4, 5, 6});  // [3, 2]
  Buffer<float> out(dev, 4, -1.0f);            // [2, 2]
  const int64_t bad_value = GENERATE(3, -1);
  Buffer<int64_t> bad(dev, {0, bad_value});
  LaunchLog log;

  auto expect_reported = [&](const std::function<void()>& call, const char* name) {
    INFO(name);
    if (dev.is_cpu()) {
      CHECK_THROWS_WITH(call(), Contains(name) && Contains("out of range"));
      CHECK(log.count() == 0);  // checked on the host before launching
    } else if (dev.type() == DeviceType::kCuda) {
      // Checked on the GPU, read back after a synchronisation, before the copy runs.
      CHECK_THROWS_WITH(call(), Contains(name) && Contains("out of range"));
    } else {
      call();  // enqueued; the task refuses before touching memory
      CHECK_THROWS_WITH(s.synchronize(), Contains(name) && Contains("out of range"));
    }
    CHECK(out.read() == std::vector<float>(4, -1.0f));
  };
  expect_reported([&] { kernels::index_select(s, out.view(Shape({2, 2})), in.view(Shape({3, 2})),
                                              0, bad.view()); },
                  "index_select");
  // index_add / scatter_add into out [2, 2] along dim 1: valid indices are 0 and 1.
  Buffer<int64_t> bad2(dev, {0, bad_value == 3 ? 2 : -1});
  expect_reported([&] { kernels::index_add(s, out.view(Shape({2, 2})), 1, bad2.view(),
                                           in.view(Shape({2, 2}))); },
                  "index_add");
  expect_reported([&] { kernels::scatter_add(s, out.view(Shape({2, 2})), 1,
                                             bad2.view(Shape({1, 2})), in.view(Shape({1, 2}))); },
                  "scatter_add");
  s.synchronize();  // the error was consumed; the stream works again
}

TEST_CASE("index kernels validate dtypes, ranks and sizes", "[index][errors]") {
  const Device dev = testing::test_device();
  const Stream s = current_stream(dev);
  Buffer<float> in(dev, 12, 1.0f), out(dev, 12, 0.0f);
  Buffer<double> fidx(dev, 2, 0.0);
  Buffer<int64_t> idx(dev, 4, 0);
  LaunchLog log;
  const Shape is({4, 3});
  CHECK_THROWS_WITH(kernels::index_select(s, out.view(Shape({2, 3})), in.view(is), 0,
                                          fidx.view()),
                    Contains("index_select") && Contains("int64"));
  CHECK_THROWS_AS(kernels::index_select(s, out.view(Shape({2, 3})), in.view(is), 0,
                                        idx.view(Shape({1, 2}))),
                  ValueError);  // index must be 1-D
  CHECK_THROWS_AS(kernels::index_select(s, out.view(Shape({3, 3})), in.view(is), 0,
                                        idx.view(Shape({2}))),
                  ValueError);  // out.sizes[dim] != index.numel()
  CHECK_THROWS_AS(kernels::index_select(s, out.view(Shape({2, 3})), in.view(is), 2,
                                        idx.view(Shape({2}))),
                  ValueError);  // bad dim
  CHECK_THROWS_AS(kernels::index_add(s, out.view(is), 0, idx.view(Shape({2})),
                                     in.view(Shape({2, 2}))),
                  ValueError);  // src must match out off dim
  CHECK_THROWS_AS(kernels::scatter_add(s, out.view(is), 0, idx.view(Shape({2, 2})),
                                       in.view(Shape({2, 3}))),
                  ValueError);  // index must have src's sizes
  CHECK_THROWS_WITH(kernels::index_add(s, out.view(is), 0, idx.view(Shape({2})),
                                       out.view(Shape({2, 3}))),
                    Contains("overlaps"));
  CHECK(log.count() == 0);
}

}  // namespace
}  // namespace streamgrad
