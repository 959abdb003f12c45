// A user's program built outside the project (tests/consumer/*.sh copy it into a fresh
// Bazel workspace and a fresh CMake project): one training step of a Linear layer with
// SGD must lower the loss, and gradcheck must pass on a custom lambda. gradcheck and the
// engine's Function machinery are symbols no training step references, so a shared
// library that dropped unreferenced objects fails to link or to load here.
//
// Exits 0 and prints "consumer: ok" on success; prints what went wrong and exits 1
// otherwise. Not thread-safe (one main thread).
#include <cstdio>
#include <exception>

#include "streamgrad.h"

using namespace streamgrad;

namespace {

int run() {
  manual_seed(0);
  auto model = std::make_shared<nn::Linear>(8, 1);
  nn::SGD opt(model->parameters(), nn::SGDOptions(0.1));
  Tensor x = randn({32, 8});
  Tensor y = randn({32, 1});

  opt.zero_grad();
  Tensor loss = mse_loss(model->forward(x), y);
  loss.backward();
  opt.step();
  const float before = loss.item<float>();
  const float after = mse_loss(model->forward(x), y).item<float>();
  std::printf("consumer: loss %.6f -> %.6f\n", before, after);
  if (!(after < before)) {
    std::printf("consumer: FAILED: one SGD step did not lower the loss\n");
    return 1;
  }

  const TensorOptions f64 = TensorOptions().dtype(DType::kFloat64);
  GradcheckFn f = [](const TensorList& in) { return TensorList{mul(in[0], in[1])}; };
  TensorList in = {randn({3}, f64).requires_grad_(), randn({3}, f64).requires_grad_()};
  if (!gradcheck(f, in).passed) {
    std::printf("consumer: FAILED: gradcheck of mul\n");
    return 1;
  }
  std::printf("consumer: ok\n");
  return 0;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    std::printf("consumer: FAILED: %s\n", e.what());
    return 1;
  }
}
