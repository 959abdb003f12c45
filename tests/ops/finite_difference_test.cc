// The gradient checker itself: it must tell a wrong backward from a right one.
#include "tests/ops/finite_difference.h"

#include "engine/function.h"

namespace streamgrad {
namespace testing {
namespace {

// y = x², with a backward that is off by a factor of 2 unless `right` is set.
template <bool kRight>
struct Square : Function<Square<kRight>> {
  static TensorList forward(FunctionCtx& ctx, const TensorList& in) {
    ctx.save_for_backward({in[0]});
    return {mul(in[0], in[0])};
  }
  static TensorList backward(FunctionCtx& ctx, const TensorList& g) {
    const Tensor x = ctx.saved_tensors()[0];
    return {mul(mul(g[0], x), kRight ? 2.0 : 1.0)};
  }
};

template <bool kRight>
double worst_error(const Tensor& x) {
  const Fn f = [](const TensorList& in) { return Square<kRight>::apply({in[0]}, "Square")[0]; };
  const Tensor y = f({x});
  const Tensor w = weight_for(y, 1);
  const Tensor g = grad({sum(mul(y, w))}, {x})[0];
  const auto scalar = [&](const TensorList& in) { return sum(mul(f(in), w)); };
  const std::vector<double> num = detail::numerical(scalar, {x}, false, 1e-6)[0];
  const std::vector<double> ana = values(g);
  double worst = 0;
  for (size_t i = 0; i < num.size(); ++i) worst = std::max(worst, std::abs(num[i] - ana[i]));
  return worst;
}

TEST_CASE("the checker tells a wrong gradient from a right one", "[ops][checker]") {
  const Device d = test_device();
  const Tensor x = random_input({2, 3}, d, 7, 0.5, 1.5);
  CHECK(worst_error<true>(x) < 1e-8);
  CHECK(worst_error<false>(x) > 0.1);
  // And the real thing passes on the right one.
  check_gradients([](const TensorList& in) { return Square<true>::apply({in[0]}, "Square")[0]; },
                  {x});
}

TEST_CASE("the checker covers every element of every input", "[ops][checker]") {
  const Device d = test_device();
  const Tensor a = random_input({3}, d, 8);
  const Tensor b = random_input({2, 2}, d, 9);
  int calls = 0;
  check_gradients(
      [&calls](const TensorList& x) {
        ++calls;
        return add(sum(x[0]), sum(x[1]));
      },
      {a, b});
  // One analytical pass; the unperturbed output twice (its shape, then its values, as
  // numerical_jacobian checks them); two evaluations per element.
  CHECK(calls == 1 + 2 + 2 * (3 + 4));
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad
