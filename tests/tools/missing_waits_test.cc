// The missing-wait catalogue (tools/missing_waits_check.h) on a CI-sized subset: every
// variant of three correct programs, and the join of tools/train's twobranch, with one
// synchronisation call left out. Every variant that matters is caught by the stream
// sanitizer on its first run and gives a wrong value under PCT within the cap; the
// others are redundant (clean in every run, never wrong). The PCT seeds are fixed (0, 1,
// ...), so the counts are the same on every run of this test.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "runtime/runtime.h"
#include "tools/missing_waits_check.h"
#include "tools/missing_waits_programs.h"

namespace streamgrad {
namespace {

constexpr int kSeeds = 20;

ProgramReport check(const char* name, const MissingWaitsOptions& o) {
  const SyncProgram* p = find_sync_program(name);
  REQUIRE(p != nullptr);
  ProgramReport r = check_missing_waits(*p, o);
  for (const std::string& problem : r.problems) FAIL(problem);
  return r;
}

MissingWaitsOptions options() {
  MissingWaitsOptions o;
  o.max_seeds = kSeeds;
  return o;
}

bool is_wait(const VariantReport& v) { return v.call.kind == SyncKind::kWait; }

void require_caught(const VariantReport& v) {
  INFO(v.call.id() << ": " << v.verdict() << ", first wrong: " << v.first_wrong);
  CHECK(v.findings > 0);  // the sanitizer, first run
  CHECK(v.runs_to_wrong >= 1);
  CHECK(v.runs_to_wrong <= kSeeds);
  CHECK(v.verdict() == "caught");
}

void require_redundant(const VariantReport& v) {
  INFO(v.call.id() << ": " << v.verdict());
  CHECK(v.flagged_runs == 0);
  CHECK(v.runs_to_wrong == 0);
  CHECK(v.runs == kSeeds);
  CHECK(v.verdict() == "redundant");
}

TEST_CASE("fork_join: every wait left out is caught; its record_streams are redundant",
          "[missing_waits]") {
  const ProgramReport r = check("fork_join", options());
  // x's accumulator runs on the stream of x's first use (S5), so one record_stream fewer
  // than when it ran on x's creation stream.
  REQUIRE(r.variants.size() == 14);
  int waits = 0;
  for (const VariantReport& v : r.variants) {
    if (is_wait(v)) {
      ++waits;
      require_caught(v);
    } else {
      // x, y1 and y2 live to the end of the program: no block is reused under a stream.
      require_redundant(v);
    }
  }
  CHECK(waits == 8);
  // The join's waits on the two branches (the program's own d.wait_stream(p1 / p2)):
  // the adversarial policy shows the first missing, not the second (the branch forked
  // last runs first there); PCT shows both.
  std::vector<const VariantReport*> join;
  for (const VariantReport& v : r.variants) {
    if (is_wait(v) && v.call.site.rfind("race_programs::fork_join", 0) == 0 &&
        v.call.stream == current_stream(Device("sim:0")).str()) {
      join.push_back(&v);
    }
  }
  REQUIRE(join.size() == 2);
  CHECK(join[0]->adversarial_wrong == 1);
  CHECK(join[1]->adversarial_wrong == 0);
  CHECK(join[1]->runs_to_wrong >= 1);
}

TEST_CASE("both synchronisations of the free-while-read program are needed",
          "[missing_waits]") {
  const ProgramReport r = check("free_while_read_elsewhere_recorded", options());
  REQUIRE(r.variants.size() == 2);
  CHECK(is_wait(r.variants[0]));
  CHECK(r.variants[1].call.kind == SyncKind::kRecordStream);
  for (const VariantReport& v : r.variants) require_caught(v);
}

TEST_CASE("twobranch: the join's waits on either branch are caught", "[missing_waits]") {
  MissingWaitsOptions o = options();
  // The caller's stream waiting in TwoBranch::forward: the join, in each of the 2 steps.
  o.select = [](const SyncCall& c) {
    return c.kind == SyncKind::kWait && c.site.rfind("TwoBranch::forward", 0) == 0 &&
           c.stream == current_stream(Device("sim:0")).str();
  };
  const ProgramReport r = check("twobranch", o);
  REQUIRE(r.variants.size() == 4);
  for (const VariantReport& v : r.variants) require_caught(v);
}

}  // namespace
}  // namespace streamgrad
