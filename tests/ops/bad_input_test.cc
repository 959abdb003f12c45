// Bad input to factories and ops: absurd or negative sizes, 0-dim reductions, indices and
// lengths near the int64 limits. Each case must throw a clear streamgrad::Error (never
// crash, wrap around or abort) and leave the engine usable: on cpu and sim:0.
#include <cstdint>
#include <limits>

#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

constexpr int64_t kHuge = int64_t{1} << 40;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// Throws nothing and leaves allocated memory as it was: the engine is usable after an
// error. Runs a small op and checks its value.
void check_usable(Device d, int64_t allocated_before) {
  CHECK(memory_stats(d).allocated_bytes.current == allocated_before);
  check_values(mul(input({1, 2}, {2}, d, false), 3.0), {3, 6});
}

// Reference: PyTorch accepts dim 0 and -1 on 0-dim tensors for sum/mean/amax/max/min
// (test_reductions.py, "test_dim_reduction" on scalars) and returns a 0-dim result.
TEST_CASE("reducing a 0-dim tensor over dim 0 or -1 gives a 0-dim result", "[ops][bad]") {
  const Device d = test_device();
  const int64_t dim = GENERATE(0, -1);
  const bool keepdim = GENERATE(false, true);
  INFO("dim " << dim << " keepdim " << keepdim);
  const Tensor x = input({2.5}, {}, d);
  const Tensor s = sum(x, {dim}, keepdim);
  CHECK(s.dim() == 0);
  CHECK(s.item<double>() == 2.5);
  const Tensor m = mean(x, {dim}, keepdim);
  CHECK(m.dim() == 0);
  CHECK(m.item<double>() == 2.5);
  for (bool is_max : {true, false}) {
    const auto [v, i] = is_max ? max(x, dim, keepdim) : min(x, dim, keepdim);
    CHECK(v.dim() == 0);
    CHECK(v.item<double>() == 2.5);
    CHECK(i.item<int64_t>() == 0);
  }
  check_gradients([&](const TensorList& t) { return mul(sum(t[0], {dim}, keepdim), 3.0); }, {x});
  check_gradients([&](const TensorList& t) { return mean(t[0], {dim}, keepdim); }, {x});
}

TEST_CASE("reducing a 0-dim tensor over another dim or a dim twice is a ValueError",
          "[ops][bad]") {
  const Device d = test_device();
  const Tensor x = input({2.5}, {}, d, false);
  expect_error<ValueError>([&] { sum(x, {1}); }, {"sum", "dimension 1", "rank 0"});
  expect_error<ValueError>([&] { mean(x, {-2}); }, {"mean", "dimension -2"});
  // PyTorch: "dim 0 appears multiple times in the list of dims".
  expect_error<ValueError>([&] { sum(x, {0, -1}); }, {"sum", "appears twice"});
  expect_error<ValueError>([&] { mean(x, {0, 0}); }, {"mean", "appears twice"});
  check_usable(d, memory_stats(d).allocated_bytes.current);
}

// Reference: PyTorch refuses such shapes ("Storage size calculation overflowed",
// "numel: integer multiplication overflow") rather than wrapping around.
TEST_CASE("factories refuse element counts beyond int64", "[ops][bad]") {
  const Device d = test_device();
  const TensorOptions o = f64(d);
  const Tensor t = zeros({2}, o);
  const int64_t before = memory_stats(d).allocated_bytes.current;
  const Shape huge{kHuge, kHuge};
  const std::vector<std::string> parts{"[1099511627776, 1099511627776]", "int64"};
  expect_error<ValueError>([&] { empty(huge, o); }, parts);
  expect_error<ValueError>([&] { zeros(huge, o); }, parts);
  expect_error<ValueError>([&] { ones(huge, o); }, parts);
  expect_error<ValueError>([&] { full(huge, 2, o); }, parts);
  expect_error<ValueError>([&] { rand(huge, o); }, parts);
  expect_error<ValueError>([&] { randn(huge, o); }, parts);
  expect_error<ValueError>([&] { new_zeros(t, huge); }, parts);
  expect_error<ValueError>([&] { new_ones(t, huge); }, parts);
  expect_error<ValueError>([&] { new_full(t, huge, 1); }, parts);
  // A zero size empties the tensor whatever the others are.
  CHECK(empty({kHuge, kHuge, 0}, o).numel() == 0);
  check_usable(d, before);
}

TEST_CASE("factories refuse byte counts beyond int64", "[ops][bad]") {
  const Device d = test_device();
  const int64_t before = memory_stats(d).allocated_bytes.current;
  // 2^62 elements fit in int64, their 2^65 bytes do not.
  expect_error<ValueError>([&] { zeros({int64_t{1} << 62}, f64(d)); },
                           {"[4611686018427387904]", "float64", "bytes"});
  check_usable(d, before);
}

// Refused by the allocator (more than the device's total memory) before the host
// allocator sees it: TSan and ASan would abort on such a malloc.
TEST_CASE("a representable size beyond the device's memory is OutOfMemoryError",
          "[ops][bad]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"));
  const int64_t before = memory_stats(d).allocated_bytes.current;
  CHECK_THROWS_AS(zeros({kHuge}, f64(d)), OutOfMemoryError);       // 8 TiB
  CHECK_THROWS_AS(arange(0, 1e15, 1, f64(d)), OutOfMemoryError);  // 8 PB
  check_usable(d, before);
}

// Reference: PyTorch's arange checks its size ("invalid size, possible overflow?").
TEST_CASE("arange with more elements than int64 holds is a ValueError", "[ops][bad]") {
  const Device d = test_device();
  expect_error<ValueError>([&] { arange(0, 1e300, 1, f64(d)); }, {"arange", "int64"});
  expect_error<ValueError>([&] { arange(0, 1, 1e-300, f64(d)); }, {"arange", "int64"});
  check_usable(d, memory_stats(d).allocated_bytes.current);
}

TEST_CASE("negative sizes are ValueErrors", "[ops][bad]") {
  const Device d = test_device();
  const Tensor t = zeros({4}, f64(d));
  expect_error<ValueError>([&] { empty({2, -1}, f64(d)); }, {"empty", "negative size"});
  expect_error<ValueError>([&] { new_zeros(t, {-3}); }, {"negative size", "[-3]"});
  expect_error<ValueError>([&] { reshape(t, {-2, -2}); }, {"reshape", "[-2, -2]"});
  expect_error<ValueError>([&] { view(t, {-4, -1}); }, {"view", "[-4, -1]"});
  check_usable(d, memory_stats(d).allocated_bytes.current);
}

TEST_CASE("reshape and view refuse shapes whose element count overflows", "[ops][bad]") {
  const Device d = test_device();
  const Tensor t = zeros({4}, f64(d));
  // 2^62 * 16 wraps to 0 in int64: it must not be taken for a valid count.
  expect_error<ValueError>([&] { reshape(t, {int64_t{1} << 62, 4, 4, -1}); },
                           {"reshape", "int64"});
  expect_error<ValueError>([&] { view(t, {int64_t{1} << 62, 8, 8}); }, {"view"});
  // With a zero size the count is 0 and the shape is valid.
  CHECK(reshape(zeros({0}, f64(d)), {kHuge, kHuge, 0}).numel() == 0);
  check_usable(d, memory_stats(d).allocated_bytes.current);
}

// Reference: PyTorch's expand refuses negative sizes ("the expanded size ... isn't allowed
// in a leading, non-existing dimension" for -1, "must be non-negative" otherwise) and
// overflowing element counts.
TEST_CASE("expand refuses negative sizes and overflowing shapes", "[ops][bad]") {
  const Device d = test_device();
  const Tensor one = zeros({1}, f64(d));
  expect_error<ValueError>([&] { expand(one, {-5}); }, {"expand", "-5"});
  expect_error<ValueError>([&] { expand(zeros({1, 1}, f64(d)), {-2, 3}); }, {"expand", "-2"});
  expect_error<ValueError>([&] { expand(one, {-1, 3}); }, {"expand", "new leading"});
  expect_error<ValueError>([&] { expand(one, {kHuge, kHuge}); }, {"expand", "int64"});
  expect_error<ValueError>([&] { expand(one, {int64_t{1} << 62, 4}); }, {"expand", "int64"});
  CHECK(expand(one, {2, -1}).sizes() == Shape{2, 1});
  check_usable(d, memory_stats(d).allocated_bytes.current);
}

TEST_CASE("narrow with a length near INT64_MAX is a ValueError", "[ops][bad]") {
  const Device d = test_device();
  const Tensor t = zeros({2, 3}, f64(d));
  // start + length overflows int64: the check must not be fooled by the wrap-around.
  expect_error<ValueError>([&] { narrow(t, 1, 1, kMax); }, {"narrow", "exceeds dimension 1"});
  check_usable(d, memory_stats(d).allocated_bytes.current);
}

// Reference: Python slicing (and PyTorch's slice) with a step larger than the extent takes
// the first element only.
TEST_CASE("slice with a step near INT64_MAX takes one element", "[ops][bad]") {
  const Device d = test_device();
  const Tensor t = input({1, 2, 3, 4, 5, 6}, {2, 3}, d, false);
  const Tensor s = slice(t, 1, 0, kMax, kMax);
  CHECK(s.sizes() == Shape{2, 1});
  check_values(s, {1, 4});
  CHECK(slice(t, 1, 1, 3, kMax).sizes() == Shape{2, 1});
  check_values(slice(t, 1, 1, 3, kMax), {2, 5});
}

TEST_CASE("cat whose sizes along dim add up beyond int64 is a ValueError naming cat",
          "[ops][bad]") {
  const Device d = test_device();
  // Expanded views have 2^62 elements but hold one: their sum along dim 0 overflows.
  const Tensor big = expand(zeros({1}, f64(d)), {int64_t{1} << 62});
  expect_error<ValueError>([&] { cat({big, big}); }, {"cat", "int64"});
  check_usable(d, memory_stats(d).allocated_bytes.current);
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad
