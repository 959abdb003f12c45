// Events recorded and stream waits per backward (issue 11): none on a single-stream graph,
// at most one of each per cross-stream edge on the forked graph that
// `sg_bench --case=overlap` times (bench/fork_graph.h). Under the deterministic
// adversarial scheduler, so the gradient also shows that no wait the result needs was
// left out.
#include <catch2/catch.hpp>

#include "bench/fork_graph.h"
#include "tests/engine/engine_test_util.h"

namespace streamgrad {
namespace {

using bench::ForkGraph;
using bench::make_fork_graph;
using bench::SyncCounter;
using testing::adversarial;

// Streams live for the whole process: made once, not per case.
std::vector<Stream> branch_streams(int n) {
  static const std::vector<Stream> all = {Stream::create("sim:0"), Stream::create("sim:0"),
                                          Stream::create("sim:0"), Stream::create("sim:0")};
  return std::vector<Stream>(all.begin(), all.begin() + n);
}

TEST_CASE("a single-stream backward records no event and waits on none", "[sync_counts]") {
  SimSchedulerScope scope(adversarial(0));
  ForkGraph g = make_fork_graph(Device("sim:0"), {}, /*branches=*/4, /*length=*/3, 0);
  CHECK(g.cross_stream_edges == 0);
  SyncCounter count;
  g.loss.backward();
  CHECK(count.events() == 0);
  CHECK(count.waits() == 0);
  CHECK(g.x.grad().item<float>() == 4.0f);
}

TEST_CASE("a forked backward records and waits at most once per cross-stream edge",
          "[sync_counts]") {
  const int branches = GENERATE(1, 2, 4);
  for (uint64_t seed = 0; seed < 10; ++seed) {
    INFO(branches << " branches, seed " << seed);
    SimSchedulerScope scope(adversarial(seed));
    ForkGraph g = make_fork_graph(Device("sim:0"), branch_streams(branches), branches,
                                  /*length=*/3, 0);
    // Per branch: the join (caller's stream) to the branch's last op, and the branch's
    // first op to the view of x on the caller's stream.
    REQUIRE(g.cross_stream_edges == 2 * branches);
    // A seed that differs per run: a branch that read it before the caller's stream
    // wrote it would see a stale value from an earlier run.
    const float s = 2.0f + static_cast<float>(seed);
    Tensor seed_grad = full({}, s, TensorOptions().device("sim:0"));
    SyncCounter count;
    g.loss.backward(seed_grad);
    const uint64_t edges = static_cast<uint64_t>(g.cross_stream_edges);
    CHECK(count.events() <= edges);
    CHECK(count.waits() <= edges);
    CHECK(g.x.grad().item<float>() == s * static_cast<float>(branches));
  }
}

TEST_CASE("the counter sees waits the engine did not make", "[sync_counts]") {
  SimSchedulerScope scope(adversarial(0));
  const Stream a = branch_streams(2)[0], b = branch_streams(2)[1];
  SyncCounter count;
  b.wait_stream(a);  // one event recorded on a, one wait on b
  CHECK(count.events() == 1);
  CHECK(count.waits() == 1);
}

}  // namespace
}  // namespace streamgrad
