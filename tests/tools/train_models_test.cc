// The models of tools/train and the training step they share with it:
//  - twobranch on two side streams computes the same gradients and parameters, bit for
//    bit, as on one stream, under the adversarial and PCT schedulers (which reorder what
//    the waits leave unordered; bench/MISSING_WAITS.md shows each of its waits needed)
//    and under the threaded scheduler with jitter; the stream sanitizer finds nothing;
//  - training on sim:0 and on cpu gives the same loss curve. sim runs the cpu kernels, so
//    the curves agree to the bit today; the stated tolerance (1e-5 relative) is what
//    float32 reduction order may cost once the devices' kernels differ.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "engine/factories.h"
#include "ops/ops.h"
#include "runtime/runtime.h"
#include "nn/train_step.h"
#include "tests/tools/run_bits.h"
#include "tools/train_models.h"

namespace streamgrad {
namespace {

using testing::check_same_bits;
using testing::RunBits;

// `steps` training steps on real batches (the installed Fashion-MNIST) from the data
// loader, whose hand-off to the caller's stream is device-side only, and no host read
// until the end: a stream that fails to wait for another sees unwritten memory.
RunBits train(const std::string& model_name, Device d, int steps, bool two_streams = false,
              bool checkpoint = false, std::vector<std::vector<float>>* buffers = nullptr) {
  // Read once, and only the first examples: every run here takes at most a few hundred.
  static const std::shared_ptr<nn::ImageDataset> data = nn::load_fashion_mnist(
      "/usr/share/datasets/fashion-mnist", /*train=*/true, /*normalize=*/true, 2048);
  nn::DataLoader loader(data, nn::DataLoaderOptions().batch_size(32).seed(5).device(d));
  manual_seed(3);
  std::shared_ptr<nn::Module> model = make_model(model_name, {}, checkpoint);
  model->to(d);
  if (auto* two = dynamic_cast<TwoBranch*>(model.get())) two->use_streams(d, two_streams);
  nn::Adam opt(model->parameters(), nn::AdamOptions(1e-3));
  std::vector<Tensor> losses;
  loader.start_epoch(0);
  for (nn::Batch b; static_cast<int>(losses.size()) < steps && loader.next(&b);) {
    losses.push_back(nn::train_step(*model, opt, b).loss);
  }
  RunBits bits = testing::record(losses, *model);
  if (buffers != nullptr) {
    for (const auto& [name, b] : model->named_buffers()) {
      buffers->push_back(to(b, DType::kFloat32).to_vector<float>());
    }
  }
  return bits;
}

TEST_CASE("twobranch on two streams trains bit for bit as on one stream", "[train][S2][S4]") {
  const RunBits reference = [] {
    SimSchedulerScope one_at_a_time({SimSchedulerKind::kDeterministic, SimPolicy::kRoundRobin, 0, 0});
    return train("twobranch", Device("sim:0"), 3, /*two_streams=*/false);
  }();
  for (uint64_t seed : {1, 2, 3}) {
    INFO("adversarial seed " << seed);
    SimSchedulerScope adversarial({SimSchedulerKind::kDeterministic, SimPolicy::kAdversarial, seed, 0});
    check_same_bits(train("twobranch", Device("sim:0"), 3, /*two_streams=*/true), reference);
  }
  // Adversarial runs the newest work first, so it never reorders the join after the conv
  // branch (forked last; runtime/sim/sim.h): PCT seeds reach orders it does not.
  for (uint64_t seed : {1, 2, 3}) {
    INFO("pct seed " << seed);
    SimSchedulerScope pct({SimSchedulerKind::kDeterministic, SimPolicy::kPct, seed, 0});
    check_same_bits(train("twobranch", Device("sim:0"), 3, /*two_streams=*/true), reference);
  }
  SECTION("threaded, with jitter, and clean under the stream sanitizer") {
    SimSchedulerScope threaded({SimSchedulerKind::kThreaded, SimPolicy::kRoundRobin, 11, 50});
    StreamSanitizer san(StreamSanitizer::Mode::kCollect);
    for (int i = 0; i < 3; ++i) {
      check_same_bits(train("twobranch", Device("sim:0"), 3, /*two_streams=*/true), reference);
    }
    for (const SanitizerFinding& f : san.findings()) FAIL(f.message);
  }
}

TEST_CASE("checkpointed mlp, cnn and resnet train bit for bit as the plain ones, in less "
          "memory", "[train][checkpoint]") {
  const std::string name = GENERATE(as<std::string>{}, "mlp", "cnn", "resnet");
  INFO(name);
  const Device sim("sim:0");
  // One stream's work in order: the same kernels in the same order give the same bits.
  SimSchedulerScope one_at_a_time({SimSchedulerKind::kDeterministic, SimPolicy::kRoundRobin, 0, 0});
  std::vector<std::vector<float>> plain_buffers, ck_buffers;
  reset_peak_stats(sim);
  const RunBits plain = train(name, sim, 2, false, /*checkpoint=*/false, &plain_buffers);
  const int64_t plain_peak = memory_stats(sim).allocated_bytes.peak;
  reset_peak_stats(sim);
  const RunBits ck = train(name, sim, 2, false, /*checkpoint=*/true, &ck_buffers);
  const int64_t ck_peak = memory_stats(sim).allocated_bytes.peak;
  check_same_bits(ck, plain);
  CHECK(ck_buffers == plain_buffers);  // batch norm's statistics moved once per step
  // The mlp's peak is its weights, gradients and Adam's state (a batch's activations are
  // 32 KiB of its 4.4 MiB): it keeps its peak; the convolutional models' activations dominate.
  if (name != "mlp") CHECK(ck_peak < plain_peak);
  WARN(name << " peak allocated: plain " << plain_peak << " B, checkpointed " << ck_peak << " B");
  CHECK_THROWS_WITH(make_model("twobranch", {}, true), Catch::Contains("no checkpointed form"));
}

TEST_CASE("training on sim:0 and on cpu gives the same loss curve", "[train]") {
  const std::string name = GENERATE(as<std::string>{}, "mlp", "cnn");
  INFO(name);
  const std::vector<float> cpu = train(name, Device("cpu"), 12).losses;
  const std::vector<float> sim = train(name, Device("sim:0"), 12).losses;
  REQUIRE(cpu.size() == sim.size());
  double worst = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    worst = std::max(worst, std::abs(double{cpu[i]} - sim[i]) / std::abs(double{cpu[i]}));
  }
  INFO("worst relative difference " << worst);
  CHECK(worst <= 1e-5);
  CHECK(cpu.back() < 0.8 * cpu.front());  // it does learn
}

}  // namespace
}  // namespace streamgrad
