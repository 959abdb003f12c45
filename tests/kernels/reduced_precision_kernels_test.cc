// float16 and bfloat16 in the kernels (issue 14): copy and fill convert natively with
// round-to-nearest-even at every instruction-set level, and the arithmetic kernels compute
// 16-bit operands in float32 (kernels/widen.h): sums and products accumulate in
// float32, broadcast inputs are widened once per distinct element, in-place and
// accumulating kernels keep their semantics, and mixed dtypes are refused.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <type_traits>
#include <vector>

#include "kernels/foreach.h"
#include "kernels/kernels.h"
#include "kernels/nn_kernels.h"
#include "runtime/base/half.h"
#include "runtime/runtime.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/level_test_util.h"

namespace streamgrad {
namespace {

using kernels::View;
using testing::Buffer;
using testing::LaunchLog;
using testing::Shape;

template <typename H>
uint16_t bits_of(H h) {
  return h.bits;
}

// Floats around every rounding edge of both formats, plus ordinary values.
std::vector<float> edge_values() {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.0f, 65520.0f, 1e-8f,
                          2.98e-8f, 5.96e-8f, 6.1e-5f, 1.0f / 3, 3.14159f, 1e30f, -1e30f,
                          INFINITY, -INFINITY, NAN, 3.4e38f, 1.00390625f, 1.0009765625f};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-70000.0f, 70000.0f);
  for (int i = 0; i < 2000; ++i) v.push_back(u(rng) * (i % 2 == 0 ? 1.0f : 1e-6f));
  return v;
}

template <typename H>
void check_copy_rounding(Device d) {
  const std::vector<float> src = edge_values();
  const int64_t n = static_cast<int64_t>(src.size());
  for (CpuCapability level : testing::machine_levels()) {
    testing::CapabilityScope scope(level);
    INFO("level " << cpu_capability_name(level) << " on " << d);
    Buffer<float> in(d, src);
    Buffer<H> out(d, static_cast<size_t>(n), H{});
    kernels::copy(current_stream(d), out.view(), in.view());
    const std::vector<H> got = out.read();
    for (int64_t i = 0; i < n; ++i) {
      INFO("element " << i << " = " << src[i]);
      CHECK(bits_of(got[i]) == bits_of(H::from_float(src[i])));
    }
    // Back to float32: exact.
    Buffer<float> back(d, static_cast<size_t>(n), 0.0f);
    kernels::copy(current_stream(d), back.view(), out.view());
    const std::vector<float> b = back.read();
    for (int64_t i = 0; i < n; ++i) {
      const float want = got[i].to_float();
      CHECK((std::memcmp(&b[i], &want, sizeof(float)) == 0));
    }
  }
}

TEST_CASE("copy rounds float32 to float16 and bfloat16 to nearest even at every level",
          "[kernels][amp]") {
  const Device d = testing::test_device();
  check_copy_rounding<Half>(d);
  check_copy_rounding<BFloat16>(d);
}

TEST_CASE("copy converts 16-bit values to and from the other dtypes", "[kernels][amp]") {
  const Device d = testing::test_device();
  const Stream s = current_stream(d);
  Buffer<Half> h(d, {Half::from_float(-2.75f), Half::from_float(0.0f), Half::from_float(NAN),
                     Half::from_float(65504.0f)});
  Buffer<int64_t> i(d, 4, 0);
  kernels::copy(s, i.view(), h.view());
  CHECK(i.read() == std::vector<int64_t>{-2, 0, 0, 65504});  // truncation; NaN -> 0
  Buffer<uint8_t> b(d, 4, 7);
  kernels::copy(s, b.view(), h.view());
  CHECK(b.read() == std::vector<uint8_t>{1, 0, 1, 1});
  // float64 -> bfloat16 rounds through float32, as the reference's conversion does.
  Buffer<double> x(d, {1.0 + 1e-9, -3.0e38, 1e300});
  Buffer<BFloat16> y(d, 3, BFloat16{});
  kernels::copy(s, y.view(), x.view());
  const std::vector<BFloat16> got = y.read();
  CHECK(got[0].to_float() == 1.0f);
  CHECK(got[1].to_float() == BFloat16::from_float(-3.0e38f).to_float());
  CHECK(std::isinf(got[2].to_float()));
  // fill rounds its value once.
  Buffer<Half> f(d, 3, Half{});
  kernels::fill(s, f.view(), 0.1);
  for (Half v : f.read()) CHECK(v.bits == Half::from_float(0.1f).bits);
}

TEST_CASE("a scalar operand is rounded to the 16-bit dtype first", "[kernels][amp]") {
  // As for float32 tensors (kernels.h): x == 0.1 holds for the float16 nearest 0.1, and
  // x + 0.1 adds that same float16 value.
  const Device d = testing::test_device();
  const Stream s = current_stream(d);
  Buffer<Half> x(d, {Half::from_float(0.1f), Half::from_float(1.0f)});
  Buffer<uint8_t> eq(d, 2, 0);
  kernels::compare_scalar(s, kernels::Compare::kEq, eq.view(), x.view(), 0.1);
  CHECK(eq.read() == std::vector<uint8_t>{1, 0});
  Buffer<BFloat16> y(d, {BFloat16::from_float(0.0f)});
  Buffer<BFloat16> z(d, 1, BFloat16{});
  kernels::unary_scalar(s, kernels::UnaryScalar::kAdd, z.view(), y.view(), 1.0 / 3);
  CHECK(z.read()[0].bits == BFloat16::from_float(1.0f / 3).bits);
}

TEST_CASE("16-bit sums and products accumulate in float32", "[kernels][amp]") {
  const Device d = testing::test_device();
  const Stream s = current_stream(d);
  // 10000 ones: a float16 accumulator stalls at 2048 (2048 + 1 rounds back to 2048).
  const int64_t n = 10000;
  Buffer<Half> ones(d, static_cast<size_t>(n), Half::from_float(1.0f));
  Buffer<Half> total(d, 1, Half{});
  View out = total.view(Shape({1}));
  kernels::reduce(s, kernels::Reduce::kSum, out, ones.view(Shape({n})));
  CHECK(total.read()[0].to_float() == 10000.0f);
  // A product with K = 4096 (bfloat16 holds 4096 exactly, not 4096 + 1 partial sums).
  const int64_t k = 4096;
  Buffer<BFloat16> a(d, static_cast<size_t>(k), BFloat16::from_float(1.0f));
  Buffer<BFloat16> c(d, 1, BFloat16{});
  kernels::matmul(s, c.view(Shape({1, 1})), a.view(Shape({1, k})), a.view(Shape({k, 1})));
  CHECK(c.read()[0].to_float() == 4096.0f);
}

// Small integers: every product and sum is exact in float32 and in the 16-bit result.
template <typename H>
std::vector<H> small_ints(size_t n, int period, int shift) {
  std::vector<H> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = H::from_float(static_cast<float>(static_cast<int>(i % period) - shift));
  }
  return v;
}

template <typename H>
void check_matmul_16(Device d, float eps) {
  const Stream s = current_stream(d);
  const bool cuda = d.type() == DeviceType::kCuda;
  INFO(d << (std::is_same<H, Half>::value ? " float16" : " bfloat16"));
  // [2, 5, 64] x [2, 64, 3], and the same b read transposed from a [2, 3, 64] buffer.
  const int64_t bs = 2, m = 5, k = 64, n = 3;
  const std::vector<H> av = small_ints<H>(bs * m * k, 5, 2), bv = small_ints<H>(bs * k * n, 3, 1);
  std::vector<float> want(static_cast<size_t>(bs * m * n), 0.0f);
  for (int64_t q = 0; q < bs; ++q)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t l = 0; l < k; ++l)
          want[(q * m + i) * n + j] += av[(q * m + i) * k + l].to_float() *
                                       bv[(q * k + l) * n + j].to_float();
  std::vector<H> bt(bv.size());
  for (int64_t q = 0; q < bs; ++q)
    for (int64_t l = 0; l < k; ++l)
      for (int64_t j = 0; j < n; ++j) bt[(q * n + j) * k + l] = bv[(q * k + l) * n + j];
  const Buffer<H> a(d, av), b(d, bv), b_t(d, bt);
  const Shape as({bs, m, k}), out_shape({bs, m, n});
  const Shape b_read_t = Shape({bs, n, k}).transposed(1, 2);
  for (const bool transposed : {false, true}) {
    INFO("b " << (transposed ? "transposed" : "row-major"));
    const View bview = transposed ? b_t.view(b_read_t) : b.view(Shape({bs, k, n}));
    Buffer<H> out(d, want.size(), H{});
    Buffer<float> out32(d, want.size(), 0.0f);
    {
      LaunchLog log;
      kernels::matmul(s, out.view(out_shape), a.view(as), bview);
      // cuda multiplies 16-bit operands itself: one launch, no widening copies.
      if (cuda) CHECK(log.count() == 1);
    }
    {
      LaunchLog log;
      kernels::matmul(s, out32.view(out_shape), a.view(as), bview);
      if (cuda) CHECK(log.count() == 1);
    }
    const std::vector<H> got = out.read();
    const std::vector<float> got32 = out32.read();
    for (size_t i = 0; i < want.size(); ++i) {
      CHECK(got[i].to_float() == want[i]);
      CHECK(got32[i] == want[i]);
    }
  }
  // Sums in float32, rounded once: 1 + eps/2 + eps/2 is 1 + eps, where a 16-bit
  // accumulator would round each half-eps away. With a bias (linear), of out's dtype.
  const std::vector<H> row = {H::from_float(1.0f), H::from_float(eps / 2), H::from_float(eps / 2)};
  const Buffer<H> x(d, row), ones(d, std::vector<H>(3, H::from_float(1.0f)));
  const Buffer<H> bias(d, std::vector<H>{H::from_float(0.0f)});
  Buffer<H> y(d, 1, H{});
  const View bias_view = bias.view(Shape({1}));
  {
    LaunchLog log;
    kernels::matmul(s, y.view(Shape({1, 1})), x.view(Shape({1, 3})), ones.view(Shape({3, 1})),
                    &bias_view);
    if (cuda) CHECK(log.count() == 1);
  }
  CHECK(y.read()[0].to_float() == 1.0f + eps);
}

TEST_CASE("16-bit matmul sums in float32 into a 16-bit or float32 out; cuda in one launch",
          "[kernels][amp]") {
  const Device d = testing::test_device();
  check_matmul_16<Half>(d, 1.0f / 1024);     // float16's epsilon
  check_matmul_16<BFloat16>(d, 1.0f / 128);  // bfloat16's
}

TEST_CASE("widened kernels: broadcast, in place, accumulation, and mixed dtypes", "[kernels][amp]") {
  const Device d = testing::test_device();
  const Stream s = current_stream(d);
  const int64_t rows = 2048, cols = 512;
  std::vector<Half> av(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < av.size(); ++i) av[i] = Half::from_float(static_cast<float>(i % 97) / 8);
  Buffer<Half> a(d, av);
  Buffer<Half> bias(d, static_cast<size_t>(cols), Half::from_float(0.5f));
  Buffer<Half> out(d, av.size(), Half{});
  // The float32 scratch a call allocates, from the allocator's statistics.
  auto scratch_of = [&](const std::function<void()>& call) {
    synchronize(d);
    reset_peak_stats(d);
    const int64_t before = memory_stats(d).allocated_bytes.current;
    call();
    synchronize(d);
    return memory_stats(d).allocated_bytes.peak - before;
  };
  // The element-wise kernels take 16-bit operands themselves on every device (the host
  // widens block by block inside its loops): no scratch at all, small or large.
  const int64_t small = 64;
  Buffer<Half> small_out(d, static_cast<size_t>(small * cols), Half{});
  CHECK(scratch_of([&] {
          kernels::binary(s, kernels::Binary::kAdd, small_out.view(Shape({small, cols})),
                          a.view(Shape({small, cols})), bias.view(Shape({small, cols}, {0, 1})));
        }) == 0);
  CHECK(scratch_of([&] {
          kernels::binary(s, kernels::Binary::kAdd, out.view(Shape({rows, cols})),
                          a.view(Shape({rows, cols})), bias.view(Shape({rows, cols}, {0, 1})));
        }) == 0);
  const bool cuda = d.type() == DeviceType::kCuda;
  // A widened batched kernel (layer norm: 16-bit activations, float32 statistics) is cut
  // into chunks of rows on cpu and sim, and on cuda widened whole: one launch per copy
  // and one layer norm, not one per chunk.
  {
    const Shape rows_cols({1024, 1024}), per_row({1024});
    Buffer<Half> ln_in(d, static_cast<size_t>(rows_cols.numel()), Half::from_float(0.25f));
    Buffer<Half> ln_out(d, static_cast<size_t>(rows_cols.numel()), Half{});
    Buffer<float> mean(d, 1024, 0.0f), rstd(d, 1024, 0.0f);
    const int64_t ln_scratch = scratch_of([&] {
      kernels::layer_norm_forward(s, ln_out.view(rows_cols), mean.view(per_row),
                                  rstd.view(per_row), ln_in.view(rows_cols), nullptr, nullptr,
                                  1e-5);
    });
    const int64_t whole = 2 * rows_cols.numel() * 4;
    if (cuda) {
      CHECK(ln_scratch >= whole);
    } else {
      CHECK(ln_scratch > 0);
      CHECK(ln_scratch <= (int64_t{1} << 18) * 4 + 8192);
    }
  }
  std::vector<Half> got = out.read();
  for (size_t i = 0; i < got.size(); i += 101) {
    CHECK(got[i].bits == Half::from_float(av[i].to_float() + 0.5f).bits);
  }
  // In place: out is exactly a.
  kernels::unary_scalar(s, kernels::UnaryScalar::kMul, a.view(), a.view(), 2.0);
  got = a.read();
  for (size_t i = 0; i < got.size(); i += 101) {
    CHECK(got[i].bits == Half::from_float(av[i].to_float() * 2).bits);
  }
  // An accumulating kernel keeps what was there: index_add adds into out.
  Buffer<BFloat16> acc(d, 4, BFloat16::from_float(1.0f));
  Buffer<int64_t> idx(d, {3, 0, 3});
  Buffer<BFloat16> src(d, {BFloat16::from_float(0.5f), BFloat16::from_float(2.0f),
                           BFloat16::from_float(0.25f)});
  kernels::index_add(s, acc.view(), 0, idx.view(), src.view());
  std::vector<float> accv;
  for (BFloat16 v : acc.read()) accv.push_back(v.to_float());
  CHECK(accv == std::vector<float>{3.0f, 1.0f, 1.0f, 1.75f});
  // float16 beside float32 is not silently converted.
  Buffer<float> f(d, static_cast<size_t>(cols), 1.0f);
  Buffer<Half> h(d, static_cast<size_t>(cols), Half{});
  CHECK_THROWS_WITH(kernels::binary(s, kernels::Binary::kAdd, h.view(), h.view(), f.view()),
                    Catch::Contains("float16") && Catch::Contains("float32"));
  CHECK_THROWS_WITH(kernels::binary(s, kernels::Binary::kAdd, h.view(),
                                    Buffer<BFloat16>(d, static_cast<size_t>(cols), BFloat16{}).view(),
                                    h.view()),
                    Catch::Contains("bfloat16"));
  synchronize(d);
}

TEST_CASE("optimiser updates of 16-bit parameters run in float32", "[kernels][amp]") {
  const Device d = testing::test_device();
  const Stream s = current_stream(d);
  Buffer<Half> p(d, {Half::from_float(1.0f), Half::from_float(-2.0f)});
  Buffer<Half> g(d, {Half::from_float(0.5f), Half::from_float(0.25f)});
  Buffer<Half> buf(d, 2, Half{});
  kernels::SgdHyper h;
  h.lr = 0.1;
  h.momentum = 0.9;
  kernels::sgd_update(s, h, {{p.view(), g.view(), buf.view(), /*fresh_buffer=*/true}});
  kernels::sgd_update(s, h, {{p.view(), g.view(), buf.view(), /*fresh_buffer=*/false}});
  // buf: 0.5 then 0.9 * 0.5 + 0.5 = 0.95; p: 1 - 0.05 - 0.095, rounded to float16 once per
  // step.
  const std::vector<Half> pv = p.read(), bv = buf.read();
  const float p1 = Half::from_float(1.0f - 0.1f * 0.5f).to_float();
  CHECK(pv[0].bits == Half::from_float(p1 - 0.1f * bv[0].to_float()).bits);
  CHECK(bv[0].to_float() == Half::from_float(0.95f).to_float());
}

}  // namespace
}  // namespace streamgrad
