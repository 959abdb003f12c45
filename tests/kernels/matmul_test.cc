// matmul: 2-D with every combination of row-major, column-major and non-BLAS layouts for
// a, b and out, also with one row or one column (gemv); 3-D with a broadcast batch;
// k == 0; errors.
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <thread>
#include <vector>

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

// A [rows, cols] matrix laid out in a buffer of 2 * rows * cols elements (+ a batch).
Shape layout(const std::string& kind, int64_t rows, int64_t cols) {
  if (kind == "row") return Shape({rows, cols});
  if (kind == "col") return Shape({cols, rows}).transposed(0, 1);
  if (kind == "padded") return Shape({rows, cols}, {cols + 3, 1}, 2);  // ld > cols
  return Shape({rows, cols}, {2 * cols, 2}, 1);                         // "strided"
}

// out[m, n] = sum_k a[m, k] b[k, n], from row-major copies.
std::vector<double> reference(const std::vector<double>& a, const std::vector<double>& b,
                              int64_t m, int64_t k, int64_t n) {
  std::vector<double> out(static_cast<size_t>(m * n), 0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t p = 0; p < k; ++p) out[i * n + j] += a[i * k + p] * b[p * n + j];
    }
  }
  return out;
}

template <typename T>
std::vector<double> as_double(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

TEMPLATE_TEST_CASE("2-D matmul with transposed, padded and strided operands", "[matmul]",
                   float, double) {
  using T = TestType;
  const Device dev = testing::test_device();
  const std::string ka = GENERATE("row", "col", "strided");
  const std::string kb = GENERATE("row", "col", "padded");
  const std::string kc = GENERATE("row", "col", "strided");
  // With a bias (strided, to check its stride) the kernel is linear's fused gemm.
  const bool with_bias = GENERATE(false, true);
  // One row or one column: products that go to gemv instead of gemm.
  const auto [m, n] = GENERATE(table<int64_t, int64_t>({{3, 4}, {1, 4}, {3, 1}}));
  const int64_t k = 5;
  INFO("device " << dev << ", a " << ka << ", b " << kb << ", out " << kc
                 << (with_bias ? ", bias" : "") << ", m " << m << ", n " << n);
  const Stream s = current_stream(dev);
  const std::vector<T> ha = random_values<T>(64, -1, 1, 21);
  const std::vector<T> hb = random_values<T>(64, -1, 1, 22);
  Buffer<T> a(dev, ha), b(dev, hb);
  Buffer<T> out(dev, 64, T(-5));
  const Shape as = layout(ka, m, k), bs = layout(kb, k, n), os = layout(kc, m, n);
  const std::vector<T> hbias = random_values<T>(2 * n, -1, 1, 23);
  Buffer<T> bias(dev, hbias);
  const Shape bias_s({n}, {2}, 1);
  const kernels::View bv = bias.view(bias_s);
  LaunchLog log;
  kernels::matmul(s, out.view(os), a.view(as), b.view(bs), with_bias ? &bv : nullptr);
  if (with_bias) {
    log.expect_ranges("linear", {a.view(as), b.view(bs), bv}, {out.view(os)});
  } else {
    log.expect_ranges("matmul", {a.view(as), b.view(bs)}, {out.view(os)});
  }
  CHECK(log.count() == 1);
  std::vector<double> want = reference(as_double(gather(ha, as)), as_double(gather(hb, bs)), m, k, n);
  const std::vector<T> hb_used = gather(hbias, bias_s);
  for (int64_t i = 0; with_bias && i < m * n; ++i) want[i] += hb_used[i % n];
  const std::vector<T> got_all = out.read();
  testing::check_close(gather(got_all, os), want);
  std::vector<bool> inside(64, false);
  for (int64_t off : os.offsets()) inside[off] = true;
  for (size_t i = 0; i < 64; ++i) {
    if (!inside[i]) CHECK(got_all[i] == T(-5));
  }
}

TEMPLATE_TEST_CASE("batched matmul broadcasts a batch through stride 0", "[matmul]", float,
                   double) {
  using T = TestType;
  const Device dev = testing::test_device();
  const bool a_transposed = GENERATE(false, true);
  INFO("device " << dev << (a_transposed ? ", a column-major" : ""));
  const Stream s = current_stream(dev);
  const int64_t batch = 3, m = 2, k = 4, n = 3;
  const std::vector<T> ha = random_values<T>(m * k, -1, 1, 31);
  const std::vector<T> hb = random_values<T>(batch * k * n, -1, 1, 32);
  Buffer<T> a(dev, ha), b(dev, hb);
  Buffer<T> out(dev, static_cast<size_t>(batch * m * n), T(0));
  // a is one [m, k] matrix shared by every batch member.
  const Shape as = a_transposed ? Shape({batch, m, k}, {0, 1, m}) : Shape({batch, m, k}, {0, k, 1});
  const Shape bs({batch, k, n}), os({batch, m, n});
  LaunchLog log;
  kernels::matmul(s, out.view(os), a.view(as), b.view(bs));
  log.expect_ranges("matmul", {a.view(as), b.view(bs)}, {out.view(os)});
  const std::vector<double> ga = as_double(gather(ha, as)), gb = as_double(gather(hb, bs));
  std::vector<double> want;
  for (int64_t i = 0; i < batch; ++i) {
    const std::vector<double> ai(ga.begin() + i * m * k, ga.begin() + (i + 1) * m * k);
    const std::vector<double> bi(gb.begin() + i * k * n, gb.begin() + (i + 1) * k * n);
    for (double v : reference(ai, bi, m, k, n)) want.push_back(v);
  }
  testing::check_close(out.read(), want);
}

TEST_CASE("matmul with k == 0 writes zeros", "[matmul]") {
  const Device dev = testing::test_device();
  Buffer<float> a(dev, 1, 0.0f), b(dev, 1, 0.0f);
  Buffer<float> out(dev, 6, 9.0f);
  kernels::matmul(current_stream(dev), out.view(Shape({2, 3})), a.view(Shape({2, 0})),
                  b.view(Shape({0, 3})));
  CHECK(out.read() == std::vector<float>(6, 0.0f));
  Buffer<float> bias(dev, std::vector<float>{1, 2, 3});
  const kernels::View bv = bias.view(Shape({3}));
  kernels::matmul(current_stream(dev), out.view(Shape({2, 3})), a.view(Shape({2, 0})),
                  b.view(Shape({0, 3})), &bv);
  CHECK(out.read() == std::vector<float>{1, 2, 3, 1, 2, 3});  // the bias alone
  const kernels::View short_bias = bias.view(Shape({2}));
  CHECK_THROWS_WITH(kernels::matmul(current_stream(dev), out.view(Shape({2, 3})),
                                    a.view(Shape({2, 0})), b.view(Shape({0, 3})), &short_bias),
                    Contains("bias") && Contains("3 elements"));
}

TEST_CASE("matmuls run concurrently on sim streams and cpu threads", "[matmul][threads]") {
  const int64_t n = 48;
  const std::vector<float> ha = random_values<float>(n * n, -1, 1, 51);
  const std::vector<float> hb = random_values<float>(n * n, -1, 1, 52);
  const std::vector<double> want =
      reference(as_double(ha), as_double(hb), n, n, n);
  const Shape sq({n, n});

  // Four sim streams, each with its own worker thread, all inside BLAS at once.
  const Device sim("sim:0");
  Buffer<float> a(sim, ha), b(sim, hb);
  std::vector<Stream> streams;
  std::vector<std::unique_ptr<Buffer<float>>> outs;
  for (int i = 0; i < 4; ++i) {
    streams.push_back(Stream::create(sim));
    outs.push_back(std::make_unique<Buffer<float>>(sim, static_cast<size_t>(n * n), 0.0f));
    kernels::matmul(streams.back(), outs.back()->view(sq), a.view(sq), b.view(sq));
  }
  for (int i = 0; i < 4; ++i) {
    streams[i].synchronize();
    testing::check_close(outs[i]->read(), want, 1e-4, 1e-5);
  }

  // cpu work runs on the calling threads.
  std::vector<std::vector<float>> results(4, std::vector<float>(n * n));
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      kernels::View va, vb, vo;
      va.data = const_cast<float*>(ha.data());
      vb.data = const_cast<float*>(hb.data());
      vo.data = results[i].data();
      for (kernels::View* v : {&va, &vb, &vo}) {
        v->sizes = {n, n};
        v->strides = {n, 1};
      }
      kernels::matmul(Stream::default_for(Device("cpu")), vo, va, vb);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& r : results) testing::check_close(r, want, 1e-4, 1e-5);
}

TEST_CASE("matmul errors", "[matmul][errors]") {
  const Device dev = testing::test_device();
  const Stream s = current_stream(dev);
  Buffer<float> a(dev, 64, 1.0f), b(dev, 64, 1.0f), out(dev, 64, 0.0f);
  Buffer<double> d(dev, 64, 1.0);
  LaunchLog log;
  CHECK_THROWS_WITH(kernels::matmul(s, out.view(Shape({2, 3})), a.view(Shape({2, 4})),
                                    b.view(Shape({5, 3}))),
                    Contains("matmul") && Contains("[2, 4]") && Contains("[5, 3]"));
  CHECK_THROWS_AS(kernels::matmul(s, out.view(Shape({2, 3})), a.view(Shape({2, 4})),
                                  b.view(Shape({2, 4, 3}))),
                  ValueError);
  CHECK_THROWS_AS(kernels::matmul(s, out.view(Shape({2, 2, 3})), a.view(Shape({3, 2, 4})),
                                  b.view(Shape({2, 4, 3}))),
                  ValueError);  // batch sizes differ
  CHECK_THROWS_AS(kernels::matmul(s, out.view(Shape({2, 3})), d.view(Shape({2, 4})),
                                  b.view(Shape({4, 3}))),
                  ValueError);
  CHECK_THROWS_WITH(kernels::matmul(s, a.view(Shape({2, 3}, {3, 1}, 4)), a.view(Shape({2, 4})),
                                    b.view(Shape({4, 3}))),
                    Contains("overlaps"));
  CHECK_THROWS_AS(kernels::matmul(s, out.view(Shape({4})), a.view(Shape({4})),
                                  b.view(Shape({4}))),
                  ValueError);
  CHECK(log.count() == 0);
}

}  // namespace
}  // namespace streamgrad
