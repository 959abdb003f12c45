// max_pool2d, max_pool2d_backward and batch norm at every instruction-set level this
// machine has: pooling equal to a reference written here (the first largest tap in
// row-major window order, the first NaN winning), for the 2x2 stride-2 loop and the
// generic one, rows of every length around the vector widths; batch norm the same bits
// at every level and on one and two threads (its channels shared out), and within
// rounding of a long double reference.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/nn_kernels.h"
#include "runtime/backend/cpu_settings.h"
#include "tests/kernels/level_test_util.h"

namespace streamgrad {
namespace {

namespace k = kernels;
using testing::Buffer;
using testing::Shape;

k::Window2d window(int64_t size, int64_t stride, int64_t padding) {
  k::Window2d w;
  for (int d = 0; d < 2; ++d) {
    w.kernel[d] = size;
    w.stride[d] = stride;
    w.padding[d] = padding;
    w.dilation[d] = 1;
  }
  return w;
}

template <typename T>
void reference_pool(const std::vector<T>& x, int64_t planes, int64_t h, int64_t wd,
                    const k::Window2d& w, int64_t oh, int64_t ow, std::vector<T>* values,
                    std::vector<int64_t>* indices) {
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        T best = 0;
        int64_t at = -1;
        for (int64_t ki = 0; ki < w.kernel[0]; ++ki)
          for (int64_t kj = 0; kj < w.kernel[1]; ++kj) {
            const int64_t r = i * w.stride[0] - w.padding[0] + ki;
            const int64_t c = j * w.stride[1] - w.padding[1] + kj;
            if (r < 0 || r >= h || c < 0 || c >= wd) continue;
            const T v = x[(p * h + r) * wd + c];
            const bool nan_first = std::isnan(v) && (at < 0 || !std::isnan(best));
            if (at < 0 || v > best || nan_first) {
              best = v;
              at = r * wd + c;
            }
          }
        values->push_back(best);
        indices->push_back(at);
      }
}

// Values with many ties (a few distinct values) or the mixed specials (NaN, infinities).
template <typename T>
std::vector<T> pool_input(size_t n, uint32_t seed, bool ties) {
  std::vector<T> v = testing::mixed_values<T>(n, seed);
  if (ties) {
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>((i * 2654435761u + seed) % 3);
  }
  return v;
}

template <typename T>
void check_pool(int64_t planes, int64_t h, int64_t wd, const k::Window2d& w, int64_t oh,
                int64_t ow, bool ties) {
  INFO("planes " << planes << ", " << h << "x" << wd << ", window " << w.kernel[0]
                 << " stride " << w.stride[0] << " padding " << w.padding[0] << ", out " << oh
                 << "x" << ow << (ties ? ", ties" : ", specials"));
  const Device cpu("cpu");
  const std::vector<T> x = pool_input<T>(static_cast<size_t>(planes * h * wd), 7, ties);
  std::vector<T> want_v;
  std::vector<int64_t> want_i;
  reference_pool(x, planes, h, wd, w, oh, ow, &want_v, &want_i);
  const Buffer<T> in(cpu, x);
  for (CpuCapability level : testing::machine_levels()) {
    INFO("level " << cpu_capability_name(level));
    testing::CapabilityScope scope(level);
    const Buffer<T> values(cpu, want_v.size(), T(-7));
    const Buffer<int64_t> indices(cpu, want_i.size(), int64_t(-7));
    k::max_pool2d(Stream(cpu), values.view(Shape({planes, oh, ow})),
                  indices.view(Shape({planes, oh, ow})), in.view(Shape({planes, h, wd})), w);
    CHECK(indices.read() == want_i);
    testing::same_bits(values.read(), want_v);
  }
}

TEMPLATE_TEST_CASE("2x2 stride-2 max pooling picks the reference's tap at every level",
                   "[kernels][pool][levels]", float, double) {
  for (const bool ties : {false, true}) {
    for (int64_t ow = 1; ow <= 35; ++ow) {
      // Even width, and an odd one whose last column no window reaches.
      check_pool<TestType>(3, 4, 2 * ow, window(2, 2, 0), 2, ow, ties);
      check_pool<TestType>(2, 5, 2 * ow + 1, window(2, 2, 0), 2, ow, ties);
    }
  }
}

TEMPLATE_TEST_CASE("other windows take the generic loop with the same rule",
                   "[kernels][pool][levels]", float, double) {
  for (const bool ties : {false, true}) {
    check_pool<TestType>(2, 7, 9, window(3, 2, 1), 4, 5, ties);
    check_pool<TestType>(2, 6, 6, window(2, 1, 1), 7, 7, ties);
    // ceil_mode: the last 2x2 window sticks out of a 5x5 image.
    check_pool<TestType>(2, 5, 5, window(2, 2, 0), 3, 3, ties);
  }
}

TEST_CASE("max pooling's backward adds each gradient at its index", "[kernels][pool]") {
  // The host kernels only: these indices fit no window's geometry, which the cuda kernel
  // gathers through (tests/kernels/cuda checks it against these on real pools).
  const Device d(GENERATE(as<std::string>(), "cpu", "sim:0"));
  // Overlapping windows (stride 1) send two gradients to one position.
  const std::vector<int64_t> idx = {0, 4, 4, 8, 3, 1};
  const std::vector<double> g = {1, 2, 3, 4, 5, 6};
  const Buffer<int64_t> indices(d, idx);
  const Buffer<double> grad_out(d, g);
  const Buffer<double> grad_in(d, 18, 9.0);
  // The cpu kernel scatters to the indices whatever the window (the cuda one gathers
  // through it: tests/kernels/cuda).
  k::max_pool2d_backward(current_stream(d), grad_in.view(Shape({2, 3, 3})),
                         grad_out.view(Shape({2, 1, 3})), indices.view(Shape({2, 1, 3})),
                         window(3, 1, 0));
  std::vector<double> want(18, 0);
  want[0] = 1;
  want[4] = 2 + 3;
  want[9 + 8] = 4;
  want[9 + 3] = 5;
  want[9 + 1] = 6;
  CHECK(grad_in.read() == want);
}

TEST_CASE("max pooling's backward refuses an index outside its plane, writing nothing",
          "[kernels][pool][errors]") {
  const Device cpu("cpu");
  for (const int64_t bad : {int64_t(-1), int64_t(9)}) {
    const Buffer<int64_t> indices(cpu, std::vector<int64_t>{0, bad});
    const Buffer<float> grad_out(cpu, std::vector<float>{1, 2});
    const Buffer<float> grad_in(cpu, 9, 5.0f);
    CHECK_THROWS_WITH(k::max_pool2d_backward(Stream(cpu), grad_in.view(Shape({1, 3, 3})),
                                             grad_out.view(Shape({1, 1, 2})),
                                             indices.view(Shape({1, 1, 2})), window(2, 1, 0)),
                      Catch::Contains("outside its plane of 9"));
    CHECK(grad_in.read() == std::vector<float>(9, 5.0f));
  }
}

// Batch norm of [N, C, S] with S around the 16-lane width and over a sum block.
template <typename T>
void check_batch_norm(int64_t n, int64_t c, int64_t s) {
  INFO("[" << n << ", " << c << ", " << s << "]");
  const Device cpu("cpu");
  const size_t total = static_cast<size_t>(n * c * s);
  const std::vector<T> x = testing::random_values<T>(total, -2, 3, 11);
  const std::vector<T> g = testing::random_values<T>(total, -1, 1, 12);
  const std::vector<T> w = testing::random_values<T>(static_cast<size_t>(c), 0.5, 2, 13);
  const std::vector<T> b = testing::random_values<T>(static_cast<size_t>(c), -1, 1, 14);
  const Buffer<T> xb(cpu, x), gb(cpu, g), wb(cpu, w), bb(cpu, b);
  const Shape ncs({n, c, s}), ch({c});
  std::vector<T> first_out, first_gin, first_gw, first_gb, first_stats;
  const int old_threads = get_num_threads();
  for (const int threads : {1, 2}) {
    for (CpuCapability level : testing::machine_levels()) {
      INFO("level " << cpu_capability_name(level) << ", " << threads << " threads");
      set_num_threads(threads);
      testing::CapabilityScope scope(level);
      const Buffer<T> out(cpu, total, T(0)), mean(cpu, c, T(0)), var(cpu, c, T(0));
      const k::View wv = wb.view(ch), bv = bb.view(ch);
      k::batch_norm_forward(Stream(cpu), out.view(ncs), mean.view(ch), var.view(ch),
                            xb.view(ncs), &wv, &bv, 1e-5);
      const Buffer<T> gin(cpu, total, T(0)), gw(cpu, c, T(0)), gbias(cpu, c, T(0));
      const k::View gin_v = gin.view(ncs), gw_v = gw.view(ch), gb_v = gbias.view(ch);
      k::batch_norm_backward(Stream(cpu), &gin_v, &gw_v, &gb_v, gb.view(ncs), xb.view(ncs),
                             mean.view(ch), var.view(ch), &wv, 1e-5);
      std::vector<T> stats = mean.read();
      for (T v : var.read()) stats.push_back(v);
      if (first_out.empty()) {
        first_out = out.read();
        first_gin = gin.read();
        first_gw = gw.read();
        first_gb = gbias.read();
        first_stats = stats;
        // The baseline level against long double sums.
        for (int64_t ci = 0; ci < c; ++ci) {
          long double sum = 0, sq = 0;
          for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < s; ++j) sum += x[(i * c + ci) * s + j];
          const long double mu = sum / (n * s);
          for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < s; ++j) sq += std::pow(x[(i * c + ci) * s + j] - mu, 2);
          CHECK(stats[ci] == Approx(static_cast<double>(mu)).epsilon(1e-5).margin(1e-6));
          CHECK(stats[c + ci] == Approx(static_cast<double>(sq / (n * s))).epsilon(1e-5));
          long double sg = 0;
          for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < s; ++j) sg += g[(i * c + ci) * s + j];
          CHECK(first_gb[ci] == Approx(static_cast<double>(sg)).epsilon(1e-5).margin(1e-5));
        }
        continue;
      }
      testing::same_bits(stats, first_stats);
      testing::same_bits(out.read(), first_out);
      testing::same_bits(gin.read(), first_gin);
      testing::same_bits(gw.read(), first_gw);
      testing::same_bits(gbias.read(), first_gb);
    }
  }
  set_num_threads(old_threads);
}

TEMPLATE_TEST_CASE("batch norm gives the same bits at every level and thread count",
                   "[kernels][norm][levels]", float, double) {
  for (const int64_t s : {1, 15, 16, 17, 33, 196, 4097}) check_batch_norm<TestType>(3, 2, s);
  // 150 channels of 2 values: walked in groups of 64, 64 and 22 channels (the most a group
  // takes), on one thread however many there are.
  check_batch_norm<TestType>(2, 150, 1);
  // Float only, to keep the sanitizer runs short. Two channels of 2 x 131,072 values, each
  // a chunk of its own on two threads; and a ResNet's last stage, [64, 64, 7 x 7]: groups
  // of 20 channels, cut 20, 20, 20, 4 on one thread and 20, 12 in each of two halves on
  // two, which must give the same bits.
  if (std::is_same<TestType, float>::value) {
    check_batch_norm<TestType>(2, 2, 131072);
    check_batch_norm<TestType>(64, 64, 49);
  }
}

}  // namespace
}  // namespace streamgrad
