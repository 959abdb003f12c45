// linear, softmax / log_softmax, dropout, flatten, argmax, embedding and the losses:
// values against references computed here, the PyTorch behaviours users rely on
// (stability at large logits, ignore_index, label smoothing, dropout's edge cases,
// padding_idx), and errors. Gradients are covered by the catalogue.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace {

using testing::KernelNames;
using testing::random_input;
using testing::test_device;
using testing::values;

TensorOptions f64(Device d) { return TensorOptions().dtype(DType::kFloat64).device(d); }
Tensor targets(std::vector<int64_t> v, Device d) {
  return from_vector<int64_t>(v, {static_cast<int64_t>(v.size())},
                              TensorOptions().dtype(DType::kInt64).device(d));
}

// -log softmax(x)[t] for one row.
double row_nll(const std::vector<double>& row, int64_t t) {
  double m = -INFINITY, s = 0;
  for (double v : row) m = std::max(m, v);
  for (double v : row) s += std::exp(v - m);
  return -(row[t] - m - std::log(s));
}

TEST_CASE("linear is input @ weight^T + bias for 1-D, 2-D and 3-D inputs", "[ops][linear]") {
  const Device d = test_device();
  const Tensor w = random_input({3, 2}, d, 1), b = random_input({3}, d, 2);
  const Tensor x = random_input({4, 2}, d, 3);
  const std::vector<double> xv = values(x), wv = values(w), bv = values(b), y = values(linear(x, w, b));
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j)
      CHECK(y[i * 3 + j] == Approx(xv[i * 2] * wv[j * 2] + xv[i * 2 + 1] * wv[j * 2 + 1] + bv[j]));
  CHECK(linear(reshape(x, {2, 2, 2}), w, b).sizes() == Shape{2, 2, 3});
  CHECK(values(linear(reshape(x, {2, 2, 2}), w, b)) == y);
  CHECK(linear(random_input({2}, d, 4), w).sizes() == Shape{3});
  CHECK_THROWS_WITH(linear(random_input({4, 3}, d, 5), w), Catch::Contains("expects 2"));
}

TEST_CASE("linear's forward is one fused launch, bias included", "[ops][linear]") {
  const Device d = test_device();
  const Tensor w = random_input({5, 3}, d, 1), b = random_input({5}, d, 2);
  const Tensor x = random_input({4, 3}, d, 3);
  KernelNames seen;
  const Tensor y = linear(x, w, b);
  CHECK(seen.names == std::vector<std::string>{"linear"});  // not matmul then add
  CHECK(values(y) == values(linear(x, w, b)));
  // The same values as the unfused composition, to float64 rounding.
  const std::vector<double> ref = values(add(matmul(x, transpose(w, 0, 1)), b));
  const std::vector<double> got = values(y);
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(ref[i]).epsilon(1e-12));
  const Device elsewhere(d.is_cpu() ? "sim:0" : "cpu");
  CHECK_THROWS_AS(linear(x, w, random_input({5}, elsewhere, 4)), DeviceError);
}

TEST_CASE("softmax and log_softmax stay finite for large inputs", "[ops][softmax]") {
  const Device d = test_device();
  const Tensor x = from_vector<double>({1000, 1001, 999, -1000, -1001, -1002}, {2, 3}, f64(d));
  const std::vector<double> s = values(softmax(x, 1)), l = values(log_softmax(x, 1));
  const double e0 = std::exp(-1.0), e2 = std::exp(-2.0), z = 1 + e0 + e2;
  CHECK(s[0] == Approx(e0 / z));
  CHECK(s[1] == Approx(1 / z));
  CHECK(s[3] == Approx(1 / z));
  CHECK(l[1] == Approx(-std::log(z)));
  CHECK(l[5] == Approx(-2 - std::log(z)));
  for (double v : l) CHECK(std::isfinite(v));
}

TEST_CASE("cross_entropy and nll_loss match a per-row reference", "[ops][loss]") {
  const Device d = test_device();
  const Tensor x = random_input({4, 5}, d, 7, -3, 3);
  const Tensor t = targets({4, 0, 2, 2}, d);
  const std::vector<double> xv = values(x);
  std::vector<double> per(4);
  for (int i = 0; i < 4; ++i) {
    per[i] = row_nll({xv.begin() + i * 5, xv.begin() + i * 5 + 5}, t.to_vector<int64_t>()[i]);
  }
  const double mean_all = (per[0] + per[1] + per[2] + per[3]) / 4;
  CHECK(values(cross_entropy(x, t))[0] == Approx(mean_all));
  CHECK(values(nll_loss(log_softmax(x, 1), t))[0] == Approx(mean_all));
  CrossEntropyOptions none;
  none.reduction = Reduction::kNone;
  const std::vector<double> got = values(cross_entropy(x, t, none));
  for (int i = 0; i < 4; ++i) CHECK(got[i] == Approx(per[i]));
  // ignore_index: those rows count for nothing, also in the mean's denominator.
  CrossEntropyOptions ignore;
  ignore.ignore_index = 2;
  CHECK(values(cross_entropy(x, t, ignore))[0] == Approx((per[0] + per[1]) / 2));
  ignore.reduction = Reduction::kSum;
  CHECK(values(cross_entropy(x, t, ignore))[0] == Approx(per[0] + per[1]));
  // Every target ignored: the mean is 0 / 0 (NaN), as in PyTorch.
  NllLossOptions all;
  all.ignore_index = 7;
  CHECK(std::isnan(values(nll_loss(x, targets({7, 7, 7, 7}, d), all))[0]));
}

TEST_CASE("label smoothing mixes the uniform target in", "[ops][loss]") {
  const Device d = test_device();
  const Tensor x = random_input({3, 4}, d, 9, -2, 2);
  const Tensor t = targets({1, 3, 0}, d);
  const std::vector<double> xv = values(x);
  double want = 0;
  for (int i = 0; i < 3; ++i) {
    const std::vector<double> row(xv.begin() + i * 4, xv.begin() + i * 4 + 4);
    double uniform = 0;
    for (int c = 0; c < 4; ++c) uniform += row_nll(row, c) / 4;
    want += (0.7 * row_nll(row, t.to_vector<int64_t>()[i]) + 0.3 * uniform) / 3;
  }
  CrossEntropyOptions o;
  o.label_smoothing = 0.3;
  CHECK(values(cross_entropy(x, t, o))[0] == Approx(want));
}

TEST_CASE("a target outside the classes is an error", "[ops][loss][errors]") {
  const Tensor x = random_input({2, 3}, Device("cpu"), 1);
  CHECK_THROWS_WITH(cross_entropy(x, targets({0, 3}, Device("cpu"))), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(cross_entropy(x, targets({0}, Device("cpu"))), Catch::Contains("target [N]"));
  const Tensor sim_x = random_input({2, 3}, Device("sim:0"), 1);
  const Tensor loss = cross_entropy(sim_x, targets({0, -1}, Device("sim:0")));
  CHECK_THROWS_WITH(synchronize(Device("sim:0")), Catch::Contains("out of range"));  // async
}

TEST_CASE("mse_loss reduces the squared differences", "[ops][loss]") {
  const Device d = test_device();
  const Tensor a = from_vector<double>({1, 2, 3}, {3}, f64(d)), b = from_vector<double>({0, 4, 3}, {3}, f64(d));
  CHECK(values(mse_loss(a, b))[0] == Approx(5.0 / 3));
  CHECK(values(mse_loss(a, b, Reduction::kSum))[0] == Approx(5.0));
  CHECK(values(mse_loss(a, b, Reduction::kNone)) == std::vector<double>{1, 4, 0});
}

TEST_CASE("dropout: identity off training or at p 0, zeros at p 1, seeded masks", "[ops][dropout]") {
  const Device d = test_device();
  const Tensor x = add(zeros({2000}, f64(d)), 1.0);
  CHECK(values(dropout(x, 0.5, /*training=*/false)) == values(x));
  CHECK(values(dropout(x, 0.0)) == values(x));
  for (double v : values(dropout(x, 1.0))) CHECK(v == 0);  // no NaN from 1 / (1 - p)
  manual_seed(3);
  const std::vector<double> a = values(dropout(x, 0.25));
  manual_seed(3);
  CHECK(values(dropout(x, 0.25)) == a);
  int kept = 0;
  for (double v : a) {
    CHECK((v == 0 || v == Approx(1 / 0.75)));
    kept += v != 0;
  }
  CHECK(kept > 1400);  // 1500 expected; 5 sigma is about 97
  CHECK(kept < 1600);
  CHECK_THROWS_AS(dropout(x, 1.5), ValueError);
}

TEST_CASE("flatten, argmax and embedding", "[ops]") {
  const Device d = test_device();
  CHECK(flatten(zeros({2, 3, 4}, f64(d)), 1).sizes() == Shape{2, 12});
  CHECK(flatten(zeros({2, 3, 4}, f64(d))).sizes() == Shape{24});
  CHECK(flatten(zeros({}, f64(d))).sizes() == Shape{1});
  const Tensor x = from_vector<double>({1, 5, 5, 2, 0, -1}, {2, 3}, f64(d));
  CHECK(argmax(x, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 0});  // ties: first
  const Tensor w = random_input({4, 2}, d, 11);
  const Tensor idx = from_vector<int64_t>({3, 1, 3}, {3}, TensorOptions().dtype(DType::kInt64).device(d));
  const Tensor e = embedding(w, idx, /*padding_idx=*/3);
  const std::vector<double> wv = values(w), ev = values(e);
  CHECK(ev == std::vector<double>{wv[6], wv[7], wv[2], wv[3], wv[6], wv[7]});  // values kept
  sum(e).backward();
  // The padding row gets no gradient; the other picked row gets one per use.
  CHECK(values(w.grad()) == std::vector<double>{0, 0, 1, 1, 0, 0, 0, 0});
  if (d.is_cpu()) {
    CHECK_THROWS_WITH(embedding(w, from_vector<int64_t>({4}, {1}, TensorOptions().dtype(DType::kInt64))),
                      Catch::Contains("out of range"));
  }
}

}  // namespace
}  // namespace streamgrad
