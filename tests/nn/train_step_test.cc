// nn::train_step: one step of zero_grad, forward and loss under autocast, backward and the
// optimiser step; with a scaler, the scaler's verdict on the step is what it returns.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <vector>

#include "engine/factories.h"
#include "nn/layers.h"
#include "nn/train_step.h"
#include "ops/ops.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace {

nn::Batch batch_on(Device d) {
  manual_seed(2);
  nn::Batch b;
  b.data = randn({16, 6}, TensorOptions().device(d));
  b.target = from_vector<int64_t>({0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0}, {16},
                                  TensorOptions().dtype(DType::kInt64).device(d));
  return b;
}

std::vector<std::vector<float>> values(const std::vector<Tensor>& ts) {
  std::vector<std::vector<float>> out;
  for (const Tensor& t : ts) out.push_back(t.to_vector<float>());
  return out;
}

TEST_CASE("train_step trains, and returns the loss detached on the device", "[nn][train]") {
  const Device d = GENERATE(Device("cpu"), Device("sim:0"));
  INFO(d);
  manual_seed(1);
  nn::Linear model(6, 3);
  model.to(d);
  nn::SGD opt(model.parameters(), nn::SGDOptions(0.5));
  const nn::Batch b = batch_on(d);
  const nn::StepResult first = nn::train_step(model, opt, b);
  CHECK_FALSE(first.skipped);
  CHECK(first.loss.device() == d);
  CHECK_FALSE(first.loss.requires_grad());
  float last = first.loss.item<float>();
  for (int i = 0; i < 5; ++i) last = nn::train_step(model, opt, b).loss.item<float>();
  CHECK(last < first.loss.item<float>());
}

TEST_CASE("with a scaler, train_step reports the step the scaler skipped", "[nn][train][amp]") {
  const Device d("sim:0");
  manual_seed(1);
  nn::Linear model(6, 3);
  model.to(d);
  nn::SGD opt(model.parameters(), nn::SGDOptions(0.5));
  nn::AmpConfig amp = nn::amp_config("fp16", d);
  // A scale that overflows float32 once multiplied by the loss: every gradient is Inf or
  // NaN, so the scaler skips the step and backs off.
  nn::GradScaler scaler(nn::GradScalerOptions().init_scale(3e38).growth_interval(100));
  amp.scaler = &scaler;
  const nn::Batch b = batch_on(d);
  const auto before = values(model.parameters());
  const nn::StepResult skipped = nn::train_step(model, opt, b, amp);
  CHECK(skipped.skipped);
  CHECK(values(model.parameters()) == before);
  CHECK(scaler.get_scale() < 3e38);
  // Backing off until the scaled gradients are finite: then steps run and are reported so.
  nn::StepResult r = skipped;
  for (int i = 0; i < 200 && r.skipped; ++i) r = nn::train_step(model, opt, b, amp);
  CHECK_FALSE(r.skipped);
  CHECK(values(model.parameters()) != before);
  CHECK(std::isfinite(r.loss.item<float>()));
}

TEST_CASE("amp_config refuses what the modes do not allow", "[nn][train][amp]") {
  CHECK_THROWS_AS(nn::amp_config("fp8", Device("sim:0")), ValueError);
  CHECK_THROWS_AS(nn::amp_config("fp16", Device("cpu")), ValueError);
  CHECK_FALSE(nn::amp_config("off", Device("cpu")).enabled);
  CHECK(nn::amp_config("bf16", Device("cpu")).dtype == DType::kBFloat16);
}

}  // namespace
}  // namespace streamgrad

namespace streamgrad {
namespace {

TEST_CASE("training_loss scores a sequence target position by position", "[nn][train]") {
  manual_seed(4);
  const Tensor logits = randn({2, 3, 5});  // [B, T, classes]
  const Tensor target =
      from_vector<int64_t>({0, 4, 2, 1, 1, 3}, {2, 3}, TensorOptions().dtype(DType::kInt64));
  const Tensor flat = cross_entropy(reshape(logits, {6, 5}), reshape(target, {6}));
  CHECK(nn::training_loss(logits, target).item<float>() == flat.item<float>());
  CrossEntropyOptions sum;
  sum.reduction = Reduction::kSum;
  CHECK(nn::training_loss(logits, target, sum).item<float>() ==
        cross_entropy(reshape(logits, {6, 5}), reshape(target, {6}), sum).item<float>());
  // A class target [B] against logits [B, C] is cross_entropy itself.
  const Tensor labels = from_vector<int64_t>({1, 3}, {2}, TensorOptions().dtype(DType::kInt64));
  const Tensor two = randn({2, 5});
  CHECK(nn::training_loss(two, labels).item<float>() == cross_entropy(two, labels).item<float>());
  REQUIRE_THROWS_WITH(nn::training_loss(randn({6, 5}), target),
                      Catch::Contains("a sequence target [2, 3] needs logits with one more"));
}

}  // namespace
}  // namespace streamgrad
