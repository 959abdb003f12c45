// The PCT policy of the deterministic sim scheduler (runtime/sim/sim.h):
//  - a fork-join whose join omits its wait on one branch (issue 24, item 23) is a wrong
//    value under PCT within a few seeds, for either branch, while the adversarial policy
//    never shows the omission of the branch forked last (the limit its comment states);
//  - a seed gives the same interleaving on every run of a program, whatever streams the
//    process made before;
//  - the options are checked.
#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "runtime/runtime.h"

namespace streamgrad {
namespace {

SimSchedulerOptions deterministic(SimPolicy policy, uint64_t seed, int depth = 2,
                                  uint64_t steps = 20) {
  SimSchedulerOptions o;
  o.kind = SimSchedulerKind::kDeterministic;
  o.policy = policy;
  o.seed = seed;
  o.pct_depth = depth;
  o.pct_steps = steps;
  return o;
}

// Host-side work on a sim stream that reads `in` (or nothing) and writes `*out`.
void kernel(const Stream& s, const char* name, const float* in, float* out, float scale,
            float add) {
  const MemRange r[] = {{in, sizeof(float)}};
  const MemRange w[] = {{out, sizeof(float)}};
  launch(s, {name, in != nullptr ? absl::Span<const MemRange>(r) : absl::Span<const MemRange>(),
             w},
         [in, out, scale, add] { *out = (in != nullptr ? *in : 0.0f) * scale + add; });
}

// Two branches forked from `main` onto side streams and joined on main, as a user writes
// a two-branch forward: x = 1 on main; branch i computes x * (i + 2) in three kernels;
// main waits for the branches (but not for branch `omitted`, when it is 0 or 1) and adds
// them. Returns the join's value: 5 when every wait is there.
float fork_join(int omitted) {
  static const Stream main = Stream::create(Device("sim:0"));
  static const Stream side[2] = {Stream::create(Device("sim:0")), Stream::create(Device("sim:0"))};
  // Fresh zeros, so a read that overtakes its producer sees 0, not last run's value. No
  // work is queued: the previous run synchronised.
  Storage buf = Storage::allocate(8 * sizeof(float), main);
  std::memset(buf.data(), 0, 8 * sizeof(float));
  float* v = static_cast<float*>(buf.data());
  float* x = v;
  float* y[2] = {v + 1, v + 2};
  float* t[2] = {v + 3, v + 4};
  float* z = v + 5;
  kernel(main, "x", nullptr, x, 0, 1);
  for (int i = 0; i < 2; ++i) {
    side[i].wait_stream(main);
    buf.record_stream(side[i]);
    kernel(side[i], "branch_a", x, t[i], 1, 0);
    kernel(side[i], "branch_b", t[i], t[i], static_cast<float>(i + 2), 0);
    kernel(side[i], "branch_c", t[i], y[i], 1, 0);
  }
  for (int i = 0; i < 2; ++i) {
    if (i != omitted) main.wait_stream(side[i]);
  }
  const MemRange r[] = {{y[0], 2 * sizeof(float)}};
  const MemRange w[] = {{z, sizeof(float)}};
  launch(main, {"join", r, w}, [y0 = y[0], y1 = y[1], z] { *z = *y0 + *y1; });
  auto out = std::make_shared<float>(-1);
  launch(main, {"read", w, {}}, [z, out] { *out = *z; });
  main.synchronize();
  side[0].synchronize();
  side[1].synchronize();
  return *out;
}

// How many of seeds 0..seeds-1 show a wrong join.
int wrong_joins(SimPolicy policy, int omitted, int seeds, int depth = 2) {
  SanitizerSuppression races_on_purpose;
  int wrong = 0;
  for (int seed = 0; seed < seeds; ++seed) {
    SimSchedulerScope scope(deterministic(policy, static_cast<uint64_t>(seed), depth));
    if (fork_join(omitted) != 5.0f) ++wrong;
  }
  return wrong;
}

TEST_CASE("pct: with every wait the join is right under every seed", "[sim][scheduler][pct]") {
  const int depth = GENERATE(1, 2, 3);
  INFO("depth " << depth);
  CHECK(wrong_joins(SimPolicy::kPct, /*omitted=*/-1, 100, depth) == 0);
  SimSchedulerScope scope(deterministic(SimPolicy::kPct, 0, depth));
  fork_join(-1);
  CHECK(sim_steps_run() == 17);  // 9 kernels, 4 records and 4 waits: k = 20 covers it
}

TEST_CASE("pct shows a join that omits the wait on either branch within 4 seeds",
          "[sim][scheduler][pct]") {
  // The omission needs only "the join ran before the branch's last kernel": depth 1, so
  // with pct_depth 1 a run shows it with probability >= 1/3 (the branch's stream drawn
  // lowest of the three). 10 seeds all miss with probability <= (2/3)^10 < 2 %. The counts
  // are those of seeds 0..9: deterministic, and near 1/3 (over seeds 0..99: 36 and 34).
  CHECK(wrong_joins(SimPolicy::kPct, /*omitted=*/0, 10, /*depth=*/1) == 5);
  CHECK(wrong_joins(SimPolicy::kPct, /*omitted=*/1, 10, /*depth=*/1) == 3);
  CHECK(wrong_joins(SimPolicy::kPct, /*omitted=*/0, 4, /*depth=*/1) >= 1);  // seed 3
  CHECK(wrong_joins(SimPolicy::kPct, /*omitted=*/1, 1, /*depth=*/1) == 1);  // seed 0
  // The default depth 2, one change point among the first 20 steps (the run takes 17):
  // no bound is claimed for a shallower bug, and it is shown about as often.
  CHECK(wrong_joins(SimPolicy::kPct, /*omitted=*/0, 10, /*depth=*/2) == 3);
  CHECK(wrong_joins(SimPolicy::kPct, /*omitted=*/1, 10, /*depth=*/2) == 4);
  CHECK(wrong_joins(SimPolicy::kPct, /*omitted=*/0, 2, /*depth=*/2) == 1);  // seed 1
  CHECK(wrong_joins(SimPolicy::kPct, /*omitted=*/1, 1, /*depth=*/2) == 1);  // seed 0
}

TEST_CASE("adversarial never shows a join that omits the wait on the branch forked last",
          "[sim][scheduler][pct]") {
  // The limit runtime/sim/sim.h states: the newest branch runs first, so it is complete
  // when the join, held back by its wait on the other branch, runs. The omission of the
  // first branch is shown on every seed.
  CHECK(wrong_joins(SimPolicy::kAdversarial, /*omitted=*/1, 20) == 0);
  CHECK(wrong_joins(SimPolicy::kAdversarial, /*omitted=*/0, 20) == 20);
}

// The order in which tasks on three streams ran; the streams are made for this call.
std::vector<int> interleaving(const SimSchedulerOptions& o) {
  const std::vector<Stream> streams{Stream::create(Device("sim:0")),
                                    Stream::create(Device("sim:0")),
                                    Stream::create(Device("sim:1"))};
  SimSchedulerScope scope(o);
  auto order = std::make_shared<std::vector<int>>();
  for (int i = 0; i < 12; ++i) {
    launch(streams[i % 3], {"record_order", {}, {}}, [order, i] { order->push_back(i); });
  }
  sim_run_until_idle();
  CHECK(sim_steps_run() == 12);
  return *order;
}

TEST_CASE("pct: a seed gives the same interleaving every run; seeds differ",
          "[sim][scheduler][pct]") {
  std::set<std::vector<int>> seen;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    const std::vector<int> first = interleaving(deterministic(SimPolicy::kPct, seed, 3, 12));
    // The second run's streams are new, made after more (idle) streams than the first's
    // were: priorities are drawn as streams get work, so the program sees the same ones.
    CHECK(interleaving(deterministic(SimPolicy::kPct, seed, 3, 12)) == first);
    seen.insert(first);
  }
  CHECK(seen.size() > 1);
}

TEST_CASE("pct without change points runs each stream to completion in priority order",
          "[sim][scheduler][pct]") {
  // Depth 1: no change point, so the stream of highest priority runs all its tasks, then
  // the next: the order is three runs of four tasks each.
  const std::vector<int> order = interleaving(deterministic(SimPolicy::kPct, 5, 1));
  REQUIRE(order.size() == 12);
  for (size_t i = 0; i < order.size(); i += 4) {
    for (size_t j = i; j < i + 4; ++j) CHECK(order[j] % 3 == order[i] % 3);
  }
}

TEST_CASE("pct options are checked", "[sim][scheduler][pct]") {
  CHECK(parse_sim_policy("pct") == SimPolicy::kPct);
  CHECK(std::string(sim_policy_name(SimPolicy::kPct)) == "pct");
  CHECK_THROWS_WITH(set_sim_scheduler(deterministic(SimPolicy::kPct, 0, 0)),
                    Catch::Contains("pct_depth must be in [1, 64], got 0"));
  CHECK_THROWS_WITH(set_sim_scheduler(deterministic(SimPolicy::kPct, 0, 2, 0)),
                    Catch::Contains("pct_steps must be at least 1"));
  CHECK(sim_scheduler().policy != SimPolicy::kPct);  // left as it was
}

}  // namespace
}  // namespace streamgrad
