// The cuda element-wise kernels (kernels/cuda/cuda_kernels.h) against the cpu kernels on the
// same inputs: every unary, scalar and binary op, axpy, fill and copy between every pair
// of dtypes (float16 and bfloat16 included), uniform and normal, comparisons and where, cat, stack and arange, on
// contiguous, transposed, sliced and broadcast (stride 0) views, and one launch past the
// 32-bit index path. Tolerances: bit-for-bit for the arithmetic (IEEE +, -, *, / and sqrt
// are correctly rounded on both devices, and the device code is compiled without FMA
// contraction); 8 ulp for the ops that call the math library (exp, log, tanh, sigmoid,
// pow), whose device versions round differently from glibc's. Without a GPU (CI) each
// test case says once that it skipped and why.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/foreach.h"
#include "kernels/kernels.h"
#include "kernels/nn_kernels.h"
#include "runtime/base/half.h"
#include "runtime/runtime.h"
#include "tests/kernels/cuda/cuda_test_util.h"
#include "tests/kernels/kernel_test_util.h"

namespace streamgrad {
namespace {

namespace k = kernels;
using testing::Buffer;
using testing::check_ulps;
using testing::require_cuda_device;
using testing::Shape;


// The views the element-wise tests read and write: [3, 4] contiguous; read transposed from
// a [4, 3] buffer; written into every other column of a [3, 8] buffer; and a broadcast
// row (stride 0 down the rows).
struct Views {
  Shape in, out;
};
const Views kViews[] = {
    {Shape({3, 4}), Shape({3, 4})},
    {Shape({4, 3}).transposed(0, 1), Shape({3, 4}, {8, 2}, 1)},
    {Shape({3, 4}, {0, 1}, 2), Shape({3, 4})},
};

// Runs `run(stream, out, in_a, in_b)` on cpu and on cuda:0 with the same host inputs and
// compares the outputs (the whole buffers, so untouched elements must agree too).
template <typename T, typename Run>
void against_cpu(const std::vector<T>& a, const std::vector<T>& b, int ulps, Run run) {
  std::vector<T> outs[2];
  int i = 0;
  for (const Device d : {Device("cpu"), Device("cuda:0")}) {
    Buffer<T> in_a(d, a), in_b(d, b), out(d, 24, T(-7));
    run(current_stream(d), out, in_a, in_b);
    outs[i++] = out.read();
  }
  check_ulps(outs[1], outs[0], ulps);
}

bool calls_libm(k::Unary op) {
  return op == k::Unary::kExp || op == k::Unary::kLog || op == k::Unary::kTanh ||
         op == k::Unary::kSigmoid;
}

TEMPLATE_TEST_CASE("cuda unary and scalar ops equal the cpu kernels", "[cuda][kernels]", float,
                   double) {
  using T = TestType;
  require_cuda_device();
  std::vector<T> x = testing::random_values<T>(12, -3, 3, 1);
  x[5] = std::numeric_limits<T>::quiet_NaN();
  x[7] = std::numeric_limits<T>::infinity();
  const std::vector<T> pos = testing::random_values<T>(12, 0.1, 3, 2);
  for (const Views& v : kViews) {
    for (int o = 0; o <= static_cast<int>(k::Unary::kSquare); ++o) {
      const k::Unary op = static_cast<k::Unary>(o);
      INFO("unary op " << o);
      const bool positive = op == k::Unary::kLog || op == k::Unary::kSqrt;
      against_cpu<T>(positive ? pos : x, x, calls_libm(op) ? 8 : 0,
                     [&](const Stream& s, Buffer<T>& out, Buffer<T>& a, Buffer<T>&) {
                       k::unary(s, op, out.view(v.out), a.view(v.in));
                     });
    }
    for (int o = 0; o <= static_cast<int>(k::UnaryScalar::kGe); ++o) {
      const k::UnaryScalar op = static_cast<k::UnaryScalar>(o);
      for (const double scalar : {2.0, -0.75}) {
        INFO("scalar op " << o << ", scalar " << scalar);
        const bool is_pow = op == k::UnaryScalar::kPow;
        against_cpu<T>(is_pow ? pos : x, x, is_pow && scalar != 2.0 ? 8 : 0,
                       [&](const Stream& s, Buffer<T>& out, Buffer<T>& a, Buffer<T>&) {
                         k::unary_scalar(s, op, out.view(v.out), a.view(v.in), scalar);
                       });
      }
    }
  }
}

TEMPLATE_TEST_CASE("cuda binary ops and axpy equal the cpu kernels, broadcasting included",
                   "[cuda][kernels]", float, double) {
  using T = TestType;
  require_cuda_device();
  const std::vector<T> a = testing::random_values<T>(12, 0.1, 3, 3);
  const std::vector<T> b = testing::random_values<T>(12, -2, 2, 4);
  for (const Views& v : kViews) {
    for (int o = 0; o <= static_cast<int>(k::Binary::kSigmoidBackward); ++o) {
      const k::Binary op = static_cast<k::Binary>(o);
      INFO("binary op " << o);
      // a read through the view's layout, b broadcast along the rows.
      const Shape b_row({3, 4}, {0, 1}, 0);
      against_cpu<T>(a, b, op == k::Binary::kPow ? 8 : 0,
                     [&](const Stream& s, Buffer<T>& out, Buffer<T>& x, Buffer<T>& y) {
                       k::binary(s, op, out.view(v.out), x.view(v.in), y.view(b_row));
                     });
    }
    // In place: out is exactly a.
    against_cpu<T>(a, b, 0, [&](const Stream& s, Buffer<T>& out, Buffer<T>& x, Buffer<T>& y) {
      k::copy(s, out.view(v.out), x.view(v.in));
      k::axpy(s, out.view(v.out), out.view(v.out), y.view(Shape({3, 4})), -0.3);
    });
  }
}

template <typename T>
constexpr bool is_16bit() {
  return std::is_same<T, Half>::value || std::is_same<T, BFloat16>::value;
}

// `v` as a T; the 16-bit types round from float, as their conversions do.
template <typename T>
T make(double v) {
  if constexpr (is_16bit<T>()) {
    return T::from_float(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

template <typename To, typename From>
void check_copy() {
  std::vector<From> src(12);
  // 1e30 overflows float16 (to infinity) and 70000.5 rounds in both 16-bit types; 1e-6 is
  // a float16 subnormal.
  const double values[] = {0, 1, -2.5, 3.75, 1e30, -1e30, 7, 70000.5, -0.5, 1e-6, -9, 1};
  for (size_t i = 0; i < src.size(); ++i) src[i] = make<From>(values[i]);
  if constexpr (std::is_floating_point<From>::value || is_16bit<From>()) {
    src[3] = make<From>(std::numeric_limits<double>::quiet_NaN());
  }
  std::vector<To> outs[2];
  int i = 0;
  for (const Device d : {Device("cpu"), Device("cuda:0")}) {
    Buffer<From> in(d, src);
    Buffer<To> out(d, 24, make<To>(0));
    k::copy(current_stream(d), out.view(Shape({3, 4}, {8, 2}, 1)),
            in.view(Shape({4, 3}).transposed(0, 1)));
    outs[i++] = out.read();
  }
  CHECK(std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * sizeof(To)) == 0);
}

template <typename To>
void check_copies_to() {
  check_copy<To, float>();
  check_copy<To, double>();
  check_copy<To, int64_t>();
  check_copy<To, uint8_t>();
  check_copy<To, Half>();
  check_copy<To, BFloat16>();
}

TEST_CASE("cuda copy converts every dtype pair as the cpu does; fill writes every dtype",
          "[cuda][kernels]") {
  require_cuda_device();
  check_copies_to<float>();
  check_copies_to<double>();
  check_copies_to<int64_t>();
  check_copies_to<uint8_t>();
  check_copies_to<Half>();
  check_copies_to<BFloat16>();
  std::vector<double> outs[2];
  int i = 0;
  for (const Device d : {Device("cpu"), Device("cuda:0")}) {
    Buffer<double> out(d, 24, -1.0);
    k::fill(current_stream(d), out.view(Shape({3, 4}, {8, 2}, 1)), 2.5);
    outs[i++] = out.read();
  }
  CHECK(outs[0] == outs[1]);
}

TEMPLATE_TEST_CASE("cuda random numbers: uniform the cpu's bits, normal within rounding",
                   "[cuda][kernels][random]", float, double) {
  using T = TestType;
  require_cuda_device();
  std::vector<T> outs[2][2];
  int i = 0;
  for (const Device d : {Device("cpu"), Device("cuda:0")}) {
    Buffer<T> u(d, 24, T(0)), g(d, 24, T(0));
    // Strided outs: the counter follows row-major order, not memory.
    k::uniform(current_stream(d), u.view(Shape({3, 4}, {8, 2}, 1)), -1, 2, 42, 1000);
    k::normal(current_stream(d), g.view(Shape({4, 3}).transposed(0, 1)), 0, 1, 7, 5);
    outs[i][0] = u.read();
    outs[i][1] = g.read();
    ++i;
  }
  check_ulps(outs[1][0], outs[0][0], 0);
  const double tol = std::is_same<T, float>::value ? 1e-6 : 1e-13;
  for (size_t j = 0; j < outs[0][1].size(); ++j) {
    CHECK(std::fabs(outs[1][1][j] - outs[0][1][j]) <= tol * (1 + std::fabs(outs[0][1][j])));
  }
}

TEST_CASE("cuda compare, compare_scalar and where equal the cpu's", "[cuda][kernels][select]") {
  require_cuda_device();
  std::vector<double> a = testing::random_values<double>(12, -2, 2, 10);
  std::vector<double> b = a;
  for (size_t i = 0; i < b.size(); i += 3) b[i] += 0.5;  // some equal, some not
  a[4] = std::numeric_limits<double>::quiet_NaN();
  const std::vector<int64_t> ints = {-3, 0, 5, 9007199254740993LL, 2, 2, 1, -1, 7, 4, 3, 0};
  std::vector<uint8_t> results[2];
  int i = 0;
  for (const Device d : {Device("cpu"), Device("cuda:0")}) {
    Buffer<double> ba(d, a), bb(d, b), wout(d, 24, -7.0);
    Buffer<int64_t> bi(d, ints);
    Buffer<uint8_t> out(d, 24 * 14, uint8_t(9));
    std::vector<uint8_t> all;
    int slot = 0;
    for (int o = 0; o <= static_cast<int>(k::Compare::kGe); ++o) {
      const k::Compare op = static_cast<k::Compare>(o);
      const Shape os({3, 4}, {8, 2}, 1 + 24 * slot++);
      k::compare(current_stream(d), op, out.view(os), ba.view(Shape({4, 3}).transposed(0, 1)),
                 bb.view(Shape({3, 4})));
      // int64 elements against an integral scalar past 2^53, and a fractional one.
      k::compare_scalar(current_stream(d), op, out.view(Shape({12}, {1}, 24 * slot++)),
                        bi.view(), o % 2 == 0 ? 9007199254740992.0 : 1.5);
    }
    // where(out = a > b, a, b) into a strided out, b broadcast along the rows.
    k::compare(current_stream(d), k::Compare::kGt, out.view(Shape({3, 4}, {4, 1}, 24 * 13)),
               ba.view(Shape({3, 4})), bb.view(Shape({3, 4})));
    k::where(current_stream(d), wout.view(Shape({3, 4}, {8, 2}, 1)),
             out.view(Shape({3, 4}, {4, 1}, 24 * 13)), ba.view(Shape({3, 4})),
             bb.view(Shape({3, 4}, {0, 1}, 0)));
    all = out.read();
    for (double v : wout.read()) {
      uint8_t bytes[sizeof(double)];
      std::memcpy(bytes, &v, sizeof v);
      all.insert(all.end(), bytes, bytes + sizeof v);
    }
    results[i++] = all;
  }
  CHECK(results[1] == results[0]);
}

TEST_CASE("cuda cat, stack and arange equal the cpu's", "[cuda][kernels][join]") {
  require_cuda_device();
  const std::vector<float> x = testing::random_values<float>(12, -2, 2, 12);
  std::vector<float> results[2];
  std::vector<int64_t> ranges[2];
  int i = 0;
  for (const Device d : {Device("cpu"), Device("cuda:0")}) {
    const Stream s = current_stream(d);
    Buffer<float> bx(d, x), out(d, 64, -7.0f);
    Buffer<int64_t> r(d, 10, int64_t(0));
    // cat along dim 1 of a [3, 4] and a transposed [3, 2] into a [3, 6]; stack two [2, 3]
    // (one transposed) along dim 1 into a [2, 2, 3].
    k::cat(s, out.view(Shape({3, 6})),
           {bx.view(Shape({3, 4})), bx.view(Shape({2, 3}).transposed(0, 1))}, 1);
    k::stack(s, out.view(Shape({2, 2, 3}, {6, 3, 1}, 20)),
             {bx.view(Shape({2, 3})), bx.view(Shape({3, 2}).transposed(0, 1))}, 1);
    k::arange(s, out.view(Shape({5}, {2}, 40)), -1.5, 0.25);
    k::arange(s, r.view(Shape({10})), -3, 7);
    results[i] = out.read();
    ranges[i++] = r.read();
  }
  CHECK(results[1] == results[0]);
  CHECK(ranges[1] == ranges[0]);
}

TEST_CASE("cuda launches are seen by observers and take the 64-bit path past 2^30",
          "[cuda][kernels]") {
  require_cuda_device();
  const Device d("cuda:0");
  testing::LaunchLog log;
  Buffer<float> a(d, std::vector<float>{1, 2, 3, 4}), out(d, 4, 0.0f);
  k::binary(current_stream(d), k::Binary::kMul, out.view(), a.view(), a.view());
  log.expect_ranges("mul", {a.view()}, {out.view()});
  CHECK(out.read() == std::vector<float>{1, 4, 9, 16});
  // Three bool elements 2^30 + 1 apart: the last offset is past kMax32 (2^30) and past
  // what a 32-bit index holds, so the kernel must index in 64 bits; only the three
  // elements are written. (2^30 elements take the same path by their count, at 32 s per
  // run on the interpreted device: the hidden "[large]" case below, which bench/gpu.sh
  // runs on a GPU.)
  const int64_t step = (int64_t(1) << 30) + 1;
  Storage big = Storage::allocate(static_cast<size_t>(2 * step + 2), d);
  const uint8_t zero = 0;
  for (const int64_t at : {int64_t(1), step + 1, 2 * step + 1}) {
    copy_bytes(static_cast<char*>(big.data()) + at, d, &zero, Device("cpu"), 1);
  }
  k::View v;
  v.data = big.data();
  v.dtype = DType::kBool;
  v.sizes = {3};
  v.strides = {step};
  k::fill(current_stream(d), v, 1.0);
  for (const int64_t at : {int64_t(0), step, 2 * step}) {
    uint8_t byte = 0, next = 7;
    copy_bytes(&byte, Device("cpu"), static_cast<char*>(big.data()) + at, d, 1);
    copy_bytes(&next, Device("cpu"), static_cast<char*>(big.data()) + at + 1, d, 1);
    CHECK(byte == 1);
    CHECK(next == 0);  // the byte after each element is left alone
  }
  // Handed back at once: LeakSanitizer's exit scan of the cached 2 GiB took 8 s.
  big = Storage();
  empty_cache(d);
}

TEST_CASE("cuda fills 2^30 + 3 elements through the 64-bit path", "[.][large][cuda][kernels]") {
  require_cuda_device();
  const Device d("cuda:0");
  const int64_t n = (int64_t(1) << 30) + 3;  // past kMax32 by its element count
  Storage big = Storage::allocate(static_cast<size_t>(n), d);
  k::View v;
  v.data = big.data();
  v.dtype = DType::kBool;
  v.sizes = {n};
  v.strides = {1};
  k::fill(current_stream(d), v, 1.0);
  for (const int64_t at : {int64_t(0), n / 2, n - 1}) {
    uint8_t byte = 0;
    copy_bytes(&byte, Device("cpu"), static_cast<char*>(big.data()) + at, d, 1);
    CHECK(byte == 1);
  }
  big = Storage();
  empty_cache(d);
}

}  // namespace
}  // namespace streamgrad
