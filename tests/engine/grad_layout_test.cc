// The gradient layout contract (issue 24 item 11): .grad of a dense parameter has the
// parameter's strides, however the gradient reached its accumulator (transposed,
// permuted, expanded), on the first backward and on accumulation, as in the reference
// framework; so optimisers and later accumulations walk it densely.
#include <catch2/catch.hpp>

#include "tests/engine/engine_test_util.h"

namespace streamgrad {
namespace {

void check_layout(const Tensor& p) {
  INFO(p.describe());
  REQUIRE(p.grad().defined());
  CHECK(p.grad().strides() == p.strides());
  CHECK(p.grad().storage_offset() == 0);
}

TEST_CASE("a hand-written linear layer's gradients keep the parameters' layout",
          "[engine][layout]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"));
  manual_seed(3);
  Tensor x = randn({4, 5}, TensorOptions().device(d));
  Tensor w = randn({3, 5}, TensorOptions().device(d)).requires_grad_();
  Tensor b = randn({3}, TensorOptions().device(d)).requires_grad_();
  Tensor w2 = randn({5, 3}, TensorOptions().device(d)).requires_grad_();
  for (int step = 0; step < 2; ++step) {
    Tensor h = add(matmul(x, transpose(w, 0, 1)), b);          // w's gradient: transposed
    Tensor out = matmul(h, permute(w2, {1, 0}));                 // permuted
    Tensor e = exp(out);
    Tensor logp = sub(out, log(sum(e, {1}, true)));
    sum(mul(logp, expand(transpose(narrow(w2.detach(), 1, 0, 1), 0, 1), {4, 5}))).backward();
    check_layout(w);
    check_layout(b);
    check_layout(w2);
  }
}

TEST_CASE("a gradient with the parameter's strides is kept, a strided one is copied",
          "[engine][layout]") {
  // A dense parameter that is itself transposed: its gradient keeps its strides.
  Tensor base = randn({3, 4});
  Tensor p = transpose(base, 0, 1).detach().requires_grad_();
  sum(mul(p, 2.0)).backward();
  check_layout(p);
  CHECK(p.grad().to_vector<float>() == std::vector<float>(12, 2.0f));
}

TEST_CASE("the weight gradient of x @ w^T becomes .grad without a copy", "[engine][layout]") {
  // matmul's backward computes the gradient of a column-major operand in that layout, so
  // the transpose back to w is contiguous and AccumulateGrad takes it over: .grad is the
  // very memory the gradient of w^T was written to (the reference's mm backward does the
  // same). A copy would cost a weight-sized allocation and pass per step.
  const Device d = GENERATE(Device("cpu"), Device("sim:0"));
  manual_seed(4);
  for (const int64_t batch : {1, 6}) {
    INFO("device " << d << ", batch " << batch);
    Tensor x = randn({batch, 5}, TensorOptions().device(d));
    Tensor w = randn({3, 5}, TensorOptions().device(d)).requires_grad_();
    Tensor wt = transpose(w, 0, 1);
    void* wt_grad = nullptr;
    wt.register_hook([&wt_grad](const Tensor& g) {
      wt_grad = g.data_ptr();
      return Tensor();
    });
    sum(matmul(x, wt)).backward();
    REQUIRE(w.grad().defined());
    CHECK(w.grad().is_contiguous());
    CHECK(w.grad().data_ptr() == wt_grad);
    // The values: d/dw sum(x w^T) = column sums of x, repeated for each row of w.
    const std::vector<float> cols = sum(x, {0}).to_vector<float>();
    const std::vector<float> got = w.grad().to_vector<float>();
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(cols[i % 5]));
  }
}

}  // namespace
}  // namespace streamgrad
