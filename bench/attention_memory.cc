// Issue 26, must-show 3: memory of a GPT training step (bench/gpt_step.h: 2 pre-norm
// blocks, dim 128, 4 heads) at contexts 256 and 1024, with the fused causal attention
// (scaled_dot_product_attention, which keeps the log-sum-exp per row for backward) and
// with the attention composed from matmul, mask, softmax and matmul (which keeps the
// T x T probabilities). For each it prints the bytes live after the forward (what backward
// keeps, parameters and the batch included), the peak over forward and backward, and the
// step's wall time, from the cpu caching allocator's allocated-bytes statistics.
//
//   bazel run -c opt //bench:attention_memory [-- --batch=4 --contexts=256,1024]
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/gpt_step.h"

ABSL_FLAG(int64_t, batch, 4, "sequences per step");
ABSL_FLAG(std::string, contexts, "256,1024", "comma-separated contexts to measure");

namespace streamgrad {
namespace bench {
namespace {

struct Figures {
  int64_t after_forward = 0, peak = 0;
  double ms = 0;
};

Figures measure(int64_t context, int64_t batch, bool fused) {
  GptConfig g;
  g.context = context;
  g.batch = batch;
  const GptInputs in = gpt_inputs(g);
  const Device cpu("cpu");
  Figures f;
  for (int rep = 0; rep < 2; ++rep) {  // the second step, once the cache holds its blocks
    for (const Tensor& p : in.params) p.set_grad(Tensor());
    const int64_t before = memory_stats(cpu).allocated_bytes.current;
    reset_peak_stats(cpu);
    const auto t0 = std::chrono::steady_clock::now();
    Tensor loss = gpt_loss(g, in, fused);
    f.after_forward = memory_stats(cpu).allocated_bytes.current - before;
    loss.backward();
    loss = Tensor();
    f.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    f.peak = memory_stats(cpu).allocated_bytes.peak - before;
  }
  return f;
}

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

}  // namespace
}  // namespace bench
}  // namespace streamgrad

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  using namespace streamgrad::bench;  // NOLINT: a benchmark's main
  const int64_t batch = absl::GetFlag(FLAGS_batch);
  std::printf("GPT step (2 blocks, dim 128, 4 heads), batch %lld, cpu, after the forward / peak "
              "over forward+backward, MiB (beyond parameters and inputs)\n",
              static_cast<long long>(batch));
  std::printf("%8s  %-10s %14s %12s %10s\n", "context", "attention", "after forward", "peak",
              "step ms");
  for (const absl::string_view c : absl::StrSplit(absl::GetFlag(FLAGS_contexts), ',')) {
    int64_t t = 0;
    if (!absl::SimpleAtoi(c, &t) || t < 1) {
      std::fprintf(stderr, "attention_memory: bad --contexts entry '%s'\n", std::string(c).c_str());
      return 2;
    }
    for (const bool fused : {true, false}) {
      const Figures f = measure(t, batch, fused);
      std::printf("%8lld  %-10s %14.2f %12.2f %10.1f\n", static_cast<long long>(t),
                  fused ? "fused" : "composed", mib(f.after_forward), mib(f.peak), f.ms);
    }
  }
  return 0;
}
