// Synchronisation fault injection (runtime/backend/config.h): a SyncFaultScope notes each
// cross-stream wait and record_stream with an id that is the same in every run, and skips
// the one it is told to, so that the program then races (a wrong value under the
// deterministic scheduler, a finding of the stream sanitizer); nothing is noted or skipped
// without a scope.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace streamgrad {
namespace testing {

// Not in an anonymous namespace: the ids name it (the test links with -rdynamic).
// Stream A writes 1 into a zeroed buffer, B waits for A and copies it; B's read is
// returned. The buffer is record_stream'ed on B.
int sync_faults_program() {
  static const Stream a = Stream::create(Device("sim:0"));
  static const Stream b = Stream::create(Device("sim:0"));
  // The last run's buffer, freed after its record_stream, left an event record queued on
  // B: run it, so that B's first task is this run's.
  sim_run_until_idle();
  Storage buf = Storage::allocate(sizeof(int), a);
  int* p = static_cast<int*>(buf.data());
  *p = 0;
  auto out = std::make_shared<int>(-1);
  const MemRange w[] = {{p, sizeof(int)}};
  launch(a, {"produce", {}, w}, [p] { *p = 1; });
  b.wait_stream(a);
  buf.record_stream(b);
  buf.record_stream(a);  // its own stream: not a cross-stream call, not noted
  const MemRange r[] = {{p, sizeof(int)}};
  launch(b, {"consume", r, {}}, [p, out] { *out = *p; });
  b.synchronize();
  a.synchronize();
  return *out;
}

namespace {

SimSchedulerOptions adversarial() {
  SimSchedulerOptions o;
  o.kind = SimSchedulerKind::kDeterministic;
  o.policy = SimPolicy::kAdversarial;
  return o;
}

TEST_CASE("a fault scope notes each wait and record_stream with a stable id", "[sync_faults]") {
  SimSchedulerScope det(adversarial());
  CHECK_FALSE(detail::sync_faults_on());
  std::vector<SyncCall> first;
  for (int run = 0; run < 2; ++run) {
    SyncFaultScope count;
    CHECK(detail::sync_faults_on());
    CHECK(sync_faults_program() == 1);
    const std::vector<SyncCall> calls = count.calls();
    REQUIRE(calls.size() == 2);
    CHECK(calls[0].index == 1);
    CHECK(calls[0].kind == SyncKind::kWait);
    CHECK(calls[1].kind == SyncKind::kRecordStream);
    CHECK(calls[0].stream == calls[1].stream);  // b
    CHECK(calls[0].other == calls[1].other);    // a: the record's stream, the memory's
    CHECK(calls[0].stream != calls[0].other);
    CHECK(calls[0].site.rfind("testing::sync_faults_program", 0) == 0);
    CHECK_FALSE(calls[0].dropped);
    CHECK(calls[0].id() == "wait " + calls[0].stream + " <- " + calls[0].other + " at " +
                               calls[0].site + " #1");
    CHECK(calls[1].id().rfind("record_stream " + calls[1].stream + " (memory of " +
                                  calls[1].other + ") at testing::sync_faults_program",
                              0) == 0);
    CHECK_FALSE(count.dropped());
    if (run == 0) {
      first = calls;
    } else {
      for (size_t i = 0; i < calls.size(); ++i) CHECK(calls[i].id() == first[i].id());
    }
  }
  CHECK_FALSE(detail::sync_faults_on());
}

TEST_CASE("the wait a scope drops is left out: a stale read, a sanitizer finding",
          "[sync_faults]") {
  SimSchedulerScope det(adversarial());
  std::string wait_id;
  {
    SyncFaultScope count;
    sync_faults_program();
    wait_id = count.calls().at(0).id();
  }
  SanitizerSuppression unrelated;  // a process-wide sanitizer must not throw here
  StreamSanitizer san(StreamSanitizer::Mode::kCollect);
  std::vector<SyncCall> seen;
  SyncFaultScope drop(wait_id, [&seen](const SyncCall& c) { seen.push_back(c); });
  CHECK(sync_faults_program() == 0);  // adversarial: the consumer ran first
  CHECK(drop.dropped());
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].dropped);
  CHECK_FALSE(seen[1].dropped);
  REQUIRE(san.findings().size() == 1);
  CHECK(san.findings()[0].current.op == "consume");
  CHECK(san.findings()[0].previous.op == "produce");
}

TEST_CASE("an id that no call has drops nothing; scopes do not nest", "[sync_faults]") {
  SimSchedulerScope det(adversarial());
  SyncFaultScope drop("wait sim:0/s999 <- sim:0/s0 at nowhere #1");
  CHECK(sync_faults_program() == 1);
  CHECK_FALSE(drop.dropped());
  CHECK_THROWS_WITH(SyncFaultScope(), Catch::Contains("another scope is alive"));
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad
