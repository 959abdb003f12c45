// Issue 24, item 14: an operator built from other operators validates its own arguments,
// so that bad input is reported under the op the user called (not add inside mse_loss,
// gather inside cross_entropy, index_select inside embedding), with the arguments'
// shapes, dtypes and devices. One bad call per composite of ops/, on cpu and sim:0 (where
// a bad class or embedding index is found on the device and reported at the next
// synchronisation).
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace {

using testing::random_input;
using testing::test_device;

Tensor ints(const std::vector<int64_t>& v, Shape shape, Device d) {
  return from_vector<int64_t>(v, shape, TensorOptions().dtype(DType::kInt64).device(d));
}

// Runs `call` (and synchronises `d`, where asynchronous errors surface) and returns the
// message of the streamgrad::Error it throws.
std::string error_of(const std::function<void()>& call, Device d) {
  try {
    call();
    synchronize(d);
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("expected an error");
  return "";
}

struct BadCall {
  const char* op;
  std::function<void()> call;
  std::vector<std::string> mentions;  // besides "<op>: " at the start
};

TEST_CASE("every composite op reports bad input under its own name", "[ops][errors]") {
  const Device d = test_device();
  const Device other(d.is_cpu() ? "sim:0" : "cpu");
  const std::string on = " on " + d.str();
  const Tensor x = random_input({3, 4}, d, 1);
  const Tensor x_elsewhere = random_input({3, 4}, other, 2);
  const Tensor labels = ints({1, 4, 0}, {3}, d);  // 4 is not a class of [3, 4]
  const Tensor counts = ints({1, 2, 3}, {3}, d);
  const Tensor image = random_input({1, 1, 4, 4}, d, 3);
  Pool2dParams wide_pad;
  wide_pad.kernel_size = {2, 2};
  wide_pad.padding = {2, 2};
  const std::vector<BadCall> calls = {
      {"sub", [&] { sub(counts, counts); }, {"int64[3]" + on}},
      {"sub", [&] { sub(x, x_elsewhere); }, {"float64[3, 4]" + on, other.str()}},
      {"sub", [&] { sub(Tensor(), 1.0); }, {"undefined"}},
      {"mse_loss", [&] { mse_loss(x, x_elsewhere); }, {"float64[3, 4]" + on, other.str()}},
      {"mse_loss", [&] { mse_loss(counts, counts); }, {"int64[3]" + on}},
      {"mse_loss", [&] { mse_loss(x, random_input({5}, d, 4)); }, {"[3, 4]", "[5]"}},
      {"nll_loss", [&] { nll_loss(x, labels); },
       {"int64[3]" + on, "[3, 4]", "element 1", "is 4", "out of range 0..3"}},
      {"nll_loss", [&] { nll_loss(x, ints({0}, {1}, d)); }, {"int64[1]" + on}},
      // Unbatched: the arguments as passed, [4] and a 0-dim target.
      {"nll_loss", [&] { nll_loss(random_input({4}, d, 14), ints({7}, {}, d)); },
       {"int64[]" + on, "input [4]", "is 7"}},
      {"cross_entropy", [&] { cross_entropy(x, labels); },
       {"int64[3]" + on, "element 1", "out of range"}},
      // ignore_index is allowed; -1 is not a class.
      {"cross_entropy", [&] { cross_entropy(x, ints({-100, 2, -1}, {3}, d)); },
       {"element 2", "is -1", "ignore_index -100"}},
      {"cross_entropy", [&] { cross_entropy(x, ints({0, 1, 2}, {3}, other)); },
       {"float64[3, 4]" + on, other.str()}},
      {"embedding", [&] { embedding(x, labels); },
       {"int64[3]" + on, "float64[3, 4]", "element 1", "is 4", "out of range 0..2"}},
      {"embedding", [&] { embedding(x, ints({0}, {1}, other)); }, {other.str()}},
      {"argmax", [&] { argmax(counts, 0); }, {"int64[3]" + on}},
      {"argmax", [&] { argmax(random_input({2, 0}, d, 5), 1); }, {"[2, 0]", "empty"}},
      {"log_softmax", [&] { log_softmax(x, 2); }, {"dimension 2"}},
      {"softmax", [&] { softmax(counts, 0); }, {"int64[3]"}},
      {"dropout", [&] { dropout(x, 2.0); }, {"probability 2"}},
      {"flatten", [&] { flatten(x, 1, 0); }, {"[3, 4]"}},
      {"linear", [&] { linear(x, x_elsewhere); }, {other.str()}},
      {"conv2d", [&] { conv2d(image, random_input({1, 1, 5, 5}, d, 6)); }, {"does not fit"}},
      // Unbatched: the message shows the input as passed, not as batched inside.
      {"conv2d", [&] { conv2d(random_input({3, 4, 4}, d, 11), random_input({2, 2, 1, 1}, d, 12)); },
       {"float64[3, 4, 4]" + on}},
      {"unfold", [&] { unfold(random_input({1, 2, 2}, d, 13), {3, 3}); }, {"float64[1, 2, 2]" + on}},
      {"conv2d_input_grad", [&] { conv2d_input_grad({1, 1, 4, 4}, random_input({1, 1, 2, 2}, d, 7), image); },
       {"grad_output"}},
      {"conv2d_weight_grad", [&] { conv2d_weight_grad(image, {1, 1, 2, 2}, image); },
       {"grad_output"}},
      {"unfold", [&] { unfold(x, {2, 2}); }, {"[3, 4]"}},
      {"fold", [&] { fold(x, {2, 2}, {2, 2}); }, {"float64[3, 4]"}},
      {"max_pool2d", [&] { max_pool2d(image, wide_pad); }, {"half the kernel"}},
      {"avg_pool2d", [&] { avg_pool2d(image, wide_pad); }, {"half the kernel"}},
      {"batch_norm", [&] { batch_norm(x, random_input({3}, d, 8), Tensor(), Tensor(), Tensor(), true); },
       {"[4]"}},
      {"cat", [&] { cat({x, counts}); }, {"int64[3]" + on}},
      {"stack", [&] { stack({x, random_input({4, 3}, d, 9)}); }, {"[4, 3]"}},
      {"where", [&] { where(x, x, x); }, {"bool"}},
      {"masked_fill", [&] { masked_fill(x, counts, 1.0); }, {"bool"}},
      {"scatter_add", [&] { scatter_add(x, 1, ints({0, 5}, {1, 2}, d), x); }, {"out of range"}},
      {"gather", [&] { gather(x, 1, ints({0, 9}, {1, 2}, d)); }, {"out of range"}},
  };
  for (const BadCall& c : calls) {
    const std::string message = error_of(c.call, d);
    INFO("calling " << c.op << " on " << d << ": " << message);
    CHECK(message.rfind(std::string(c.op) + ":", 0) == 0);
    for (const std::string& m : c.mentions) {
      INFO("expected to mention: " << m);
      CHECK(message.find(m) != std::string::npos);
    }
  }
}

TEST_CASE("after a bad class index is reported the device works on", "[ops][errors]") {
  const Device d = test_device();
  const Tensor x = random_input({2, 3}, d, 10);
  CHECK(error_of([&] { cross_entropy(x, ints({0, 3}, {2}, d)); }, d).rfind("cross_entropy:", 0) ==
        0);
  // The next call on the same stream works and sees no stale error.
  const Tensor loss = cross_entropy(x, ints({0, 2}, {2}, d));
  synchronize(d);
  CHECK(std::isfinite(loss.item<double>()));
}

}  // namespace
}  // namespace streamgrad
