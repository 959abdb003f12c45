// Deep graphs at scale (issue 9, must-show 2): a chain of N nodes built, differentiated and
// destroyed, or built and dropped without backward; nested backward to depth D. One phase
// per process so that the peak RSS printed belongs to that phase alone.
//
//   deep_graph_bench chain_backward 1000000 [cpu|sim:0]
//   deep_graph_bench chain_drop 1000000 [cpu|sim:0]
//   deep_graph_bench nested 10000 [cpu|sim:0]
//
// Prints one line per timed step: "phase step seconds" and a last "peak_rss_mib" line.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/deep_graphs.h"

namespace streamgrad {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;  // ru_maxrss is in KiB on Linux
}

void report(const char* phase, const char* step, double s) {
  std::printf("%s %s %.3f s\n", phase, step, s);
  std::fflush(stdout);
}

void chain(bool run_backward, int n, Device d, const char* phase) {
  Tensor x = ones({1}, TensorOptions().device(d)).requires_grad_();
  auto t0 = std::chrono::steady_clock::now();
  Tensor y = bench::mul_chain(x, n);
  synchronize(d);
  report(phase, "forward", seconds_since(t0));
  if (run_backward) {
    t0 = std::chrono::steady_clock::now();
    y.backward();
    synchronize(d);
    report(phase, "backward", seconds_since(t0));
  }
  t0 = std::chrono::steady_clock::now();
  y = Tensor();
  report(phase, "destroy", seconds_since(t0));
}

void nested(int depth, Device d) {
  Tensor x = full({1}, static_cast<float>(depth), TensorOptions().device(d)).requires_grad_();
  auto t0 = std::chrono::steady_clock::now();
  sum(bench::NestedBackward::apply({x}, "Nested")[0]).backward();
  synchronize(d);
  const double s = seconds_since(t0);
  report("nested", "backward", s);
  std::printf("nested per_level %.2f us\n", s / depth * 1e6);
}

}  // namespace
}  // namespace streamgrad

int main(int argc, char** argv) {
  using namespace streamgrad;
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s chain_backward|chain_drop|nested N [device]\n", argv[0]);
    return 2;
  }
  const std::string phase = argv[1];
  const int n = std::atoi(argv[2]);
  const Device d(argc > 3 ? argv[3] : "cpu");
  if (phase == "chain_backward") {
    chain(true, n, d, "chain_backward");
  } else if (phase == "chain_drop") {
    chain(false, n, d, "chain_drop");
  } else if (phase == "nested") {
    nested(n, d);
  } else {
    std::fprintf(stderr, "unknown phase %s\n", phase.c_str());
    return 2;
  }
  std::printf("%s peak_rss_mib %.1f\n", phase.c_str(), peak_rss_mib());
  return 0;
}
