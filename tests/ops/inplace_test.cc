// add_, mul_ (tensor and scalar), zero_, fill_, copy_: values, version counters, history
// rebasing (gradients to the old value and to the operand, first and second order),
// errors.
#include "engine/grad_mode.h"
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

TEST_CASE("in-place forward values and versions", "[ops][inplace]") {
  const Device d = test_device();
  Tensor a = input({1, 2, 3, 4, 5, 6}, {2, 3}, d, false);
  const uint32_t v0 = a.version();
  CHECK(&add_(a, input({10, 20, 30}, {3}, d, false)) == &a);
  check_values(a, {11, 22, 33, 14, 25, 36});
  add_(a, input({1, 2}, {2, 1}, d, false), -1);
  check_values(a, {10, 21, 32, 12, 23, 34});
  mul_(a, 0.5);
  check_values(a, {5, 10.5, 16, 6, 11.5, 17});
  mul_(a, input({2}, {1}, d, false));
  check_values(a, {10, 21, 32, 12, 23, 34});
  Tensor b = input({1, 2}, {2}, d, false);
  copy_(b, input({7, 8}, {2}, d, false));
  check_values(b, {7, 8});
  copy_(a, input({1, 2, 3}, {3}, d, false));  // broadcast
  check_values(a, {1, 2, 3, 1, 2, 3});
  fill_(a, 2.5);
  check_values(a, {2.5, 2.5, 2.5, 2.5, 2.5, 2.5});
  zero_(a);
  check_values(a, {0, 0, 0, 0, 0, 0});
  CHECK(a.version() == v0 + 7);
  // Through views: the base sees the writes and shares the version counter.
  Tensor base = input({1, 2, 3, 4}, {2, 2}, d, false);
  Tensor col = narrow(base, 1, 1, 1);
  const uint32_t vb = base.version();
  mul_(col, 10.0);
  check_values(base, {1, 20, 3, 40});
  CHECK(base.version() == vb + 1);
  Tensor tr = transpose(base, 0, 1);
  add_(tr, input({100, 200}, {2}, d, false));
  check_values(base, {101, 120, 203, 240});
  // Across devices and dtypes.
  Tensor dst = zeros({3}, f64(d));
  copy_(dst, from_vector<float>({1, 2, 3}, {3}, TensorOptions().device(Device("sim:1"))));
  check_values(dst, {1, 2, 3});
  Tensor ints = zeros({2}, TensorOptions().dtype(DType::kInt64).device(d));
  fill_(ints, 4);
  CHECK(ints.to_vector<int64_t>() == std::vector<int64_t>{4, 4});
  copy_(ints, input({1.9, -2.5}, {2}, d, false));
  CHECK(ints.to_vector<int64_t>() == std::vector<int64_t>{1, -2});
  // mul_ by itself.
  Tensor sq = input({3, -2}, {2}, d, false);
  mul_(sq, sq);
  check_values(sq, {9, 4});
}

TEST_CASE("in-place gradients rebase history", "[ops][inplace][grad]") {
  const Device d = test_device();
  const Tensor a = random_input({2, 3}, d, 81);
  const Tensor b = random_input({2, 3}, d, 82);
  const Tensor row = random_input({3}, d, 83);

  SECTION("add_") {
    check_gradients(
        [](const TensorList& x) {
          Tensor t = mul(x[0], x[0]);
          return add_(t, x[1], -2.0);
        },
        {a, row});
    check_gradients(
        [](const TensorList& x) {
          Tensor t = mul(x[0], 1.0);
          add_(t, x[0]);  // the same leaf on both paths
          return mul(t, x[1]);
        },
        {a, b});
    // The tensor does not require grad, the operand does.
    check_gradients(
        [](const TensorList& x) {
          Tensor t = zeros({2, 3}, f64(x[0].device()));
          return add_(t, x[0]);
        },
        {row});
    check_second_order(
        [](const TensorList& x) {
          Tensor t = mul(x[0], x[0]);
          add_(t, mul(x[1], x[1]), 0.5);
          return mul(t, x[0]);
        },
        {a, row});
  }
  SECTION("mul_") {
    check_gradients(
        [](const TensorList& x) {
          Tensor t = mul(x[0], 1.0);
          return mul_(t, x[1]);
        },
        {a, b});
    check_gradients(
        [](const TensorList& x) {
          // sin, not exp: exp saves its output, so changing it in place is an error, as
          // in the reference.
          Tensor t = sin(x[0]);
          return mul_(t, x[1]);  // broadcast operand
        },
        {a, row});
    check_gradients(
        [](const TensorList& x) {
          Tensor t = add(x[0], 0.0);
          return mul_(t, t);  // aliasing: t²
        },
        {a});
    check_gradients(
        [](const TensorList& x) {
          Tensor t = add(x[0], 1.0);
          return mul_(t, -3.0);
        },
        {a});
    check_second_order(
        [](const TensorList& x) {
          Tensor t = mul(x[0], x[1]);
          mul_(t, x[1]);
          return mul_(t, t);  // (a b²)²
        },
        {a, b});
    check_second_order(
        [](const TensorList& x) {
          Tensor t = sin(x[0]);
          return mul_(t, 2.0);
        },
        {a});
  }
  SECTION("fill_, zero_, copy_") {
    check_gradients(
        [](const TensorList& x) {
          Tensor t = mul(x[0], 2.0);
          fill_(t, 3.0);
          return add(t, x[1]);
        },
        {a, b});
    check_gradients(
        [](const TensorList& x) {
          Tensor t = mul(x[0], 2.0);
          zero_(t);
          return add(t, mul(x[0], x[1]));
        },
        {a, b});
    check_gradients(
        [](const TensorList& x) {
          Tensor t = mul(x[0], 2.0);
          return copy_(t, x[1]);  // broadcast source; a gets nothing
        },
        {a, row});
    check_gradients(
        [](const TensorList& x) {
          Tensor t = zeros({2, 3}, f64(x[0].device()));
          copy_(t, transpose(x[0], 0, 1));
          return mul(t, t);
        },
        {random_input({3, 2}, d, 84)});
    check_second_order(
        [](const TensorList& x) {
          Tensor t = zeros({2, 3}, f64(x[0].device()));
          copy_(t, mul(x[0], x[0]));
          return mul(t, x[0]);
        },
        {a});
  }
  SECTION("copy_ across devices and dtypes") {
    for (const char* src_dev : {"cpu", "sim:0", "sim:1"}) {
      INFO("source on " << src_dev);
      const Device sd(src_dev);
      check_gradients(
          [sd](const TensorList& x) {
            Tensor t = zeros({2, 3}, f64(x[0].device()));
            copy_(t, mul(to(x[0], sd), 3.0));
            return t;
          },
          {a});
    }
    Tensor x = input({1, 2}, {2}, d);
    Tensor t = zeros({2}, TensorOptions().device(d));  // float32 destination
    copy_(t, mul(x, x));
    const Tensor g = grad({sum(t)}, {x})[0];
    CHECK(g.dtype() == DType::kFloat64);
    check_values(g, {2, 4});
  }
}

TEST_CASE("in-place ops with an operand of another floating dtype keep the tensor's dtype",
          "[ops][inplace][dtype]") {
  const Device d = test_device();
  Tensor x = input({1, 2, 3}, {3}, d);
  Tensor b = from_vector<float>({2, 4, 8}, {3}, TensorOptions().device(d)).requires_grad_();
  Tensor y = mul(x, 1.0);
  mul_(y, b);
  add_(y, b, 0.5);
  CHECK(y.dtype() == DType::kFloat64);
  check_values(y, {3, 10, 28});
  sum(y).backward();
  check_values(x.grad(), {2, 4, 8});
  CHECK(b.grad().dtype() == DType::kFloat32);
  CHECK(b.grad().to_vector<float>() == std::vector<float>{1.5, 2.5, 3.5});
}

TEST_CASE("in-place history: node names and streams", "[ops][inplace][S1]") {
  const Device d("sim:0");
  Tensor x = input({1, 2}, {2}, d);
  Tensor t = mul(x, 2.0);
  const Stream side = Stream::create(d);
  side.wait_stream(current_stream(d));  // t was produced on the default stream
  {
    StreamGuard g(side);
    add_(t, x);
  }
  current_stream(d).wait_stream(side);  // and is read there below
  check_values(t, {3, 6});
  REQUIRE(t.grad_fn() != nullptr);
  CHECK(t.grad_fn()->name() == "Add_Backward");
  REQUIRE(t.grad_fn()->stream().has_value());
  CHECK(*t.grad_fn()->stream() == side);
  const Tensor g = grad({sum(t)}, {x})[0];
  check_values(g, {3, 3});
}

TEST_CASE("in-place version errors", "[ops][inplace][version]") {
  const Device d = test_device();
  SECTION("saved by mul, then add_ into it") {
    Tensor x = input({1, 2, 3}, {3}, d);
    Tensor w = input({4, 5, 6}, {3}, d);
    Tensor h = mul(x, 1.0);
    Tensor y = mul(h, w);  // saves h for w's gradient
    add_(h, input({1, 1, 1}, {3}, d, false));
    expect_error<Error>([&] { sum(y).backward(); }, {"MulBackward", "version"});
  }
  SECTION("a saved non-grad tensor modified in place") {
    Tensor x = input({1, 2, 3}, {3}, d);
    Tensor c = input({4, 5, 6}, {3}, d, false);
    Tensor y = mul(x, c);
    mul_(c, 2.0);
    expect_error<Error>([&] { grad({sum(y)}, {x}); }, {"MulBackward", "version"});
  }
  SECTION("matmul") {
    Tensor x = input({1, 2, 3, 4}, {2, 2}, d);
    Tensor c = input({1, 0, 0, 1}, {2, 2}, d, false);
    Tensor y = matmul(x, c);
    zero_(c);
    expect_error<Error>([&] { sum(y).backward(); }, {"MatmulBackward", "version"});
  }
  SECTION("index_select's index") {
    Tensor x = input({1, 2, 3}, {3}, d);
    Tensor i = from_vector<int64_t>({0, 2}, {2}, TensorOptions().dtype(DType::kInt64).device(d));
    Tensor y = index_select(x, 0, i);
    fill_(i, 1);
    expect_error<Error>([&] { sum(y).backward(); }, {"IndexSelectBackward", "version"});
  }
  SECTION("mul_ keeps what its own backward needs") {
    Tensor x = input({1, 2, 3}, {3}, d);
    Tensor t = mul(x, 1.0);
    mul_(t, x);
    mul_(t, t);
    const Tensor g = grad({sum(t)}, {x})[0];  // d/dx x^4 = 4x^3
    check_values(g, {4, 32, 108});
  }
}

TEST_CASE("in-place errors", "[ops][inplace][errors]") {
  const Device d = test_device();
  Tensor leaf = input({1, 2}, {2}, d);
  expect_error<Error>(
      [&] {
        add_(leaf, input({1, 1}, {2}, d, false));
      },
      {"add_", "leaf", "requires grad"});
  expect_error<Error>([&] { mul_(leaf, 2.0); }, {"mul_", "leaf"});
  expect_error<Error>([&] { zero_(leaf); }, {"zero_", "leaf"});
  expect_error<Error>([&] { fill_(leaf, 1); }, {"fill_", "leaf"});
  expect_error<Error>([&] { copy_(leaf, input({1, 1}, {2}, d, false)); }, {"copy_", "leaf"});
  {
    NoGradGuard no_grad;  // allowed without grad mode (e.g. an optimizer step)
    add_(leaf, input({1, 1}, {2}, d, false));
    check_values(leaf, {2, 3});
  }
  // A view of a leaf that requires grad cannot be written (the leaf would be); views of
  // other tensors can (tests/ops/view_inplace_test.cc).
  Tensor leaf_part = narrow(leaf, 0, 0, 1);
  Tensor leaf_t = transpose(reshape(leaf, {1, 2}), 0, 1);
  expect_error<Error>([&] { mul_(leaf_part, 2.0); }, {"mul_", "view of a leaf"});
  expect_error<Error>([&] { zero_(leaf_t); }, {"zero_", "view of a leaf"});
  // Several elements on one memory location: no in-place write.
  Tensor expanded = expand(mul(leaf, 1.0), {3, 2});
  expect_error<ValueError>([&] { mul_(expanded, 2.0); }, {"mul_", "expanded", "clone"});

  Tensor a = zeros({2, 3}, f64(d));
  expect_error<ValueError>([&] { add_(a, zeros({4}, f64(d))); }, {"add_", "[2, 3]", "[4]"});
  expect_error<ValueError>(
      [&] {
        add_(a, zeros({3, 2, 3}, f64(d)));
      },
      {"add_", "float64[3, 2, 3]", "float64[2, 3]"});
  expect_error<ValueError>(
      [&] { mul_(a, zeros({3}, TensorOptions().device(d).dtype(DType::kInt64))); },
      {"mul_", "float64", "int64"});
  expect_error<ValueError>([&] { copy_(a, zeros({4}, f64(d))); }, {"copy_", "[4]"});
  Tensor other_device = zeros({3}, f64(Device(d.is_cpu() ? "sim:1" : "cpu")));
  expect_error<DeviceError>([&] { add_(a, other_device); }, {"add_", d.str()});
  Tensor ints = zeros({2}, TensorOptions().dtype(DType::kInt64).device(d));
  expect_error<ValueError>([&] { mul_(ints, 2.0); }, {"mul_", "int64"});
  // Bad input leaves the tensor unchanged.
  Tensor keep = input({1, 2, 3}, {3}, d, false);
  const uint32_t v = keep.version();
  expect_error<ValueError>([&] { add_(keep, zeros({2}, f64(d))); }, {"add_"});
  CHECK(keep.version() == v);
  check_values(keep, {1, 2, 3});
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad
