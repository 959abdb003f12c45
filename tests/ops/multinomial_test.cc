// multinomial (ops/multinomial.cc): shapes, zero weights never drawn, draws without
// replacement distinct, frequencies against the weights (seeded, so the counts are the
// same every run; the bounds are many standard deviations wide), reproducibility under
// manual_seed and equality across devices, float16 weights, and the reference's errors.
// Behaviours follow the reference's multinomial tests (test_torch.py), ported.
#include <cmath>
#include <limits>
#include <set>

#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

std::vector<int64_t> ints(const Tensor& t) { return t.to_vector<int64_t>(); }

TEST_CASE("multinomial draws category indices of the right shape", "[ops][multinomial]") {
  const Device d = test_device();
  manual_seed(1);
  const Tensor w = input({0, 1, 0, 3}, {4}, d, false);
  const Tensor a = multinomial(w, 2);
  CHECK(a.sizes() == Shape{2});
  CHECK(a.dtype() == DType::kInt64);
  CHECK(a.device() == d);
  const std::vector<int64_t> v = ints(a);
  CHECK(std::set<int64_t>(v.begin(), v.end()) == std::set<int64_t>{1, 3});
  const Tensor rows = input({1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 5}, {3, 4}, d, false);
  const Tensor b = multinomial(rows, 6, /*replacement=*/true);
  CHECK(b.sizes() == Shape{3, 6});
  CHECK(ints(b) == std::vector<int64_t>{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3});
  // Without replacement every category once, the zero-weight ones last.
  for (int k = 0; k < 10; ++k) {
    const std::vector<int64_t> all = ints(multinomial(w, 4));
    CHECK(std::set<int64_t>(all.begin(), all.begin() + 2) == std::set<int64_t>{1, 3});
    CHECK(std::vector<int64_t>(all.begin() + 2, all.end()) == std::vector<int64_t>{0, 2});
  }
  // No rows: no draws.
  CHECK(multinomial(input({}, {0, 3}, d, false), 2, true).sizes() == Shape{0, 2});
}

TEST_CASE("multinomial draws in proportion to the weights", "[ops][multinomial]") {
  const Device d = test_device();
  manual_seed(3);
  const int64_t n = 20000;
  // Unnormalised weights 1 : 2 : 0 : 5.
  const Tensor w = input({1, 2, 0, 5}, {1, 4}, d, false);
  const std::vector<int64_t> draws = ints(multinomial(w, n, true));
  std::vector<double> count(4, 0);
  for (int64_t c : draws) count[static_cast<size_t>(c)] += 1;
  CHECK(count[2] == 0);
  const double p[] = {1.0 / 8, 2.0 / 8, 0, 5.0 / 8};
  for (int c : {0, 1, 3}) {
    const double sd = std::sqrt(n * p[c] * (1 - p[c]));
    INFO("category " << c << ": " << count[c] << " draws, expected " << n * p[c]);
    CHECK(std::abs(count[c] - n * p[c]) < 6 * sd);
  }
  // Without replacement the first draw is distributed as the weights too.
  std::vector<double> first(4, 0);
  const int64_t trials = 4000;
  const Tensor rows = expand(w, {trials, 4});
  const std::vector<int64_t> picks = ints(multinomial(contiguous(rows), 2));
  for (int64_t r = 0; r < trials; ++r) {
    first[static_cast<size_t>(picks[2 * r])] += 1;
    CHECK(picks[2 * r] != picks[2 * r + 1]);
  }
  for (int c : {0, 1, 3}) {
    const double sd = std::sqrt(trials * p[c] * (1 - p[c]));
    CHECK(std::abs(first[c] - trials * p[c]) < 6 * sd);
  }
  CHECK(first[2] == 0);
}

TEST_CASE("multinomial is reproducible under manual_seed and the same on every device",
          "[ops][multinomial]") {
  const std::vector<double> w = {0.2, 0.1, 0.4, 0.05, 0.25, 0.3, 0.3, 0.4};
  auto draw = [&](Device dev, bool replacement, DType dt) {
    manual_seed(42);
    return ints(multinomial(to(input(w, {2, 4}, dev, false), dt), 3, replacement));
  };
  for (bool replacement : {false, true}) {
    const std::vector<int64_t> ref = draw(Device("cpu"), replacement, DType::kFloat64);
    for (const std::string& name : device_names()) {
      INFO(name << (replacement ? " with" : " without") << " replacement");
      CHECK(draw(Device(name), replacement, DType::kFloat64) == ref);
      CHECK(draw(Device(name), replacement, DType::kFloat32) ==
            draw(Device(name), replacement, DType::kFloat32));
      CHECK(draw(Device(name), replacement, DType::kFloat16).size() == 6);
    }
  }
  // Successive calls advance the generator.
  manual_seed(5);
  const Tensor u = input({1, 1, 1, 1, 1, 1, 1, 1}, {8}, Device("cpu"), false);
  const std::vector<int64_t> a = ints(multinomial(u, 8, true));
  const std::vector<int64_t> b = ints(multinomial(u, 8, true));
  CHECK(a != b);
}

TEST_CASE("multinomial rejects what the reference rejects", "[ops][multinomial]") {
  const Device d = test_device();
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor ok = input({1, 2, 3}, {3}, d, false);
  expect_error<ValueError>([&] { multinomial(input({1, -1, 2}, {3}, d, false), 1); },
                           {"multinomial", "negative, infinite or NaN", "float64[3]"});
  expect_error<ValueError>([&] { multinomial(input({1, inf, 2}, {3}, d, false), 1); },
                           {"multinomial", "infinite"});
  expect_error<ValueError>([&] { multinomial(input({1, nan, 2}, {3}, d, false), 2, true); },
                           {"multinomial", "NaN"});
  expect_error<ValueError>([&] { multinomial(input({1, 2, 0, 0}, {2, 2}, d, false), 1); },
                           {"multinomial", "sums to 0"});
  expect_error<ValueError>([&] { multinomial(ok, 4); },
                           {"multinomial", "4 samples without replacement", "3 categories",
                            "replacement = true"});
  CHECK(multinomial(ok, 4, true).sizes() == Shape{4});
  expect_error<ValueError>([&] { multinomial(ok, 0); }, {"multinomial", "num_samples = 0"});
  expect_error<ValueError>([&] { multinomial(input({1}, {1, 1, 1}, d, false), 1); },
                           {"multinomial", "1-D", "2-D"});
  expect_error<ValueError>(
      [&] {
        const TensorOptions i64 = TensorOptions().dtype(DType::kInt64).device(d);
        multinomial(from_vector<int64_t>({1, 2}, {2}, i64), 1);
      },
      {"multinomial", "int64", "floating"});
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad
