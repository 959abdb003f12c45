// Issue 26 must-show 5: the GPT of tools/train with parallel blocks, attention on one side
// stream of sim:0 and the MLP on another (tools/train_models_gpt.h), trains bit for bit as
// on one stream: under the adversarial and PCT schedulers, which reorder whatever the
// waits leave unordered, and under the threaded scheduler with jitter, clean under the
// stream sanitizer. Training steps run back to back with no host read until the end, so a
// missing wait shows as other bits. The same holds with checkpointed blocks and with
// offloaded activations (issue 28).
#include <catch2/catch.hpp>

#include <optional>
#include <vector>

#include "engine/factories.h"
#include "nn/offload.h"
#include "nn/optim.h"
#include "nn/train_step.h"
#include "ops/ops.h"
#include "runtime/observe/stream_sanitizer.h"
#include "runtime/runtime.h"
#include "runtime/sim/sim.h"
#include "tests/tools/run_bits.h"
#include "tools/train_models_gpt.h"

namespace streamgrad {
namespace {

using testing::check_same_bits;
using testing::RunBits;

enum class Memory { kPlain, kCheckpoint, kOffload };

RunBits train(bool two_streams, int steps = 3, Memory memory = Memory::kPlain) {
  const Device d("sim:0");
  GptConfig c;
  c.vocab = 13;
  c.context = 8;
  c.dim = 16;
  c.heads = 2;
  c.layers = 2;
  c.parallel_blocks = true;
  c.checkpoint = memory == Memory::kCheckpoint;
  manual_seed(7);
  Gpt model(c);
  model.to(d);
  model.use_streams(d, two_streams);
  nn::AdamW opt(model.parameters(), nn::AdamOptions(1e-2).weight_decay(0.01));
  std::vector<Tensor> losses;
  const TensorOptions ids = TensorOptions().dtype(DType::kInt64).device(d);
  for (int s = 0; s < steps; ++s) {
    std::vector<int64_t> x(4 * 8), y(4 * 8);
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<int64_t>((i * 5 + static_cast<size_t>(s) * 3) % 13);
      y[i] = static_cast<int64_t>((i * 7 + 1) % 13);
    }
    nn::Batch b{from_vector(x, {4, 8}, ids), from_vector(y, {4, 8}, ids)};
    nn::OffloadOptions all;
    all.min_bytes = 0;  // these activations are tiny: move every one
    std::optional<nn::OffloadGuard> offload;
    if (memory == Memory::kOffload) offload.emplace(all);
    losses.push_back(nn::train_step(model, opt, b).loss);
  }
  return testing::record(losses, model);
}

TEST_CASE("gpt with attention and MLP on two streams trains bit for bit as on one",
          "[train][gpt][S2][S4]") {
  const RunBits reference = [] {
    SimSchedulerScope one({SimSchedulerKind::kDeterministic, SimPolicy::kRoundRobin, 0, 0});
    return train(/*two_streams=*/false);
  }();
  CHECK(reference.losses.back() < reference.losses.front());  // it does learn
  for (uint64_t seed : {1, 2, 3}) {
    INFO("adversarial seed " << seed);
    SimSchedulerScope adversarial(
        {SimSchedulerKind::kDeterministic, SimPolicy::kAdversarial, seed, 0});
    check_same_bits(train(true), reference);
  }
  for (uint64_t seed : {1, 2, 3}) {
    INFO("pct seed " << seed);
    SimSchedulerScope pct({SimSchedulerKind::kDeterministic, SimPolicy::kPct, seed, 0});
    check_same_bits(train(true), reference);
  }
  SECTION("threaded, with jitter, and clean under the stream sanitizer") {
    SimSchedulerScope threaded({SimSchedulerKind::kThreaded, SimPolicy::kRoundRobin, 11, 50});
    StreamSanitizer san(StreamSanitizer::Mode::kCollect);
    for (int i = 0; i < 3; ++i) check_same_bits(train(true), reference);
    for (const SanitizerFinding& f : san.findings()) FAIL(f.message);
  }
}

// Issue 28 must-show 2: recomputation and offload with forward on two streams.
TEST_CASE("gpt on two streams with checkpointed blocks or offloaded activations trains bit "
          "for bit as the plain run", "[train][gpt][checkpoint][offload]") {
  const RunBits reference = [] {
    SimSchedulerScope one({SimSchedulerKind::kDeterministic, SimPolicy::kRoundRobin, 0, 0});
    return train(/*two_streams=*/false);
  }();
  for (Memory m : {Memory::kCheckpoint, Memory::kOffload}) {
    INFO((m == Memory::kCheckpoint ? "checkpoint" : "offload"));
    for (uint64_t seed : {1, 2}) {
      INFO("adversarial seed " << seed);
      SimSchedulerScope adversarial(
          {SimSchedulerKind::kDeterministic, SimPolicy::kAdversarial, seed, 0});
      check_same_bits(train(true, 3, m), reference);
    }
    SimSchedulerScope threaded({SimSchedulerKind::kThreaded, SimPolicy::kRoundRobin, 11, 50});
    StreamSanitizer san(StreamSanitizer::Mode::kCollect);
    check_same_bits(train(true, 3, m), reference);
    for (const SanitizerFinding& f : san.findings()) FAIL(f.message);
  }
}

}  // namespace
}  // namespace streamgrad
