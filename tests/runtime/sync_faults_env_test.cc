// STREAMGRAD_DROP_SYNC=1 (set by the BUILD target): the process's first cross-stream
// synchronisation call is skipped; a SyncFaultScope replaces the setting while it lives.
#include <catch2/catch.hpp>

#include <memory>

#include "runtime/runtime.h"

namespace streamgrad {
namespace {

// B waits for A, which writes 1 into a zeroed buffer; returns what B read. Two calls:
// the wait and a record_stream.
int wait_then_read() {
  static const Stream a = Stream::create(Device("sim:0"));
  static const Stream b = Stream::create(Device("sim:0"));
  Storage buf = Storage::allocate(sizeof(int), a);
  int* p = static_cast<int*>(buf.data());
  *p = 0;
  auto out = std::make_shared<int>(-1);
  launch(a, {"produce", {}, {}}, [p] { *p = 1; });
  b.wait_stream(a);
  buf.record_stream(b);
  launch(b, {"consume", {}, {}}, [p, out] { *out = *p; });
  b.synchronize();
  a.synchronize();
  return *out;
}

TEST_CASE("STREAMGRAD_DROP_SYNC=K skips the K-th call of the process", "[sync_faults]") {
  SimSchedulerOptions o;
  o.kind = SimSchedulerKind::kDeterministic;
  o.policy = SimPolicy::kAdversarial;
  SimSchedulerScope det(o);
  CHECK(config().sim_devices == 2);  // the environment is read
  CHECK(detail::sync_faults_on());
  CHECK(wait_then_read() == 0);  // call 1, the wait, skipped: B read before A wrote
  {
    SyncFaultScope count;  // replaces the environment's setting: nothing skipped
    CHECK(wait_then_read() == 1);
    CHECK(count.calls().size() == 2);
    CHECK_FALSE(count.dropped());
  }
  CHECK(detail::sync_faults_on());  // the environment's setting is back, at calls 3 and 4
  CHECK(wait_then_read() == 1);
}

}  // namespace
}  // namespace streamgrad
