// fill, copy and reduce give the same bits at every instruction-set level this machine
// has: fill and copy equal to a scalar reference of kernels.h's conversion rules; sum, max
// and min equal to the baseline level's result (their order is fixed by the kernels, not
// by the vector width), with the sum within rounding of a long double reference and max /
// min equal to the reference value. The sums in 16 double lanes (sum_block, and the
// normalisations' centred_squares and grad_sums) equal, bit for bit, the order loops.h
// documents, written out here as plain scalar code; layer norm's fused backward sums equal
// the three loops it stands for.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/host/loops.h"
#include "kernels/kernels.h"
#include "tests/kernels/level_test_util.h"

namespace streamgrad {
namespace {

namespace k = kernels;
using testing::Buffer;
using testing::Shape;

// kernels.h's conversion rules, written out independently of the kernels.
template <typename To, typename From>
To ref_convert(From v) {
  if (std::is_same<To, uint8_t>::value) return v != From(0) ? To(1) : To(0);
  if (std::is_same<From, uint8_t>::value) return v != From(0) ? To(1) : To(0);
  if (std::is_same<To, int64_t>::value && std::is_floating_point<From>::value) {
    const double d = static_cast<double>(v);
    if (std::isnan(d)) return To(0);
    if (d >= 9223372036854775808.0) return static_cast<To>(std::numeric_limits<int64_t>::max());
    if (d < -9223372036854775808.0) return static_cast<To>(std::numeric_limits<int64_t>::min());
  }
  return static_cast<To>(v);
}

template <typename T>
std::vector<T> values_of(size_t n, uint32_t seed) {
  if constexpr (std::is_floating_point<T>::value) {
    return testing::mixed_values<T>(n, seed);
  } else {
    // Bools as 0/1 bytes (a same-dtype copy keeps other bytes as they are only when it can
    // copy memory).
    const size_t range = std::is_same<T, uint8_t>::value ? 2 : 5;
    std::vector<T> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>((i * 7919 + seed) % range);
    return v;
  }
}

template <typename T>
void check_fill(double value) {
  const Device cpu("cpu");
  const Stream s(cpu);
  for (int64_t n : {0, 1, 5, 16, 17, 63, 64, 67, 1000, 70001}) {
    for (int64_t stride : {1, 3}) {
      INFO("n " << n << ", stride " << stride << ", value " << value);
      const size_t size = static_cast<size_t>(2 + n * stride);
      const Shape os({n}, {stride}, 1);
      std::vector<T> want(size, T(2));
      for (int64_t at : os.offsets()) want[at] = ref_convert<T>(value);
      testing::expect_bits_at_every_level<T>(std::vector<T>(size, T(2)), want,
                                             [&](const Buffer<T>& out) {
                                               k::fill(s, out.view(os), value);
                                             });
    }
  }
}

TEST_CASE("fill: every dtype, every level", "[levels]") {
  for (double v : {0.0, -0.0, 1.5, -2.75, 3.4e38, std::numeric_limits<double>::infinity()}) {
    check_fill<float>(v);
    check_fill<double>(v);
    check_fill<uint8_t>(v);
  }
  for (double v : {0.0, 3.9, -7.0, -9223372036854775808.0}) check_fill<int64_t>(v);
}

template <typename To, typename From>
void check_copy() {
  const Device cpu("cpu");
  const Stream s(cpu);
  for (int64_t n : {0, 1, 7, 16, 31, 33, 64, 67, 70001}) {
    // Contiguous with unaligned starts; strided on both sides; a 2-D transpose.
    const int64_t rows = n / 7 > 0 ? 7 : 1, cols = n / rows;
    const std::vector<std::pair<Shape, Shape>> cases = {
        {Shape({n}, {1}, 1), Shape({n}, {1}, 3)},
        {Shape({n}, {2}, 0), Shape({n}, {3}, 1)},
        {Shape({rows, cols}), Shape({cols, rows}).transposed(0, 1)},
    };
    for (size_t c = 0; c < cases.size(); ++c) {
      INFO("n " << n << ", case " << c);
      const Shape& os = cases[c].first;
      const Shape& is = cases[c].second;
      const size_t size = static_cast<size_t>(4 + 3 * n);
      const std::vector<From> input = values_of<From>(size, 3 + n);
      std::vector<To> want(size, To(2));
      const std::vector<int64_t> o = os.offsets(), i = is.offsets();
      for (size_t j = 0; j < o.size(); ++j) want[o[j]] = ref_convert<To>(input[i[j]]);
      const Buffer<From> in(cpu, input);
      testing::expect_bits_at_every_level<To>(std::vector<To>(size, To(2)), want,
                                              [&](const Buffer<To>& out) {
                                                k::copy(s, out.view(os), in.view(is));
                                              });
    }
  }
}

template <typename To>
void check_copy_from_all() {
  check_copy<To, float>();
  check_copy<To, double>();
  check_copy<To, int64_t>();
  check_copy<To, uint8_t>();
}

TEST_CASE("copy: every pair of dtypes, every level", "[levels]") {
  check_copy_from_all<float>();
  check_copy_from_all<double>();
  check_copy_from_all<int64_t>();
  check_copy_from_all<uint8_t>();
}

// Reduces `in_shape` of `input` into out of `out_sizes` at every level: the bits must equal
// the baseline level's, and the values the reference's (for sums of finite values only:
// a double sum that overflows has no long double reference).
template <typename T>
void check_reduce(k::Reduce op, const std::vector<T>& input, const Shape& in_shape,
                  const std::vector<int64_t>& out_sizes, bool finite) {
  const Device cpu("cpu");
  const Stream s(cpu);
  const Shape os(out_sizes);
  const Buffer<T> in(cpu, input);
  std::vector<T> baseline;
  for (CpuCapability level : testing::machine_levels()) {
    INFO("level " << cpu_capability_name(level));
    testing::CapabilityScope scope(level);
    Buffer<T> out(cpu, static_cast<size_t>(os.numel()), T(-777));
    k::reduce(s, op, out.view(os), in.view(in_shape));
    if (baseline.empty()) {
      baseline = out.read();
    } else if (!testing::same_bits(out.read(), baseline)) {
      return;
    }
  }
  // The reference: each output over its elements, in long double.
  const std::vector<int64_t> at = in_shape.offsets();
  std::vector<long double> acc(baseline.size(), op == k::Reduce::kSum ? 0.0L : NAN);
  std::vector<bool> seen(baseline.size(), false), nan(baseline.size(), false);
  std::vector<int64_t> idx(in_shape.sizes.size(), 0);
  for (size_t e = 0; e < at.size(); ++e) {
    int64_t o = 0;
    for (size_t d = 0; d < idx.size(); ++d) o = o * os.sizes[d] + (os.sizes[d] == 1 ? 0 : idx[d]);
    const long double v = input[at[e]];
    if (std::isnan(v)) nan[o] = true;
    if (op == k::Reduce::kSum) {
      acc[o] += v;
    } else if (!seen[o] || (op == k::Reduce::kMax ? v > acc[o] : v < acc[o])) {
      acc[o] = v;
    }
    seen[o] = true;
    for (int64_t d = static_cast<int64_t>(idx.size()) - 1; d >= 0; --d) {
      if (++idx[d] < in_shape.sizes[d]) break;
      idx[d] = 0;
    }
  }
  for (size_t o = 0; o < baseline.size(); ++o) {
    INFO("output " << o);
    if (nan[o]) {
      CHECK(std::isnan(baseline[o]));
    } else if (op == k::Reduce::kSum) {
      if (!finite) continue;
      CHECK(static_cast<double>(baseline[o]) ==
            Approx(static_cast<double>(static_cast<T>(acc[o]))).epsilon(1e-5).margin(1e-6));
    } else {
      CHECK(static_cast<double>(baseline[o]) == static_cast<double>(acc[o]));
    }
  }
}

TEMPLATE_TEST_CASE("sum, max and min: the same bits at every level", "[levels]", float,
                   double) {
  using T = TestType;
  const k::Reduce op = GENERATE(k::Reduce::kSum, k::Reduce::kMax, k::Reduce::kMin);
  // Finite values with signed zeros for sums (so the reference can judge them), with NaN
  // and infinities once every case has run without.
  const bool specials = GENERATE(false, true);
  INFO("op " << static_cast<int>(op) << (specials ? ", with NaN and inf" : ""));
  auto values = [&](size_t n, uint32_t seed) {
    std::vector<T> v = testing::random_values<T>(n, -3, 3, seed);
    if (specials) {
      v = testing::mixed_values<T>(n, seed);
    } else {
      for (size_t i = 0; i < n; i += 11) v[i] = i % 2 ? T(0) : -T(0);
    }
    return v;
  };
  for (int64_t n : {1, 2, 15, 16, 17, 31, 33, 67, 4096, 4096 * 3 + 17, 100003}) {
    INFO("all of n = " << n);
    check_reduce<T>(op, values(n + 1, n), Shape({n}, {1}, 1), {1}, !specials);
  }
  // Over the last dim (rows), over the first (columns), over a strided dim, over two dims.
  check_reduce<T>(op, values(37 * 45, 1), Shape({37, 45}), {37, 1}, !specials);
  check_reduce<T>(op, values(300 * 67, 2), Shape({300, 67}), {1, 67}, !specials);
  check_reduce<T>(op, values(40 * 29, 3), Shape({29, 40}).transposed(0, 1), {40, 1}, !specials);
  check_reduce<T>(op, values(6 * 5 * 70, 4), Shape({6, 5, 70}), {1, 5, 1}, !specials);
}

// loops.h's order: element i into lane i % 16 (term(i) is what element i adds), lanes
// then folded j += j + 8, + 4, + 2, + 1.
template <typename Term>
double lane_order_sum(int64_t n, Term term) {
  double lane[16] = {};
  for (int64_t i = 0; i < n; ++i) lane[i % 16] += term(i);
  for (int w = 8; w >= 1; w /= 2) {
    for (int j = 0; j < w; ++j) lane[j] += lane[j + w];
  }
  return lane[0];
}

TEMPLATE_TEST_CASE("sums in 16 lanes add in loops.h's order at every level", "[levels]",
                   float, double) {
  using T = TestType;
  const DType dt = testing::dtype_of<T>();
  for (int64_t n : {1, 5, 16, 17, 31, 32, 40, 256, 259, 4096}) {
    // Magnitudes from 2^-20 to 2^20, so that a different order rounds differently.
    std::vector<T> x = testing::random_values<T>(static_cast<size_t>(n), -3, 3, 7);
    std::vector<T> g = testing::random_values<T>(static_cast<size_t>(n), -3, 3, 8);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = std::ldexp(x[i], static_cast<int>((i * 37) % 41) - 20);
      g[i] = std::ldexp(g[i], static_cast<int>((i * 23) % 41) - 20);
    }
    const T mean = T(0.375);
    const double want_sum = lane_order_sum(n, [&](int64_t i) { return double(x[i]); });
    const double want_sq = lane_order_sum(n, [&](int64_t i) {
      const double d = static_cast<double>(static_cast<T>(x[i] - mean));
      return d * d;
    });
    const double want_g = lane_order_sum(n, [&](int64_t i) { return double(g[i]); });
    const double want_gc = lane_order_sum(n, [&](int64_t i) {
      return double(g[i]) * static_cast<double>(static_cast<T>(x[i] - mean));
    });
    const std::vector<T> w = testing::random_values<T>(static_cast<size_t>(n), -2, 2, 9);
    for (CpuCapability level : testing::machine_levels()) {
      INFO("n " << n << ", level " << cpu_capability_name(level));
      const k::cpu::Loops& lp = k::cpu::loops_for(level);
      const k::cpu::NnLoops& nn = k::cpu::nn_loops_for(level);
      CHECK(lp.sum_block(dt, x.data(), n) == want_sum);
      CHECK(nn.centred_squares(dt, x.data(), n, double(mean)) == want_sq);
      double sum_g = 0, sum_gc = 0;
      nn.grad_sums(dt, g.data(), x.data(), n, double(mean), &sum_g, &sum_gc);
      CHECK(sum_g == want_g);
      CHECK(sum_gc == want_gc);
      // scaled_grad_sums: gw rounded to T, then its sums in the lane order.
      {
        std::vector<T> gw(n);
        double sg = 0.125, sgc = -0.5;
        nn.scaled_grad_sums(dt, gw.data(), g.data(), w.data(), x.data(), n, double(mean), &sg,
                            &sgc);
        bool products = true;
        for (int64_t i = 0; i < n; ++i) products = products && gw[i] == T(g[i] * w[i]);
        CHECK(products);
        CHECK(sg == 0.125 + lane_order_sum(n, [&](int64_t i) { return double(gw[i]); }));
        CHECK(sgc == -0.5 + lane_order_sum(n, [&](int64_t i) {
                return double(gw[i]) * static_cast<double>(static_cast<T>(x[i] - mean));
              }));
      }
    }
  }
}

// layer_norm_param_block against its rule written out a row at a time: every column adds
// its rows in row order, in double, whatever the level's vector width.
TEMPLATE_TEST_CASE("layer norm's parameter sums over a block of rows, in row order",
                   "[levels]", float, double) {
  using T = TestType;
  const DType dt = testing::dtype_of<T>();
  for (int64_t n : {1, 15, 16, 17, 40, 256, 259}) {
    for (int64_t rows : {1, 3, 16}) {
      const size_t count = static_cast<size_t>(rows * n);
      std::vector<T> x = testing::random_values<T>(count, -3, 3, 11);
      std::vector<T> g = testing::random_values<T>(count, -3, 3, 12);
      for (size_t i = 0; i < count; ++i) {
        g[i] = std::ldexp(g[i], static_cast<int>((i * 23) % 41) - 20);
      }
      std::vector<T> mean(rows), rstd(rows);
      for (int64_t r = 0; r < rows; ++r) {
        mean[r] = T(0.25) * T(r) - T(0.375);
        rstd[r] = T(1.75) + T(0.125) * T(r);
      }
      for (const bool rms : {false, true}) {
        std::vector<double> want_w(n, 0.0), want_b(n, 0.0);
        for (int64_t r = 0; r < rows; ++r) {
          const T m = rms ? T(0) : mean[r];
          for (int64_t j = 0; j < n; ++j) {
            const T normalised = static_cast<T>((x[r * n + j] - m) * rstd[r]);
            want_w[j] += double(g[r * n + j]) * double(normalised);
            want_b[j] += double(g[r * n + j]);
          }
        }
        for (CpuCapability level : testing::machine_levels()) {
          INFO("n " << n << ", rows " << rows << (rms ? ", rms" : "") << ", level "
                    << cpu_capability_name(level));
          const k::cpu::NnLoops& nn = k::cpu::nn_loops_for(level);
          const T* m = rms ? nullptr : mean.data();
          // Garbage in the outputs first: the block writes its sums, adding to nothing.
          std::vector<double> acc_w(n, 0.5), acc_b(n, -0.25);
          nn.layer_norm_param_block(dt, acc_w.data(), acc_b.data(), g.data(), x.data(), m,
                                    rstd.data(), rows, n);
          CHECK(acc_w == want_w);
          CHECK(acc_b == want_b);
          // Either sum alone.
          std::vector<double> only_w(n, 7.0), only_b(n, -7.0);
          nn.layer_norm_param_block(dt, only_w.data(), nullptr, g.data(), x.data(), m,
                                    rstd.data(), rows, n);
          nn.layer_norm_param_block(dt, nullptr, only_b.data(), g.data(), x.data(), m,
                                    rstd.data(), rows, n);
          CHECK(only_w == want_w);
          CHECK(only_b == want_b);
        }
      }
    }
  }
}

}  // namespace
}  // namespace streamgrad
