// matmul hands every layout BLAS can read to gemm as it is: transposed operands become
// trans flags with their leading dimension, a column-major out is computed as
// out^T = b^T a^T, and nothing is copied. Only layouts with no unit stride (or rows that
// overlap) go through scratch. A copy would allocate its scratch with operator new, which
// this binary counts, so "no copy" is observable; the products are checked too. Under
// AddressSanitizer, which owns operator new, only the products are checked.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <new>
#include <vector>

#include "kernels/kernels.h"
#include "tests/kernels/kernel_test_util.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocations{0};
}  // namespace

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCounting = false;
#else
constexpr bool kCounting = true;
void* operator new(std::size_t n) {
  if (g_counting.load()) g_allocations.fetch_add(1);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#endif

namespace streamgrad {
namespace {

using testing::Buffer;
using testing::Shape;

// Runs out = a @ b on cpu for the given layouts (each over its own buffer) and returns how
// many heap allocations the kernel made (-1 when not counted); checks the product.
long allocations_of(const Shape& out, const Shape& a, const Shape& b) {
  const Device cpu("cpu");
  const Stream s(cpu);
  const int64_t r = static_cast<int64_t>(a.sizes.size());
  const int64_t batch = r == 3 ? out.sizes[0] : 1;
  const int64_t m = a.sizes[r - 2], k = a.sizes[r - 1], n = b.sizes[r - 1];
  auto extent = [](const Shape& sh) {
    int64_t last = sh.offset;
    for (size_t d = 0; d < sh.sizes.size(); ++d) last += (sh.sizes[d] - 1) * sh.strides[d];
    return static_cast<size_t>(last + 1);
  };
  const std::vector<double> ha = testing::random_values<double>(extent(a), -1, 1, 1);
  const std::vector<double> hb = testing::random_values<double>(extent(b), -1, 1, 2);
  Buffer<double> ba(cpu, ha), bb(cpu, hb), bo(cpu, extent(out), 0.0);
  const kernels::View va = ba.view(a), vb = bb.view(b), vo = bo.view(out);
  kernels::matmul(s, vo, va, vb);  // warm-up: first-use statics of the runtime and BLAS
  g_allocations = 0;
  g_counting = true;
  kernels::matmul(s, vo, va, vb);
  g_counting = false;
  const long allocations = kCounting ? g_allocations.load() : -1;
  // The product, element by element, against the layouts' own elements.
  const std::vector<double> got = bo.read();
  const std::vector<double> ea = testing::gather(ha, a), eb = testing::gather(hb, b);
  const std::vector<int64_t> eo = out.offsets();
  for (int64_t q = 0; q < batch; ++q) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double want = 0;
        for (int64_t l = 0; l < k; ++l) {
          want += ea[(q * m + i) * k + l] * eb[(q * k + l) * n + j];
        }
        REQUIRE(got[eo[(q * m + i) * n + j]] == Approx(want).epsilon(1e-12).margin(1e-12));
      }
    }
  }
  return allocations;
}

TEST_CASE("transposed and sliced operands reach BLAS without a copy", "[matmul]") {
  const int64_t m = 5, k = 7, n = 3;
  // a: row-major, transposed (column-major), a column slice of a wider matrix (ld > k).
  const Shape a_layouts[] = {Shape({m, k}), Shape({k, m}).transposed(0, 1),
                             Shape({m, k}, {k + 4, 1}, 2)};
  const Shape b_layouts[] = {Shape({k, n}), Shape({n, k}).transposed(0, 1),
                             Shape({k, n}, {1, k + 3}, 1)};
  // out: row-major, column-major (out^T = b^T a^T), a padded slice.
  const Shape out_layouts[] = {Shape({m, n}), Shape({n, m}).transposed(0, 1),
                               Shape({m, n}, {n + 2, 1}, 1)};
  for (const Shape& a : a_layouts) {
    for (const Shape& b : b_layouts) {
      for (const Shape& out : out_layouts) {
        INFO("a strides " << a.strides[0] << "," << a.strides[1] << "; b " << b.strides[0]
                          << "," << b.strides[1] << "; out " << out.strides[0] << ","
                          << out.strides[1]);
        CHECK(allocations_of(out, a, b) <= 0);
      }
    }
  }
  // Batched, with a transposed a and a broadcast (batch stride 0) b.
  CHECK(allocations_of(Shape({2, m, n}), Shape({2, k, m}).transposed(1, 2),
                       Shape({2, k, n}, {0, n, 1})) <= 0);
}

TEST_CASE("only layouts BLAS cannot read are copied", "[matmul]") {
  if (!kCounting) WARN("allocations are not counted under AddressSanitizer");
  const int64_t m = 4, k = 6, n = 5;
  // No unit stride in a (every other column of every other row).
  CHECK(allocations_of(Shape({m, n}), Shape({m, k}, {4 * k, 2}), Shape({k, n})) != 0);
  // Rows that overlap (row stride below the row length) in b.
  CHECK(allocations_of(Shape({m, n}), Shape({m, k}), Shape({k, n}, {2, 1})) != 0);
  // An out BLAS cannot write either way.
  CHECK(allocations_of(Shape({m, n}, {2 * n, 2}), Shape({m, k}), Shape({k, n})) != 0);
}

}  // namespace
}  // namespace streamgrad
