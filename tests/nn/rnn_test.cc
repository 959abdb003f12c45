// nn::LSTMCell and nn::LSTM (nn/rnn.h): parameters as the reference names, shapes and
// initialises them; values against a step-by-step composite written here from the named
// parameters (one gate at a time, from row blocks of the weights); layouts (batch_first,
// unbatched, several layers, both directions); zero default states; dropout between
// layers; gradients by gradcheck in float64; clones; and the errors for bad inputs.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "gradcheck/gradcheck.h"
#include "nn/rnn.h"
#include "ops/ops.h"
#include "runtime/base/warning.h"
#include "runtime/runtime.h"
#include "tests/device_names.h"

namespace streamgrad {
namespace {

using Params = std::map<std::string, Tensor>;

Params params_of(const nn::Module& m) {
  Params p;
  for (const auto& [name, t] : m.named_parameters()) p[name] = t;
  return p;
}

std::vector<double> doubles(const Tensor& t) {
  return to(to(t, Device("cpu")), DType::kFloat64).to_vector<double>();
}

void check_close(const Tensor& got, const Tensor& want, double tol = 1e-12) {
  REQUIRE(got.sizes() == want.sizes());
  const std::vector<double> g = doubles(got), w = doubles(want);
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i);
    CHECK(std::abs(g[i] - w[i]) <= tol);
  }
}

TensorOptions f64(Device d) { return TensorOptions().dtype(DType::kFloat64).device(d); }

// Gate k (0 i, 1 f, 2 g, 3 o) of x and h from the k-th row blocks of the weights named
// with `suffix` ("" for a cell, "_l0", "_l1_reverse", ...).
Tensor gate(const Params& p, const std::string& suffix, int64_t k, int64_t hidden,
            const Tensor& x, const Tensor& h) {
  auto rows = [&](const std::string& name) {
    return narrow(p.at(name + suffix), 0, k * hidden, hidden);
  };
  Tensor z = add(matmul(x, transpose(rows("weight_ih"), 0, 1)),
                 matmul(h, transpose(rows("weight_hh"), 0, 1)));
  if (p.count("bias_ih" + suffix) != 0) z = add(add(z, rows("bias_ih")), rows("bias_hh"));
  return z;
}

// One step: (h, c) from x [N, H_in] and (h, c) [N, H].
std::pair<Tensor, Tensor> reference_step(const Params& p, const std::string& suffix,
                                         int64_t hidden, const Tensor& x, const Tensor& h,
                                         const Tensor& c) {
  const Tensor i = sigmoid(gate(p, suffix, 0, hidden, x, h));
  const Tensor f = sigmoid(gate(p, suffix, 1, hidden, x, h));
  const Tensor g = tanh(gate(p, suffix, 2, hidden, x, h));
  const Tensor o = sigmoid(gate(p, suffix, 3, hidden, x, h));
  const Tensor c2 = add(mul(f, c), mul(i, g));
  return {mul(o, tanh(c2)), c2};
}

struct Result {
  Tensor out, h, c;
};

// The reference LSTM on a time-major batched input [L, N, H_in] with states [S, N, H];
// `drop` replaces the input of every layer after the first (dropout p = 1: zeros).
Result reference_lstm(const nn::LSTM& m, const Tensor& x, const Tensor& h0, const Tensor& c0,
                      bool drop = false) {
  const Params p = params_of(m);
  const int64_t directions = m.bidirectional ? 2 : 1, steps = x.size(0);
  std::vector<Tensor> layer_in;
  for (int64_t t = 0; t < steps; ++t) layer_in.push_back(narrow(x, 0, t, 1).squeeze(0));
  std::vector<Tensor> hs, cs;
  for (int64_t k = 0; k < m.num_layers; ++k) {
    if (k > 0 && drop) {
      for (Tensor& t : layer_in) t = mul(t, 0.0);
    }
    std::vector<std::vector<Tensor>> per_dir(directions);
    for (int64_t dir = 0; dir < directions; ++dir) {
      const std::string suffix = "_l" + std::to_string(k) + (dir == 1 ? "_reverse" : "");
      const int64_t s = k * directions + dir;
      Tensor h = narrow(h0, 0, s, 1).squeeze(0), c = narrow(c0, 0, s, 1).squeeze(0);
      per_dir[dir].resize(steps);
      for (int64_t n = 0; n < steps; ++n) {
        const int64_t t = dir == 1 ? steps - 1 - n : n;
        std::tie(h, c) = reference_step(p, suffix, m.hidden_size, layer_in[t], h, c);
        per_dir[dir][t] = h;
      }
      hs.push_back(h);
      cs.push_back(c);
    }
    for (int64_t t = 0; t < steps; ++t) {
      layer_in[t] = directions == 1 ? per_dir[0][t] : cat({per_dir[0][t], per_dir[1][t]}, 1);
    }
  }
  return {stack(layer_in, 0), stack(hs, 0), stack(cs, 0)};
}

std::shared_ptr<nn::LSTM> make_lstm(Device d, int64_t in, int64_t hidden, int64_t layers,
                                    bool bias, bool batch_first, bool bidirectional,
                                    double dropout = 0) {
  auto m = std::make_shared<nn::LSTM>(in, hidden, layers, bias, batch_first, dropout,
                                      bidirectional);
  m->to(DType::kFloat64);
  m->to(d);
  return m;
}

TEST_CASE("LSTM and LSTMCell register the reference's parameters", "[nn][rnn]") {
  nn::LSTM lstm(3, 5, /*num_layers=*/2, /*bias=*/true, false, 0.0, /*bidirectional=*/true);
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  for (const auto& [name, t] : lstm.named_parameters()) {
    names.push_back(name);
    shapes.push_back(t.sizes());
  }
  CHECK(names == std::vector<std::string>{
                     "weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                     "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse",
                     "bias_hh_l0_reverse", "weight_ih_l1", "weight_hh_l1", "bias_ih_l1",
                     "bias_hh_l1", "weight_ih_l1_reverse", "weight_hh_l1_reverse",
                     "bias_ih_l1_reverse", "bias_hh_l1_reverse"});
  CHECK(shapes[0] == Shape{20, 3});
  CHECK(shapes[1] == Shape{20, 5});
  CHECK(shapes[2] == Shape{20});
  CHECK(shapes[8] == Shape{20, 10});  // layer 1 reads both directions of layer 0
  CHECK(lstm.type_name() == "LSTM");
  CHECK(lstm.named_buffers().empty());
  CHECK(nn::LSTM(3, 5, 3, /*bias=*/false).parameters().size() == 6);

  nn::LSTMCell cell(3, 4);
  names.clear();
  for (const auto& [name, t] : cell.named_parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"weight_ih", "weight_hh", "bias_ih", "bias_hh"});
  CHECK(cell.weight_ih.sizes() == Shape{16, 3});
  CHECK(cell.weight_hh.sizes() == Shape{16, 4});
  CHECK(nn::LSTMCell(3, 4, /*bias=*/false).parameters().size() == 2);
  CHECK(cell.type_name() == "LSTMCell");
}

TEST_CASE("LSTM parameters start uniform in +-1/sqrt(hidden_size) from the seeded generator",
          "[nn][rnn]") {
  manual_seed(7);
  nn::LSTM a(4, 16, 2);
  manual_seed(7);
  nn::LSTM b(4, 16, 2);
  nn::LSTMCell cell(4, 16);
  const double bound = 1 / std::sqrt(16.0);
  std::vector<Tensor> all = a.parameters();
  for (const Tensor& p : cell.parameters()) all.push_back(p);
  for (const Tensor& p : all) {
    const std::vector<double> v = doubles(p);
    const double lo = *std::min_element(v.begin(), v.end());
    const double hi = *std::max_element(v.begin(), v.end());
    CHECK(lo >= -bound);
    CHECK(hi <= bound);
    CHECK(hi - lo > bound);  // spread over the range, not a constant
  }
  const std::vector<Tensor> pa = a.parameters(), pb = b.parameters();
  for (size_t i = 0; i < pa.size(); ++i) CHECK(doubles(pa[i]) == doubles(pb[i]));
  CHECK(doubles(pa[0]) != doubles(a.parameters()[4]));
}

TEST_CASE("LSTM equals the step-by-step composite in every layout", "[nn][rnn]") {
  const Device d(GENERATE(from_range(testing::device_names())));
  const bool bidirectional = GENERATE(false, true);
  const bool bias = GENERATE(true, false);
  const int64_t layers = GENERATE(1, 2);
  INFO(d << " bidirectional " << bidirectional << " bias " << bias << " layers " << layers);
  manual_seed(11);
  const int64_t D = bidirectional ? 2 : 1;
  auto m = make_lstm(d, 3, 4, layers, bias, false, bidirectional);
  const Tensor x = randn({5, 2, 3}, f64(d));
  const Tensor h0 = randn({D * layers, 2, 4}, f64(d)), c0 = randn({D * layers, 2, 4}, f64(d));
  const auto [out, state] = m->forward(x, nn::LSTMState{h0, c0});
  const Result want = reference_lstm(*m, x, h0, c0);
  CHECK(out.sizes() == Shape{5, 2, D * 4});
  check_close(out, want.out);
  check_close(state.first, want.h);
  check_close(state.second, want.c);
  // Zero states by default.
  const Tensor z = zeros({D * layers, 2, 4}, f64(d));
  const auto [out0, state0] = m->forward(x, std::nullopt);
  const Result want0 = reference_lstm(*m, x, z, z);
  check_close(out0, want0.out);
  check_close(state0.first, want0.h);
  check_close(state0.second, want0.c);
  check_close(m->forward(x), want0.out);

  // batch_first: the same values with the input's and the output's first two dims swapped;
  // the states keep their layout.
  auto bf = make_lstm(d, 3, 4, layers, bias, /*batch_first=*/true, bidirectional);
  bf->load_state_dict(m->state_dict());
  const auto [out_bf, state_bf] = bf->forward(transpose(x, 0, 1), nn::LSTMState{h0, c0});
  CHECK(out_bf.sizes() == Shape{2, 5, D * 4});
  check_close(out_bf, transpose(want.out, 0, 1));
  check_close(state_bf.first, want.h);

  // Unbatched [L, H_in] with [S, H] states: batch 0 of the batched result.
  const Tensor x1 = narrow(x, 1, 0, 1).squeeze(1);
  const Tensor h1 = narrow(h0, 1, 0, 1).squeeze(1), c1 = narrow(c0, 1, 0, 1).squeeze(1);
  for (const auto& module : {m, bf}) {
    const auto [out1, state1] = module->forward(x1, nn::LSTMState{h1, c1});
    CHECK(out1.sizes() == Shape{5, D * 4});
    CHECK(state1.first.sizes() == Shape{D * layers, 4});
    check_close(out1, narrow(want.out, 1, 0, 1).squeeze(1));
    check_close(state1.second, narrow(want.c, 1, 0, 1).squeeze(1));
  }
}

TEST_CASE("LSTMCell equals one step of the composite", "[nn][rnn]") {
  const Device d(GENERATE(from_range(testing::device_names())));
  manual_seed(13);
  auto cell = std::make_shared<nn::LSTMCell>(3, 4);
  cell->to(DType::kFloat64);
  cell->to(d);
  const Params p = params_of(*cell);
  const Tensor x = randn({2, 3}, f64(d)), h = randn({2, 4}, f64(d)), c = randn({2, 4}, f64(d));
  const auto want = reference_step(p, "", 4, x, h, c);
  const nn::LSTMState got = cell->forward(x, nn::LSTMState{h, c});
  check_close(got.first, want.first);
  check_close(got.second, want.second);
  const Tensor z = zeros({2, 4}, f64(d));
  check_close(cell->forward(x), reference_step(p, "", 4, x, z, z).first);
  // Unbatched: [H_in] and [H] states.
  const nn::LSTMState one = cell->forward(narrow(x, 0, 1, 1).squeeze(0),
                                          nn::LSTMState{narrow(h, 0, 1, 1).squeeze(0),
                                                        narrow(c, 0, 1, 1).squeeze(0)});
  CHECK(one.first.sizes() == Shape{4});
  check_close(one.first, narrow(want.first, 0, 1, 1).squeeze(0));
  check_close(one.second, narrow(want.second, 0, 1, 1).squeeze(0));
}

TEST_CASE("LSTM drops out between layers, in training only", "[nn][rnn]") {
  const Device d(GENERATE(from_range(testing::device_names())));
  manual_seed(17);
  // Dropout 1 zeroes every element: the second layer then reads zeros, and the last
  // layer's output is not dropped.
  auto m = make_lstm(d, 3, 4, 2, true, false, false, /*dropout=*/1.0);
  const Tensor x = randn({3, 2, 3}, f64(d)), z = zeros({2, 2, 4}, f64(d));
  const Result dropped = reference_lstm(*m, x, z, z, /*drop=*/true);
  const Result kept = reference_lstm(*m, x, z, z);
  check_close(m->forward(x), dropped.out);
  m->eval();
  check_close(m->forward(x), kept.out);
  // Dropout 0.5 draws from the seeded generator.
  auto half = make_lstm(d, 3, 4, 2, true, false, false, 0.5);
  manual_seed(3);
  const std::vector<double> first = doubles(half->forward(x));
  manual_seed(3);
  CHECK(doubles(half->forward(x)) == first);
  half->eval();
  CHECK(doubles(half->forward(x)) != first);
  // One layer: dropout has nothing to act on, which the reference warns about.
  WarningCollector warnings;
  nn::LSTM single(3, 4, 1, true, false, 0.5);
  REQUIRE(warnings.warnings().size() == 1);
  CHECK(warnings.warnings()[0].message.find("LSTM: dropout 0.5") != std::string::npos);
  // A copy keeps the dropout without warning again.
  const auto copy = std::dynamic_pointer_cast<nn::LSTM>(single.clone());
  CHECK(copy->dropout == 0.5);
  CHECK(warnings.warnings().size() == 1);
}

TEST_CASE("LSTM and LSTMCell gradients pass gradcheck in float64", "[nn][rnn][grad]") {
  const Device d(GENERATE(from_range(testing::device_names())));
  manual_seed(19);
  // Tiny: two layers, both directions, so every parameter's path is checked.
  auto m = make_lstm(d, 2, 2, 2, true, true, true);
  TensorList in = {randn({1, 3, 2}, f64(d)).requires_grad_(true),
                   randn({4, 1, 2}, f64(d)).requires_grad_(true),
                   randn({4, 1, 2}, f64(d)).requires_grad_(true)};
  for (const Tensor& p : m->parameters()) in.push_back(p);
  const GradcheckFn f = [m](const TensorList& t) {
    const auto [out, state] = m->forward(t[0], nn::LSTMState{t[1], t[2]});
    return TensorList{out, state.first, state.second};
  };
  GradcheckOptions o;
  o.raise_exception = false;
  const GradcheckResult r = gradcheck(f, in, o);
  INFO(r.message);
  CHECK(r.passed);

  auto cell = std::make_shared<nn::LSTMCell>(2, 2);
  cell->to(DType::kFloat64);
  cell->to(d);
  TensorList cin = {randn({1, 2}, f64(d)).requires_grad_(true),
                    randn({1, 2}, f64(d)).requires_grad_(true),
                    randn({1, 2}, f64(d)).requires_grad_(true)};
  for (const Tensor& p : cell->parameters()) cin.push_back(p);
  const GradcheckFn fc = [cell](const TensorList& t) {
    const nn::LSTMState s = cell->forward(t[0], nn::LSTMState{t[1], t[2]});
    return TensorList{s.first, s.second};
  };
  const GradcheckResult rc = gradcheck(fc, cin, o);
  INFO(rc.message);
  CHECK(rc.passed);
  const GradcheckResult rr = gradgradcheck(fc, cin, o);
  INFO(rr.message);
  CHECK(rr.passed);
}

TEST_CASE("LSTM clones and trains", "[nn][rnn]") {
  manual_seed(23);
  auto m = std::make_shared<nn::LSTM>(3, 4, 2, true, true);
  const Tensor x = randn({2, 5, 3});
  const std::vector<double> want = doubles(m->forward(x));
  CHECK(doubles(m->clone()->forward(x)) == want);
  sum(m->forward(x)).backward();
  for (const auto& [name, p] : m->named_parameters()) {
    INFO(name);
    CHECK(p.grad().defined());
  }
}

TEST_CASE("LSTM and LSTMCell refuse bad inputs and states, naming the shapes",
          "[nn][rnn][errors]") {
  const Device d(GENERATE(from_range(testing::device_names())));
  auto m = make_lstm(d, 3, 4, 2, true, false, false);
  const Tensor x = randn({5, 2, 3}, f64(d));
  auto fails = [](auto fn, const std::vector<std::string>& parts) {
    try {
      fn();
      FAIL("no error");
    } catch (const ValueError& e) {
      for (const std::string& part : parts) CHECK_THAT(e.what(), Catch::Contains(part));
    }
  };
  fails([&] { m->forward(randn({5, 2, 6}, f64(d))); },
        {"LSTM: input float64[5, 2, 6]", "input_size 3"});
  fails([&] { m->forward(randn({1, 5, 2, 3}, f64(d))); },
        {"LSTM: expected a 3-D [L, N, 3]", "float64[1, 5, 2, 3]"});
  const Tensor good = zeros({2, 2, 4}, f64(d));
  fails([&] { m->forward(x, nn::LSTMState{zeros({2, 3, 4}, f64(d)), good}); },
        {"LSTM: h0 float64[2, 3, 4]", "must be [2, 2, 4]", "float64[5, 2, 3]"});
  fails([&] { m->forward(x, nn::LSTMState{good, zeros({1, 2, 4}, f64(d))}); },
        {"LSTM: c0 float64[1, 2, 4]", "must be [2, 2, 4]"});
  fails([&] { m->forward(narrow(x, 1, 0, 1).squeeze(1), nn::LSTMState{good, good}); },
        {"LSTM: h0 float64[2, 2, 4]", "must be [2, 4]", "unbatched"});
  fails([&] { m->forward(to(x, DType::kFloat32)); }, {"LSTM: input float32[5, 2, 3]", "float64"});
  nn::LSTMCell cell(3, 4);
  cell.to(d);
  const TensorOptions f32 = TensorOptions().device(d);
  fails([&] { cell.forward(randn({2, 5}, f32)); }, {"LSTMCell: input float32[2, 5]", "3"});
  fails([&] { cell.forward(randn({2, 2, 3}, f32)); }, {"LSTMCell: expected a 2-D [N, 3]"});
  fails([&] { cell.forward(randn({2, 3}, f32), nn::LSTMState{zeros({3, 4}, f32),
                                                             zeros({2, 4}, f32)}); },
        {"LSTMCell: hx float32[3, 4]", "must be [2, 4]"});
  const Device other = d.type() == DeviceType::kCpu ? Device("sim:0") : Device("cpu");
  CHECK_THROWS_AS(m->forward(to(x, other)), DeviceError);
  CHECK_THROWS_WITH(nn::LSTM(3, 0), Catch::Contains("LSTM: hidden_size"));
  CHECK_THROWS_WITH(nn::LSTM(3, 4, 2, true, false, 1.5), Catch::Contains("LSTM: dropout 1.5"));
  CHECK_THROWS_WITH(nn::LSTMCell(0, 4), Catch::Contains("LSTMCell: input_size"));
}

}  // namespace
}  // namespace streamgrad
