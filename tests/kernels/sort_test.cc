// The sort and multinomial kernels (kernels/sort.cc) on cpu and sim: sort / topk of every
// dim of transposed and strided views against the cuda kernel's algorithm (each element
// placed by counting the elements before it under SortOrder), ties and NaN included; the
// host's multinomial draws against multinomial_pick (the cuda kernel's scan) at the same
// counters, zero weights and strided rows included; the declared byte ranges; errors
// raised before anything is enqueued.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/functors/random_ops.h"
#include "kernels/functors/sort_ops.h"
#include "kernels/kernels.h"
#include "tests/kernels/kernel_test_util.h"

namespace streamgrad {
namespace {

using testing::Buffer;
using testing::gather;
using testing::LaunchLog;
using testing::Shape;

// The first k of each slice of `x` (row-major values of shape `in`) along `dim`, placed
// by counting, as kernels/cuda/sort.cu does; values and indices row-major in out's shape.
template <typename T>
void place_by_count(const std::vector<T>& x, const std::vector<int64_t>& in, int64_t dim,
                    int64_t k, bool descending, std::vector<T>* values,
                    std::vector<int64_t>* indices) {
  const kernels::SortOrder<T> order{descending};
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= in[d];
  for (size_t d = dim + 1; d < in.size(); ++d) inner *= in[d];
  const int64_t n = in[dim];
  values->assign(static_cast<size_t>(outer * k * inner), T(0));
  indices->assign(values->size(), -1);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return x[static_cast<size_t>((o * n + j) * inner + i)]; };
      for (int64_t j = 0; j < n; ++j) {
        int64_t place = 0;
        for (int64_t m = 0; m < n; ++m) place += order(at(m), m, at(j), j) ? 1 : 0;
        if (place >= k) continue;
        const size_t w = static_cast<size_t>((o * k + place) * inner + i);
        (*values)[w] = at(j);
        (*indices)[w] = j;
      }
    }
  }
}

TEMPLATE_TEST_CASE("sort places every element as the cuda kernel's count does", "[sort]",
                   float, double, int64_t) {
  using T = TestType;
  const Device dev = testing::test_device();
  const Stream s = current_stream(dev);
  // [3, 4, 5] stored as [5, 4, 3] transposed: few distinct values (ties), NaN in floats.
  std::vector<T> hx(60);
  for (size_t i = 0; i < hx.size(); ++i) hx[i] = static_cast<T>((i * 7) % 5) - 2;
  if constexpr (std::is_floating_point<T>::value) {
    hx[23] = hx[41] = std::numeric_limits<T>::quiet_NaN();
  }
  Buffer<T> x(dev, hx);
  const Shape xs = Shape({5, 4, 3}).transposed(0, 2);
  const std::vector<T> logical = gather(hx, xs);
  for (int64_t dim = 0; dim < 3; ++dim) {
    for (const bool descending : {false, true}) {
      for (const int64_t k : {int64_t(1), int64_t(2), xs.sizes[dim]}) {
        INFO("device " << dev << ", dim " << dim << ", k " << k
                       << (descending ? ", descending" : ""));
        std::vector<int64_t> os = xs.sizes;
        os[dim] = k;
        // Values every other element, indices contiguous.
        const Shape vs(os, testing::Shape(os).strides, 0);
        std::vector<int64_t> wide_strides = testing::Shape(os).strides;
        for (int64_t& st : wide_strides) st *= 2;
        const Shape vws(os, wide_strides, 1);
        Buffer<T> v(dev, 120, T(-7));
        Buffer<int64_t> ix(dev, 60, int64_t(-9));
        LaunchLog log;
        kernels::sort(s, v.view(vws), ix.view(vs), x.view(xs), dim, descending, "topk");
        log.expect_ranges("topk", {x.view(xs)}, {v.view(vws), ix.view(vs)});
        std::vector<T> want_v;
        std::vector<int64_t> want_i;
        place_by_count(logical, xs.sizes, dim, k, descending, &want_v, &want_i);
        CHECK(gather(ix.read(), vs) == want_i);
        const std::vector<T> got_v = gather(v.read(), vws);
        for (size_t j = 0; j < want_v.size(); ++j) {
          INFO("value " << j);
          if (want_v[j] != want_v[j]) {
            CHECK(got_v[j] != got_v[j]);
          } else {
            CHECK(got_v[j] == want_v[j]);
          }
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("multinomial draws what multinomial_pick picks at the same counters",
                   "[sort][multinomial]", float, double) {
  using T = TestType;
  const Device dev = testing::test_device();
  const Stream s = current_stream(dev);
  // 3 rows of 5 weights, zeros included, stored transposed (strided rows).
  const std::vector<T> hp = {0, 1, 3, 0, 2, 0.5, 0, 0, 1, 1, 0, 4, 2, 0.25, 0};
  Buffer<T> p(dev, hp);
  const Shape ps = Shape({5, 3}).transposed(0, 1);
  const std::vector<T> rows = gather(hp, ps);
  const int64_t samples = 200;
  const uint64_t seed = 17, offset = 1000;
  Buffer<int64_t> out(dev, 3 * samples, int64_t(-1));
  LaunchLog log;
  kernels::multinomial(s, out.view(Shape({3, samples})), p.view(ps), seed, offset);
  log.expect_ranges("multinomial", {p.view(ps)}, {out.view(Shape({3, samples}))});
  const std::vector<int64_t> got = out.read();
  const kernels::RandomKey key = kernels::make_random_key(seed);
  for (int64_t r = 0; r < 3; ++r) {
    const T* row = rows.data() + r * 5;
    double total = 0;
    for (int64_t i = 0; i < 5; ++i) total += static_cast<double>(row[i]);
    for (int64_t j = 0; j < samples; ++j) {
      const uint64_t counter = offset + static_cast<uint64_t>(r * samples + j);
      const double u = kernels::random_unit(kernels::random_bits(key, counter));
      const int64_t want = kernels::multinomial_pick(row, 1, 5, total, u);
      INFO("row " << r << ", draw " << j);
      CHECK(got[static_cast<size_t>(r * samples + j)] == want);
      CHECK(row[want] > 0);
    }
  }
  // A draw at the top of the range (u * total rounding to total) falls back to the last
  // positive weight rather than to a zero one.
  const T tail[] = {1, 2, 0};
  CHECK(kernels::multinomial_pick(tail, 1, 3, 3.0, 1.0) == 1);
}

TEST_CASE("sort and multinomial refuse malformed views before enqueueing", "[sort]") {
  const Device dev = testing::test_device();
  const Stream s = current_stream(dev);
  Buffer<float> x(dev, 12, 1.0f), v(dev, 12, 0.0f);
  Buffer<int64_t> ix(dev, 12, int64_t(0));
  Buffer<uint8_t> b(dev, 12, uint8_t(1));
  const Shape in({3, 4});
  LaunchLog log;
  const auto expect = [](auto fn, const char* part) { testing::expect_value_error(fn, part); };
  expect([&] { kernels::sort(s, v.view(Shape({3, 5})), ix.view(Shape({3, 5})), x.view(in), 1,
                             false, "topk"); }, "at most 4");
  expect([&] { kernels::sort(s, v.view(Shape({2, 2})), ix.view(Shape({2, 2})), x.view(in), 1,
                             false, "topk"); }, "except along dim 1");
  expect([&] { kernels::sort(s, v.view(in), v.view(in), x.view(in), 1, false, "sort"); },
         "int64");
  expect([&] { kernels::sort(s, b.view(in), ix.view(in), b.view(in), 0, false, "sort"); },
         "floating or int64");
  expect([&] { kernels::sort(s, v.view(in), ix.view(in), x.view(in), 2, false, "sort"); },
         "sort");
  expect([&] { kernels::multinomial(s, v.view(Shape({3, 2})), x.view(in), 1, 0); }, "int64");
  expect([&] { kernels::multinomial(s, ix.view(Shape({2, 2})), x.view(in), 1, 0); }, "rows");
  CHECK(log.count() == 0);
}

}  // namespace
}  // namespace streamgrad
