// In-place operations and views (Note [Views and in-place operations]): a view's gradient
// follows in-place writes to its base, and an in-place op on a view is recorded on the
// base, on cpu and sim. Each case is checked against the same program written without
// in-place operations, and against central differences.
#include "gradcheck/gradcheck.h"
#include "engine/grad_mode.h"
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

std::vector<double> grad_of(const Tensor& t) {
  REQUIRE(t.grad().defined());
  return values(t.grad());
}

TEST_CASE("a view taken before an in-place op on its base follows the base", "[ops][views]") {
  const Device d = test_device();
  {
    Tensor x = input({1, 2, 3}, {3}, d);
    Tensor y = clone(x);
    Tensor v = narrow(y, 0, 0, 2);
    mul_(y, 2.0);
    check_values(v, {2, 4});
    CHECK(v.grad_fn()->name() == "AsStridedBackward");
    sum(v).backward();
    CHECK(grad_of(x) == std::vector<double>{2, 2, 0});
  }
  {
    Tensor x = input({1, 2, 3}, {3}, d);
    Tensor y = clone(x);
    Tensor v = narrow(y, 0, 0, 2);
    fill_(y, 5);
    sum(v).backward();
    CHECK(grad_of(x) == std::vector<double>{0, 0, 0});
  }
  {
    Tensor x = input({1, 2, 3}, {3}, d);
    Tensor z = input({4, 5, 6}, {3}, d);
    Tensor y = clone(x);
    Tensor v = narrow(y, 0, 1, 2);
    add_(y, z);
    sum(mul(v, v)).backward();  // d/dv v^2 = 2v = 2 * [2 + 5, 3 + 6]
    CHECK(grad_of(x) == std::vector<double>{0, 14, 18});
    CHECK(grad_of(z) == std::vector<double>{0, 14, 18});
  }
  {
    // A view of a view, transposed: the replay places it through both.
    Tensor x = input({1, 2, 3, 4, 5, 6}, {2, 3}, d);
    Tensor y = clone(x);
    Tensor v = narrow(transpose(y, 0, 1), 0, 1, 2);  // y[:, 1:3] transposed
    mul_(y, input({1, 10, 100}, {3}, d, false));
    sum(v).backward();
    CHECK(grad_of(x) == std::vector<double>{0, 10, 100, 0, 10, 100});
  }
}

TEST_CASE("an in-place op on a view is recorded on its base", "[ops][views]") {
  const Device d = test_device();
  {
    Tensor x = input({1, 2, 3}, {3}, d);
    Tensor y = clone(x);
    Tensor v = narrow(y, 0, 1, 2);
    mul_(v, 3.0);
    check_values(y, {1, 6, 9});
    CHECK(y.grad_fn()->name() == "CopySlices");
    sum(y).backward();
    CHECK(grad_of(x) == std::vector<double>{1, 3, 3});
  }
  {
    Tensor x = input({1, 2, 3}, {3}, d);
    Tensor w = input({7, 8}, {2}, d);
    Tensor y = clone(x);
    Tensor v = narrow(y, 0, 0, 2);
    add_(v, w, 2.0);
    sum(mul(y, y)).backward();  // y = [15, 18, 3]
    CHECK(grad_of(x) == std::vector<double>{30, 36, 6});
    CHECK(grad_of(w) == std::vector<double>{60, 72});
  }
  {
    // History written into a view of a tensor that had none: the base gets it.
    Tensor w = input({2, 3}, {2}, d);
    Tensor y = zeros({3}, f64(d));
    Tensor v = narrow(y, 0, 1, 2);
    copy_(v, w);
    CHECK(y.requires_grad());
    CHECK(v.requires_grad());
    sum(mul(y, y)).backward();
    CHECK(grad_of(w) == std::vector<double>{4, 6});
  }
  {
    // fill_ and masked_fill_ through a transposed view, read through another view.
    Tensor x = input({1, 2, 3, 4}, {2, 2}, d);
    Tensor y = clone(x);
    Tensor col = narrow(y, 1, 0, 1);
    Tensor t = transpose(y, 0, 1);
    Tensor t1 = narrow(t, 0, 1, 1);
    fill_(t1, 0);  // y[:, 1] = 0
    masked_fill_(col, gt(input({1, -1}, {2, 1}, d, false), 0.0), 9);
    check_values(y, {9, 0, 3, 0});
    sum(mul(col, input({10, 20}, {2, 1}, d, false))).backward();
    CHECK(grad_of(x) == std::vector<double>{0, 0, 20, 0});
  }
  {
    // conv2d's output is a view of an internal tensor; it can be scaled in place.
    Tensor img = input({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3}, d, false);
    Tensor w1 = input({1, 1, 1, 1}, {1, 1, 2, 2}, d);
    Tensor w2 = input({1, 1, 1, 1}, {1, 1, 2, 2}, d);
    Tensor y = conv2d(img, w1);
    mul_(y, 2.0);
    sum(mul(y, y)).backward();
    sum(mul(mul(conv2d(img, w2), 2.0), mul(conv2d(img, w2), 2.0))).backward();
    CHECK(grad_of(w1) == grad_of(w2));
  }
}

// x -> a scalar through in-place ops on a base and its views; the same with `inplace`
// false, computed out of place.
Tensor program(const TensorList& in, bool inplace) {
  const Tensor& x = in[0];
  const Tensor& z = in[1];
  Tensor y = mul(x, 1.5);                 // [2, 3]
  Tensor row = narrow(y, 0, 1, 1);        // y[1:2]
  Tensor t = transpose(y, 0, 1);          // [3, 2]
  Tensor out;
  if (inplace) {
    mul_(row, z);                         // y[1] *= z
    Tensor t02 = narrow(t, 0, 0, 2);
    add_(t02, tanh(mul(t02, 1.0)));       // y[:, 0:2] += tanh(y[:, 0:2])
    out = add(sum(mul(row, row)), sum(exp(y)));
  } else {
    Tensor r1 = mul(narrow(y, 0, 1, 1), z);
    Tensor y1 = cat({narrow(y, 0, 0, 1), r1}, 0);
    Tensor left = narrow(y1, 1, 0, 2);
    Tensor y2 = cat({add(left, tanh(left)), narrow(y1, 1, 2, 1)}, 1);
    Tensor row2 = narrow(y2, 0, 1, 1);
    out = add(sum(mul(row2, row2)), sum(exp(y2)));
  }
  return out;
}

TEST_CASE("in-place ops on views: gradients as the out-of-place program's and central "
          "differences, first and second order", "[ops][views][grad]") {
  const Device d = test_device();
  const TensorList in = {random_input({2, 3}, d, 1), random_input({3}, d, 2)};
  Tensor a = program(in, true), b = program(in, false);
  CHECK(values(a)[0] == Approx(values(b)[0]).epsilon(1e-12));
  const TensorList ga = grad({a}, in), gb = grad({b}, in);
  for (size_t i = 0; i < in.size(); ++i) {
    const std::vector<double> va = values(ga[i]), vb = values(gb[i]);
    for (size_t k = 0; k < va.size(); ++k) CHECK(va[k] == Approx(vb[k]).epsilon(1e-12));
  }
  const GradcheckFn f = [](const TensorList& x) { return TensorList{program(x, true)}; };
  CHECK(gradcheck(f, in).passed);
  CHECK(gradgradcheck(f, in).passed);
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad
