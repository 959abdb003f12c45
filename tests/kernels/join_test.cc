// cat and stack kernels: every dtype, strided and transposed inputs and out, one launch
// declaring every input read and out written, empty pieces, and malformed arguments.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "kernels/kernels.h"
#include "tests/kernels/kernel_test_util.h"

namespace streamgrad {
namespace {

using kernels::View;
using testing::Buffer;
using testing::gather;
using testing::LaunchLog;
using testing::Shape;
using Catch::Matchers::Contains;

// Host values 0, 1, 2, ... (bool: alternating) for a buffer of n elements.
template <typename T>
std::vector<T> counting(size_t n, int start) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = std::is_same<T, uint8_t>::value ? T((start + i) % 2) : T(start + static_cast<int>(i));
  }
  return v;
}

// out[i0, i1] of a row-major [rows, cols] result, from the joined pieces along dim 1.
template <typename T>
void check_cat_dim1(Device d) {
  // a: [2, 3] contiguous; b: [2, 2] transposed storage; c: [2, 1] every other element.
  const std::vector<T> ha = counting<T>(6, 0), hb = counting<T>(4, 10), hc = counting<T>(4, 20);
  Buffer<T> a(d, ha), b(d, hb), c(d, hc);
  const Shape sa({2, 3}), sb = Shape({2, 2}).transposed(0, 1), sc({2, 1}, {2, 1});
  Buffer<T> out(d, 12, T(0));
  const Shape so({2, 6});
  LaunchLog log;
  kernels::cat(current_stream(d), out.view(so), {a.view(sa), b.view(sb), c.view(sc)}, 1);
  CHECK(log.count() == 1);
  log.expect_ranges("cat", {a.view(sa), b.view(sb), c.view(sc)}, {out.view(so)});
  const std::vector<T> ga = gather(ha, sa), gb = gather(hb, sb), gc = gather(hc, sc);
  std::vector<T> want;
  for (int r = 0; r < 2; ++r) {
    for (int k = 0; k < 3; ++k) want.push_back(ga[r * 3 + k]);
    for (int k = 0; k < 2; ++k) want.push_back(gb[r * 2 + k]);
    want.push_back(gc[r]);
  }
  CHECK(out.read() == want);
}

TEST_CASE("cat joins strided inputs of every dtype in one launch", "[kernels][join]") {
  const Device d = testing::test_device();
  check_cat_dim1<float>(d);
  check_cat_dim1<double>(d);
  check_cat_dim1<int64_t>(d);
  check_cat_dim1<uint8_t>(d);
}

template <typename T>
void check_stack(Device d, int64_t dim) {
  // Three [2, 3] inputs: contiguous, transposed storage, every other element.
  const std::vector<T> h0 = counting<T>(6, 0), h1 = counting<T>(6, 10), h2 = counting<T>(12, 30);
  Buffer<T> x0(d, h0), x1(d, h1), x2(d, h2);
  const Shape s0({2, 3}), s1 = Shape({3, 2}).transposed(0, 1), s2({2, 3}, {6, 2});
  std::vector<int64_t> sizes{2, 3};
  sizes.insert(sizes.begin() + dim, 3);
  // out itself strided: a [.., ..] view with a gap after every element.
  std::vector<int64_t> strides = kernels::contiguous_strides(sizes);
  for (int64_t& s : strides) s *= 2;
  const Shape so(sizes, strides);
  Buffer<T> out(d, 36, T(0));
  LaunchLog log;
  kernels::stack(current_stream(d), out.view(so), {x0.view(s0), x1.view(s1), x2.view(s2)}, dim);
  CHECK(log.count() == 1);
  log.expect_ranges("stack", {x0.view(s0), x1.view(s1), x2.view(s2)}, {out.view(so)});
  const std::vector<std::vector<T>> in{gather(h0, s0), gather(h1, s1), gather(h2, s2)};
  const std::vector<T> got = gather(out.read(), so);
  // got is row-major over `sizes`; element (k, r, c) of the inputs sits at index k on dim.
  for (int k = 0; k < 3; ++k) {
    for (int r = 0; r < 2; ++r) {
      for (int c = 0; c < 3; ++c) {
        std::vector<int64_t> idx{r, c};
        idx.insert(idx.begin() + dim, k);
        const int64_t flat = (idx[0] * sizes[1] + idx[1]) * sizes[2] + idx[2];
        CHECK(got[static_cast<size_t>(flat)] == in[k][static_cast<size_t>(r * 3 + c)]);
      }
    }
  }
}

TEST_CASE("stack puts input k at index k of the new dim, for every dim and dtype",
          "[kernels][join]") {
  const Device d = testing::test_device();
  for (int64_t dim = 0; dim <= 2; ++dim) {
    INFO("dim " << dim);
    check_stack<float>(d, dim);
    check_stack<double>(d, dim);
    check_stack<int64_t>(d, dim);
    check_stack<uint8_t>(d, dim);
  }
}

TEST_CASE("cat and stack skip empty inputs; nothing to copy launches nothing",
          "[kernels][join]") {
  const Device d = testing::test_device();
  Buffer<float> a(d, {1, 2, 3, 4}), out(d, 4, 0.0f);
  LaunchLog log;
  const View empty = a.view(Shape({0, 2}));
  kernels::cat(current_stream(d), out.view(Shape({2, 2})), {empty, a.view(Shape({2, 2})), empty},
               0);
  CHECK(log.count() == 1);
  CHECK(out.read() == std::vector<float>{1, 2, 3, 4});
  kernels::cat(current_stream(d), out.view(Shape({0, 2})), {empty, empty}, 0);
  kernels::stack(current_stream(d), out.view(Shape({2, 0})),
                 {a.view(Shape({0})), a.view(Shape({0}))}, 0);
  CHECK(log.count() == 1);
  // 0-dim inputs stack into a vector.
  kernels::stack(current_stream(d), out.view(Shape({2})),
                 {a.view(Shape({}, {}, 3)), a.view(Shape({}, {}, 0))}, 0);
  CHECK(log.count() == 2);
  CHECK(out.read() == std::vector<float>{4, 1, 3, 4});
}

TEST_CASE("a sim join runs later, from what its launch captured", "[kernels][join]") {
  SimSchedulerOptions deterministic;
  deterministic.kind = SimSchedulerKind::kDeterministic;
  SimSchedulerScope scope(deterministic);  // nothing runs until the host waits
  const Device dev("sim:0");
  Buffer<float> a(dev, {1, 2, 3, 4}), out(dev, 8, 0.0f);
  {
    // The views and their vector die before the task runs.
    std::vector<View> ins{a.view(Shape({2, 2})), a.view(Shape({2, 2}).transposed(0, 1))};
    kernels::stack(current_stream(dev), out.view(Shape({2, 2, 2})), ins, 0);
  }
  CHECK_FALSE(current_stream(dev).query());
  CHECK(out.read() == std::vector<float>{1, 2, 3, 4, 1, 3, 2, 4});
}

TEST_CASE("cat and stack reject malformed arguments before launching", "[kernels][join]") {
  const Stream s = current_stream(Device("cpu"));
  Buffer<float> a(Device("cpu"), 6, 1.0f), out(Device("cpu"), 12, 0.0f);
  Buffer<double> f64(Device("cpu"), 6, 1.0);
  LaunchLog log;
  const View a23 = a.view(Shape({2, 3}));
  CHECK_THROWS_WITH(kernels::cat(s, out.view(Shape({4, 3})), {}, 0),
                    Contains("cat") && Contains("at least one input"));
  CHECK_THROWS_WITH(kernels::cat(s, out.view(Shape({4, 3})), {a23, f64.view(Shape({2, 3}))}, 0),
                    Contains("cat") && Contains("float64") && Contains("float32"));
  CHECK_THROWS_WITH(kernels::cat(s, out.view(Shape({4, 3})), {a23, a.view(Shape({3, 2}))}, 0),
                    Contains("cat") && Contains("input 1") && Contains("[3, 2]") &&
                        Contains("[4, 3]"));
  CHECK_THROWS_WITH(kernels::cat(s, out.view(Shape({4, 3})), {a23}, 0),
                    Contains("add up to 2") && Contains("has 4"));
  CHECK_THROWS_WITH(kernels::cat(s, out.view(Shape({4, 3})), {a23, a23}, 2),
                    Contains("cat") && Contains("dim 2"));
  CHECK_THROWS_WITH(kernels::cat(s, a.view(Shape({2, 3})), {a.view(Shape({1, 3})),
                                                            a.view(Shape({1, 3}, {}, 3))}, 0),
                    Contains("overlaps"));
  CHECK_THROWS_WITH(kernels::stack(s, out.view(Shape({2, 2, 3})), {a23}, 0),
                    Contains("stack") && Contains("add up to 1"));
  CHECK_THROWS_WITH(kernels::stack(s, out.view(Shape({2, 6})), {a23, a23}, 0),
                    Contains("stack") && Contains("without dim"));
  CHECK_THROWS_WITH(kernels::stack(s, out.view(Shape({2, 2, 3})), {a23, a23}, 3),
                    Contains("stack") && Contains("dim 3"));
  CHECK_THROWS_WITH(kernels::stack(s, out.view(Shape({2, 2, 3}, {0, 3, 1})), {a23, a23}, 0),
                    Contains("stride 0"));
  CHECK(log.count() == 0);
}

}  // namespace
}  // namespace streamgrad
