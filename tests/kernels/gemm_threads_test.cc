// matmul on streamgrad's threads (kernels/host/gemm.h): set_num_threads governs how many
// blocks a large product or a batch is shared out in, each block a single-threaded
// OpenBLAS gemm; cut products agree with one thread's to float rounding (OpenBLAS's kernels
// may round a block's edge differently), batches bit for bit, for the shapes the models
// use and every operand layout; many callers at once; and (the hidden "[env]" case, run by
// gemm_threads_env_test.sh under chosen variables) the default thread count follows
// STREAMGRAD_NUM_THREADS, then OPENBLAS_NUM_THREADS, then OMP_NUM_THREADS, while OpenBLAS
// itself is kept at one thread from the moment the kernels load.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <type_traits>
#include <thread>
#include <vector>

#include "kernels/host/gemm.h"
#include "kernels/host/parallel.h"
#include "kernels/kernels.h"
#include "tests/kernels/level_test_util.h"

extern "C" int openblas_get_num_threads(void);

namespace streamgrad {
namespace {

namespace cpu = kernels::cpu;
using testing::Buffer;
using testing::random_values;
using testing::Shape;
using testing::ThreadsScope;

TEST_CASE("gemm cuts large products into up to get_num_threads() blocks", "[gemm][threads]") {
  {
    ThreadsScope one(1);
    CHECK(cpu::gemm_blocks(512, 512, 512) == 1);
  }
  ThreadsScope scope(2);
  CHECK(cpu::gemm_blocks(512, 512, 512) == 2);
  CHECK(cpu::gemm_blocks(64, 256, 784) == 2);    // the mlp's first layer, batch 64
  CHECK(cpu::gemm_blocks(64, 256, 256) == 1);    // under 2 * kGemmGrain multiply-adds
  CHECK(cpu::gemm_blocks(1 << 16, 8, 16) == 2);  // m > n: rows are cut
  set_num_threads(7);
  CHECK(cpu::gemm_blocks(512, 512, 512) == 7);
  CHECK(cpu::gemm_blocks(64, 256, 784) == 3);    // 12.8M multiply-adds: 3 grains
  CHECK(cpu::gemm_blocks(32, 32, 16384) == 2);   // 32 columns: 2 aligned units
  std::atomic<int> nested{0};
  cpu::parallel_for(0, 2, 1, [&](int64_t, int64_t) {
    if (cpu::gemm_blocks(512, 512, 512) == 1) ++nested;  // chunks never cut again
  });
  CHECK(nested == 2);
}

// out = a @ b (+ bias) at 1 thread, then at 2, 3 and 7 threads: the same bits when `exact`
// (a batch: each item is one gemm call), else the same values to float rounding.
template <typename T>
void same_at_every_thread_count(const Shape& as, const Shape& bs, const Shape& os,
                                const Shape* bias_shape, uint32_t seed, bool exact = false) {
  const Device cpu_dev("cpu");
  const Stream s = current_stream(cpu_dev);
  const int64_t span_a = as.offsets().back() + 1, span_b = bs.offsets().back() + 1;
  Buffer<T> a(cpu_dev, random_values<T>(static_cast<size_t>(span_a), -1, 1, seed));
  Buffer<T> b(cpu_dev, random_values<T>(static_cast<size_t>(span_b), -1, 1, seed + 1));
  Buffer<T> bias(cpu_dev, random_values<T>(4096, -1, 1, seed + 2));
  const size_t out_span = static_cast<size_t>(os.offsets().back() + 1);
  std::vector<T> want;
  for (int threads : {1, 2, 3, 7}) {
    INFO(threads << " threads");
    ThreadsScope scope(threads);
    Buffer<T> out(cpu_dev, out_span, T(-7));
    const kernels::View bv = bias_shape != nullptr ? bias.view(*bias_shape) : kernels::View();
    kernels::matmul(s, out.view(os), a.view(as), b.view(bs), bias_shape ? &bv : nullptr);
    const std::vector<T> got = out.read();
    if (threads == 1) {
      want = got;
    } else if (exact) {
      CHECK(testing::same_bits(got, want));
    } else {  // one CHECK, not one per element: these outputs have ~200K elements
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        const double g = got[i], w = want[i];
        worst = std::max(worst, std::abs(g - w) / (std::abs(w) + 1));
      }
      CHECK(worst <= (std::is_same<T, float>::value ? 1e-5 : 1e-13));
    }
  }
}

TEMPLATE_TEST_CASE("matmul gives one thread's results at every thread count", "[gemm][threads]",
                   float, double) {
  using T = TestType;
  const Shape bias({256});
  SECTION("linear: the mlp's first layer, columns cut") {
    same_at_every_thread_count<T>(Shape({64, 784}), Shape({784, 256}, {1, 784}),
                                  Shape({64, 256}), &bias, 1);
  }
  SECTION("the weight gradient: a transposed, rows cut") {
    same_at_every_thread_count<T>(Shape({64, 784}).transposed(0, 1), Shape({64, 256}),
                                  Shape({784, 256}), nullptr, 2);
  }
  SECTION("a tall product: rows cut, b transposed, out strided") {
    same_at_every_thread_count<T>(Shape({4096, 64}), Shape({48, 64}).transposed(0, 1),
                                  Shape({4096, 48}, {96, 2}), nullptr, 3);
  }
  SECTION("a batch shared out by items, b broadcast") {
    same_at_every_thread_count<T>(Shape({32, 64, 128}), Shape({32, 128, 96}, {0, 96, 1}),
                                  Shape({32, 64, 96}), nullptr, 4, /*exact=*/true);
  }
}

TEST_CASE("blocks are right against a float64 reference", "[gemm][threads]") {
  const int64_t m = 96, k = 1500, n = 80;  // 11.5M multiply-adds: 2 blocks of columns
  ThreadsScope scope(2);
  REQUIRE(cpu::gemm_blocks(m, n, k) == 2);
  const std::vector<double> ha = random_values<double>(m * k, -1, 1, 9);
  const std::vector<double> hb = random_values<double>(k * n, -1, 1, 10);
  std::vector<double> want(static_cast<size_t>(m * n), 0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t j = 0; j < n; ++j) want[i * n + j] += ha[i * k + p] * hb[p * n + j];
    }
  }
  const Device cpu_dev("cpu");
  Buffer<double> a(cpu_dev, ha), b(cpu_dev, hb), out(cpu_dev, static_cast<size_t>(m * n), 0.0);
  kernels::matmul(current_stream(cpu_dev), out.view(Shape({m, n})), a.view(Shape({m, k})),
                  b.view(Shape({k, n})));
  testing::check_close(out.read(), want, 1e-11, 1e-11);
}

TEST_CASE("many callers share the pool: cpu threads and sim streams", "[gemm][threads]") {
  ThreadsScope scope(2);
  const int64_t n = 256;  // 16.7M multiply-adds: each call cuts its product in 2
  const std::vector<float> ha = random_values<float>(n * n, -1, 1, 61);
  const std::vector<float> hb = random_values<float>(n * n, -1, 1, 62);
  const Shape sq({n, n});
  const Device cpu_dev("cpu"), sim("sim:0");
  Buffer<float> a(cpu_dev, ha), b(cpu_dev, hb), want(cpu_dev, static_cast<size_t>(n * n), 0.f);
  kernels::matmul(current_stream(cpu_dev), want.view(sq), a.view(sq), b.view(sq));
  const std::vector<float> expected = want.read();

  Buffer<float> sa(sim, ha), sb(sim, hb);
  std::vector<Stream> streams;
  std::vector<std::unique_ptr<Buffer<float>>> outs;
  for (int i = 0; i < 3; ++i) {
    streams.push_back(Stream::create(sim));
    outs.push_back(std::make_unique<Buffer<float>>(sim, static_cast<size_t>(n * n), 0.f));
    kernels::matmul(streams.back(), outs.back()->view(sq), sa.view(sq), sb.view(sq));
  }
  std::vector<std::unique_ptr<Buffer<float>>> host(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    host[i] = std::make_unique<Buffer<float>>(cpu_dev, static_cast<size_t>(n * n), 0.f);
    threads.emplace_back([&, i] {
      kernels::matmul(current_stream(cpu_dev), host[i]->view(sq), a.view(sq), b.view(sq));
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < 3; ++i) {  // the same cut each time: the same bits
    streams[i].synchronize();
    CHECK(testing::same_bits(outs[i]->read(), expected));
    CHECK(testing::same_bits(host[i]->read(), expected));
  }
}

// Run by gemm_threads_env_test.sh, which sets the variables and EXPECT_DEFAULT_THREADS.
TEST_CASE("the default thread count follows the environment; OpenBLAS stays at one thread",
          "[.env]") {
  const char* expect = std::getenv("EXPECT_DEFAULT_THREADS");
  REQUIRE(expect != nullptr);
  CHECK(openblas_get_num_threads() == 1);  // since the kernels loaded, before any matmul
  CHECK(get_num_threads() == std::atoi(expect));
  const Device cpu_dev("cpu");
  const int64_t n = 256;
  Buffer<float> a(cpu_dev, random_values<float>(n * n, -1, 1, 7)), out(cpu_dev, n * n, 0.f);
  for (int threads : {1, 3}) {
    set_num_threads(threads);
    kernels::matmul(current_stream(cpu_dev), out.view(Shape({n, n})), a.view(Shape({n, n})),
                    a.view(Shape({n, n})));
    CHECK(openblas_get_num_threads() == 1);
    CHECK(get_num_threads() == threads);
  }
}

}  // namespace
}  // namespace streamgrad
