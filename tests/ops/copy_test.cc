// clone, contiguous, to(device), to(dtype): values, gradients across devices and dtypes,
// streams (outputs are stamped with the current stream), errors.
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

TEST_CASE("copies forward values", "[ops][copy]") {
  const Device d = test_device();
  const Tensor a = input({1, 2, 3, 4, 5, 6}, {2, 3}, d, false);
  const Tensor c = clone(a);
  CHECK(c.data_ptr() != a.data_ptr());
  check_values(c, {1, 2, 3, 4, 5, 6});
  const Tensor t = transpose(a, 0, 1);
  CHECK(!t.is_contiguous());
  const Tensor tc = contiguous(t);
  CHECK(tc.is_contiguous());
  check_values(tc, {1, 4, 2, 5, 3, 6});
  CHECK(contiguous(a).is_same(a));
  const Tensor f = to(a, DType::kFloat32);
  CHECK(f.dtype() == DType::kFloat32);
  CHECK(f.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(to(a, DType::kInt64).to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 4, 5, 6});
  for (const char* target : {"cpu", "sim:0", "sim:1"}) {
    const Tensor moved = to(t, Device(target));
    CHECK(moved.device() == Device(target));
    check_values(moved, {1, 4, 2, 5, 3, 6});
  }
}

TEST_CASE("copies gradients", "[ops][copy][grad]") {
  const Device d = test_device();
  const Tensor a = random_input({2, 3}, d, 71);
  check_gradients([](const TensorList& x) { return clone(x[0]); }, {a});
  check_gradients([](const TensorList& x) { return contiguous(transpose(x[0], 0, 1)); }, {a});
  check_second_order([](const TensorList& x) { return mul(clone(x[0]), x[0]); }, {a});
  check_second_order(
      [](const TensorList& x) {
        return mul(contiguous(transpose(x[0], 0, 1)), transpose(x[0], 0, 1));
      },
      {a});
  for (const char* target : {"cpu", "sim:0", "sim:1"}) {
    INFO("to " << target);
    const Device dev(target);
    // Back to the input's device so that w and the loss live beside the input.
    check_gradients([dev, d](const TensorList& x) { return to(mul(to(x[0], dev), 2.0), d); }, {a});
    check_gradients([dev](const TensorList& x) { return to(transpose(x[0], 0, 1), dev); }, {a});
    check_second_order(
        [dev, d](const TensorList& x) {
          const Tensor y = to(x[0], dev);
          return to(mul(y, y), d);
        },
        {a});
  }
}

TEST_CASE("to(dtype) gradients go back in the source dtype", "[ops][copy][grad]") {
  const Device d = test_device();
  // float32 rounding allows only a coarse numerical check; the function is linear.
  const Tensor a = random_input({2, 3}, d, 72);
  check_gradients(
      [](const TensorList& x) { return to(mul(to(x[0], DType::kFloat32), 3.0f), DType::kFloat64); },
      {a}, 1e-2, 1e-4, 1e-4);
  Tensor x = input({1, 2}, {2}, d);
  Tensor y = to(x, DType::kFloat32);
  CHECK(y.requires_grad());
  const Tensor g = grad({sum(mul(y, y))}, {x})[0];
  CHECK(g.dtype() == DType::kFloat64);
  check_values(g, {2, 4});
  // To int64: no history.
  CHECK(!to(x, DType::kInt64).requires_grad());
}

TEST_CASE("ops stamp outputs with the current stream", "[ops][streams][S1]") {
  const Device d("sim:0");
  const Stream side = Stream::create(d);
  Tensor x = input({1, 2, 3, 4}, {2, 2}, d);
  StreamGuard guard(side);
  const TensorList outs = {
      exp(x),
      matmul(x, x),
      transpose(x, 0, 1),
      cat({x, x}),
      max(x, 0).first,
      mean(x, {1}),
      slice(x, 0, 0, 1),
      index_select(x, 0,
                   from_vector<int64_t>({1}, {1}, TensorOptions().dtype(DType::kInt64).device(d)))};
  for (const Tensor& t : outs) {
    CHECK(t.stream() == side);
    REQUIRE(t.grad_fn() != nullptr);
    REQUIRE(t.grad_fn()->stream().has_value());
    CHECK(*t.grad_fn()->stream() == side);
  }
  // Backward replays on the side stream and the results are right.
  const Tensor g = grad({sum(mul(outs[1], outs[0]))}, {x})[0];
  const Tensor e = exp(x);
  const Tensor want = add(matmul(mul(e, 1.0), transpose(x, 0, 1)),
                          add(matmul(transpose(x, 0, 1), e), mul(matmul(x, x), e)));
  check_values(g, values(want.detach()), 1e-10);
}

TEST_CASE("copy errors", "[ops][copy][errors]") {
  expect_error<ValueError>([] { clone(Tensor()); }, {"clone", "undefined"});
  expect_error<DeviceError>([] { to(zeros({2}), Device("sim:7")); }, {"sim:7"});
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad
