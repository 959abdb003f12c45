// The cuda element-wise kernels (kernels/cuda_kernels.h) against the cpu kernels on the
// same inputs: every unary, scalar and binary op, axpy, fill and copy between every pair
// of dtypes, uniform and normal, on contiguous, transposed, sliced and broadcast (stride 0)
// views, comparisons and where, the index kernels, cat, stack and arange, the fused
// optimiser updates, sum / max / min and argmax / argmin, matmul in every layout the plan distinguishes (with and without TF32), and one
// launch past the 32-bit index path. Tolerances: bit-for-bit for the arithmetic (IEEE
// +, -, *, / and sqrt are correctly rounded on both devices, and the device code is
// compiled without FMA contraction); 8 ulp for the ops that call the math library (exp,
// log, tanh, sigmoid, pow), whose device versions round differently from glibc's.
// Without a GPU (CI) each test case says once that it skipped and why.
#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/foreach.h"
#include "kernels/kernels.h"
#include "runtime/runtime.h"
#include "tests/kernels/kernel_test_util.h"

namespace streamgrad {
namespace {

namespace k = kernels;
using testing::Buffer;
using testing::Shape;

bool have_gpu() {
  if (device_count(DeviceType::kCuda) > 0) return true;
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  (void)cudaGetLastError();
  WARN("cuda kernel tests skipped: no usable GPU (cudaGetDeviceCount: "
       << cudaGetErrorName(err) << ", i.e. no NVIDIA driver or no GPU on this machine)");
  return false;
}

// Within `ulps` units in the last place of want (bitwise when ulps is 0; NaN matches NaN).
template <typename T>
void check_ulps(const std::vector<T>& got, const std::vector<T>& want, int ulps) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": cuda " << got[i] << ", cpu " << want[i]);
    if (std::isnan(want[i])) {
      CHECK(std::isnan(got[i]));
    } else if (ulps == 0 || std::isinf(want[i])) {
      CHECK(std::memcmp(&got[i], &want[i], sizeof(T)) == 0);
    } else {
      const T step = std::nextafter(std::fabs(want[i]), std::numeric_limits<T>::infinity()) -
                     std::fabs(want[i]);
      CHECK(std::fabs(got[i] - want[i]) <= ulps * step);
    }
  }
}

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
  if (!have_gpu()) return;
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
  if (!have_gpu()) return;
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

template <typename To, typename From>
void check_copy() {
  std::vector<From> src(12);
  const double values[] = {0, 1, -2.5, 3.75, 1e30, -1e30, 7, 0.5, -0.5, 2, -9, 1};
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<From>(values[i]);
  if constexpr (std::is_floating_point<From>::value) {
    src[3] = std::numeric_limits<From>::quiet_NaN();
  }
  std::vector<To> outs[2];
  int i = 0;
  for (const Device d : {Device("cpu"), Device("cuda:0")}) {
    Buffer<From> in(d, src);
    Buffer<To> out(d, 24, To(0));
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
}

TEST_CASE("cuda copy converts every dtype pair as the cpu does; fill writes every dtype",
          "[cuda][kernels]") {
  if (!have_gpu()) return;
  check_copies_to<float>();
  check_copies_to<double>();
  check_copies_to<int64_t>();
  check_copies_to<uint8_t>();
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
  if (!have_gpu()) return;
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

// a [2, 3, 4] times b [2, 4, 5] in the layouts the plan treats differently, on cpu and on
// cuda:0; cuBLAS sums in its own order, hence the tolerance (k = 4 terms).
template <typename T>
void check_matmul(bool tf32) {
  const std::vector<T> a = testing::random_values<T>(2 * 3 * 4 * 2, -1, 1, 5);
  const std::vector<T> b = testing::random_values<T>(2 * 4 * 5 * 2, -1, 1, 6);
  const std::vector<T> bias = testing::random_values<T>(5, -1, 1, 7);
  struct Case {
    const char* what;
    Shape a, b, out;
    bool bias;
  };
  const Case cases[] = {
      {"row-major", Shape({3, 4}), Shape({4, 5}), Shape({3, 5}), false},
      {"transposed a and b", Shape({4, 3}).transposed(0, 1), Shape({5, 4}).transposed(0, 1),
       Shape({3, 5}), false},
      {"column-major out", Shape({3, 4}), Shape({4, 5}), Shape({5, 3}).transposed(0, 1), false},
      {"packed a, packed out", Shape({3, 4}, {8, 2}), Shape({4, 5}), Shape({3, 5}, {10, 2}),
       false},
      {"bias", Shape({3, 4}), Shape({4, 5}), Shape({3, 5}), true},
      {"bias, column-major out", Shape({3, 4}), Shape({4, 5}), Shape({5, 3}).transposed(0, 1),
       true},
      {"batched, b broadcast", Shape({2, 3, 4}), Shape({2, 4, 5}, {0, 5, 1}), Shape({2, 3, 5}),
       false},
      {"batched, packed b", Shape({2, 3, 4}), Shape({2, 4, 5}, {40, 10, 2}), Shape({2, 3, 5}),
       false},
      {"k = 0 with bias", Shape({3, 0}), Shape({0, 5}), Shape({3, 5}), true},
  };
  const double tol = std::is_same<T, double>::value ? 1e-12 : tf32 ? 2e-2 : 1e-5;
  set_matmul_allow_tf32(tf32);
  for (const Case& c : cases) {
    INFO(c.what << (tf32 ? ", TF32 allowed" : ""));
    std::vector<T> outs[2];
    int i = 0;
    for (const Device d : {Device("cpu"), Device("cuda:0")}) {
      Buffer<T> ba(d, a), bb(d, b), bbias(d, bias), out(d, 40, T(-7));
      const k::View bias_view = bbias.view();
      k::matmul(current_stream(d), out.view(c.out), ba.view(c.a), bb.view(c.b),
                c.bias ? &bias_view : nullptr);
      outs[i++] = out.read();
    }
    for (size_t j = 0; j < outs[0].size(); ++j) {
      CHECK(std::fabs(outs[1][j] - outs[0][j]) <= tol * (1 + std::fabs(outs[0][j])));
    }
  }
  set_matmul_allow_tf32(false);
}

TEMPLATE_TEST_CASE("cuda matmul through cuBLAS equals the cpu's in every layout",
                   "[cuda][kernels][matmul]", float, double) {
  if (!have_gpu()) return;
  check_matmul<TestType>(false);
  check_matmul<TestType>(true);  // float64 ignores the switch
}

TEMPLATE_TEST_CASE("cuda reductions and arg reductions equal the cpu's",
                   "[cuda][kernels][reduce]", float, double) {
  using T = TestType;
  if (!have_gpu()) return;
  // [3, 4, 5] with ties (few distinct values) and a NaN in one row.
  std::vector<T> x(60);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>((i * 7) % 5) - 2;
  x[23] = std::numeric_limits<T>::quiet_NaN();
  const Shape in({3, 4, 5});
  // out shapes in keepdim form: reduce dim 2, dims {0, 2}, all, none.
  const Shape outs_shapes[] = {Shape({3, 4, 1}), Shape({1, 4, 1}), Shape({1, 1, 1}),
                               Shape({3, 4, 5})};
  for (const Shape& os : outs_shapes) {
    for (const k::Reduce op : {k::Reduce::kSum, k::Reduce::kMax, k::Reduce::kMin}) {
      INFO("reduce " << static_cast<int>(op) << " into " << os.numel() << " outputs");
      std::vector<T> outs[2];
      int i = 0;
      for (const Device d : {Device("cpu"), Device("cuda:0")}) {
        Buffer<T> bx(d, x), out(d, 60, T(-7));
        k::reduce(current_stream(d), op, out.view(os), bx.view(in));
        outs[i++] = out.read();
      }
      check_ulps(outs[1], outs[0], 0);  // small integers: every order sums exactly
    }
  }
  for (int64_t dim = 0; dim < 3; ++dim) {
    for (const bool is_max : {true, false}) {
      INFO("arg_reduce dim " << dim << (is_max ? " max" : " min"));
      Shape vs = in;
      vs.sizes[dim] = 1;
      vs = Shape(vs.sizes);
      std::vector<T> values[2];
      std::vector<int64_t> indices[2];
      int i = 0;
      for (const Device d : {Device("cpu"), Device("cuda:0")}) {
        Buffer<T> bx(d, x), v(d, 60, T(0));
        Buffer<int64_t> ix(d, 60, int64_t(-1));
        k::arg_reduce(current_stream(d), is_max, v.view(vs), ix.view(vs), bx.view(in), dim);
        values[i] = v.read();
        indices[i++] = ix.read();
      }
      CHECK(indices[1] == indices[0]);
      check_ulps(values[1], values[0], 0);
    }
  }
  // A long sum (many elements per thread, then the block's tree): within rounding.
  const std::vector<T> big = testing::random_values<T>(100003, -1, 1, 9);
  T sums[2];
  int i = 0;
  for (const Device d : {Device("cpu"), Device("cuda:0")}) {
    Buffer<T> bx(d, big), out(d, 1, T(0));
    k::reduce(current_stream(d), k::Reduce::kSum, out.view(Shape({1})),
              bx.view(Shape({100003})));
    sums[i++] = out.read()[0];
  }
  const double tol = std::is_same<T, float>::value ? 1e-6 : 1e-12;  // one float ulp
  CHECK(std::fabs(sums[1] - sums[0]) <= tol * (1 + std::fabs(sums[0])));
}

TEST_CASE("cuda compare, compare_scalar and where equal the cpu's", "[cuda][kernels][select]") {
  if (!have_gpu()) return;
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

TEST_CASE("cuda index kernels equal the cpu's and refuse bad indices, writing nothing",
          "[cuda][kernels][index]") {
  if (!have_gpu()) return;
  const std::vector<double> x = testing::random_values<double>(12, -2, 2, 11);
  // Small integers and halves: every order of the atomic sums is exact, so duplicates
  // (index 0 twice) must give the cpu's bits.
  const std::vector<double> src = {1, 2, 3, 4.5, -1, 0.5, 2, 2, 1, -3, 4, 8, 0, 1, 1.5, -2};
  const std::vector<int64_t> idx = {0, 2, 0, 1};
  const std::vector<int64_t> gidx = {2, 0, 1, 1, 0, 2, 2, 2, 0, 1, 1, 0};
  std::vector<double> results[2];
  int i = 0;
  for (const Device d : {Device("cpu"), Device("cuda:0")}) {
    const Stream s = current_stream(d);
    Buffer<double> bx(d, x), bsrc(d, src), out(d, 64, 0.0);
    Buffer<int64_t> bi(d, idx), bg(d, gidx);
    // in [3, 4] read transposed as [4, 3]: rows picked along dim 0; then along dim 1.
    k::index_select(s, out.view(Shape({4, 3}, {3, 1}, 0)),
                    bx.view(Shape({3, 4}).transposed(0, 1)), 0, bi.view());
    k::index_select(s, out.view(Shape({4, 4}, {4, 1}, 12)), bx.view(Shape({4, 3})), 1,
                    bi.view());
    k::gather(s, out.view(Shape({3, 4}, {4, 1}, 28)), bx.view(Shape({3, 4})), 0,
              bg.view(Shape({3, 4})));
    k::index_add(s, out.view(Shape({3, 4}, {4, 1}, 40)), 0, bi.view(), bsrc.view(Shape({4, 4})));
    k::scatter_add(s, out.view(Shape({3, 4}, {4, 1}, 52)), 0, bg.view(Shape({2, 4})),
                   bsrc.view(Shape({2, 4})));
    results[i++] = out.read();
  }
  CHECK(results[1] == results[0]);

  const Device d("cuda:0");
  Buffer<double> bx(d, x), out(d, 8, 7.0);
  Buffer<int64_t> bad(d, std::vector<int64_t>{0, 5});
  CHECK_THROWS_WITH(k::index_select(current_stream(d), out.view(Shape({2, 4})),
                                    bx.view(Shape({3, 4})), 0, bad.view()),
                    Catch::Contains("index 5 (element 1 of index"));
  CHECK(out.read() == std::vector<double>(8, 7.0));
}

TEST_CASE("cuda cat, stack and arange equal the cpu's", "[cuda][kernels][join]") {
  if (!have_gpu()) return;
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
    k::cat(s, out.view(Shape({3, 6})), {bx.view(Shape({3, 4})), bx.view(Shape({2, 3}).transposed(0, 1))}, 1);
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

TEMPLATE_TEST_CASE("cuda sgd_update and adam_update give the cpu's bits",
                   "[cuda][kernels][foreach]", float, double) {
  using T = TestType;
  if (!have_gpu()) return;
  const std::vector<T> p = testing::random_values<T>(12, -1, 1, 13);
  const std::vector<T> g = testing::random_values<T>(12, -1, 1, 14);
  const std::vector<T> state = testing::random_values<T>(12, 0, 1, 15);
  k::SgdHyper sgd;
  sgd.lr = 0.1;
  sgd.momentum = 0.9;
  sgd.dampening = 0.1;
  sgd.weight_decay = 0.01;
  sgd.nesterov = true;
  k::AdamHyper adam;
  adam.lr = 0.01;
  adam.weight_decay = 0.1;
  std::vector<T> results[2];
  int i = 0;
  for (const Device d : {Device("cpu"), Device("cuda:0")}) {
    const Stream s = current_stream(d);
    Buffer<T> p1(d, p), p2(d, p), p3(d, p), p4(d, p), grad(d, g), buf(d, state), buf2(d, state),
        m(d, state), v(d, state), m2(d, state), v2(d, state);
    // Strided grad (read transposed); a fresh buffer and a used one.
    const Shape rows({3, 4}), cols = Shape({4, 3}).transposed(0, 1);
    k::sgd_update(s, sgd, {{p1.view(rows), grad.view(cols), buf.view(rows), true},
                           {p2.view(rows), grad.view(rows), buf2.view(rows), false}});
    k::adam_update(s, adam, {{p3.view(rows), grad.view(cols), m.view(rows), v.view(rows), 3,
                              false}});
    adam.decoupled = true;
    k::adam_update(s, adam, {{p4.view(rows), grad.view(rows), m2.view(rows), v2.view(rows), 1,
                              true}});
    adam.decoupled = false;
    for (const Buffer<T>* b : {&p1, &p2, &p3, &p4, &buf, &buf2, &m, &v, &m2, &v2}) {
      const std::vector<T> r = b->read();
      results[i].insert(results[i].end(), r.begin(), r.end());
    }
    ++i;
  }
  check_ulps(results[1], results[0], 0);
}

TEST_CASE("cuda launches are seen by observers and take the 64-bit path past 2^30 elements",
          "[cuda][kernels]") {
  if (!have_gpu()) return;
  const Device d("cuda:0");
  testing::LaunchLog log;
  Buffer<float> a(d, std::vector<float>{1, 2, 3, 4}), out(d, 4, 0.0f);
  k::binary(current_stream(d), k::Binary::kMul, out.view(), a.view(), a.view());
  log.expect_ranges("mul", {a.view()}, {out.view()});
  CHECK(out.read() == std::vector<float>{1, 4, 9, 16});
  // 2^30 + 3 bool elements: past kMax32, so 64-bit indices.
  const int64_t n = (int64_t(1) << 30) + 3;
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
}

}  // namespace
}  // namespace streamgrad
