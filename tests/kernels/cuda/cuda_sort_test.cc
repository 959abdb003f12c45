// The cuda sort and multinomial kernels (kernels/cuda/sort.cu) against the cpu's, exactly:
// sort / topk of every dim of a transposed view with ties and NaN, both directions, and
// multinomial draws from strided rows with zero weights. Without a GPU each test case
// says once that it skipped and why.
#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/kernels.h"
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

TEMPLATE_TEST_CASE("cuda sort and topk equal the cpu's", "[cuda][kernels][sort]", float,
                   double, int64_t) {
  using T = TestType;
  require_cuda_device();
  std::vector<T> x(60);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>((i * 7) % 5) - 2;
  if constexpr (std::is_floating_point<T>::value) {
    x[23] = x[41] = std::numeric_limits<T>::quiet_NaN();
  }
  const Shape in = Shape({5, 4, 3}).transposed(0, 2);
  for (int64_t dim = 0; dim < 3; ++dim) {
    for (const bool descending : {false, true}) {
      for (const int64_t kk : {int64_t(1), in.sizes[dim]}) {
        INFO("dim " << dim << ", k " << kk << (descending ? ", descending" : ""));
        std::vector<int64_t> os = in.sizes;
        os[dim] = kk;
        std::vector<T> values[2];
        std::vector<int64_t> indices[2];
        int i = 0;
        for (const Device d : {Device("cpu"), Device("cuda:0")}) {
          Buffer<T> bx(d, x), v(d, 60, T(-7));
          Buffer<int64_t> ix(d, 60, int64_t(-1));
          k::sort(current_stream(d), v.view(Shape(os)), ix.view(Shape(os)), bx.view(in), dim,
                  descending, "sort");
          values[i] = v.read();
          indices[i++] = ix.read();
        }
        CHECK(indices[1] == indices[0]);
        if constexpr (std::is_floating_point<T>::value) {
          check_ulps(values[1], values[0], 0);
        } else {
          CHECK(values[1] == values[0]);
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("cuda multinomial draws the cpu's categories", "[cuda][kernels][sort]",
                   float, double) {
  using T = TestType;
  require_cuda_device();
  const std::vector<T> p = {0, 1, 3, 0, 2, 0.5, 0, 0, 1, 1, 0, 4, 2, 0.25, 0};
  const Shape ps = Shape({5, 3}).transposed(0, 1);
  std::vector<int64_t> draws[2];
  int i = 0;
  for (const Device d : {Device("cpu"), Device("cuda:0")}) {
    Buffer<T> bp(d, p);
    Buffer<int64_t> out(d, 3 * 500, int64_t(-1));
    k::multinomial(current_stream(d), out.view(Shape({3, 500})), bp.view(ps), 5, 77);
    draws[i++] = out.read();
  }
  CHECK(draws[1] == draws[0]);
}

}  // namespace
}  // namespace streamgrad
