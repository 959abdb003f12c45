// Pooled events (runtime/backend/event.h): an Event's backend object comes from its device's pool
// and goes back when the Event dies, and reuse never changes what an Event means: a reused
// object's earlier record is never waited for. Also the events_recorded() and
// stream_waits_issued() counters.
#include <catch2/catch.hpp>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/runtime.h"

namespace streamgrad {
namespace {

// The backend object of every Event::record, as observers identify it.
class RecordKeys : public LaunchObserver {
 public:
  RecordKeys() { add_launch_observer(this); }
  ~RecordKeys() override { remove_launch_observer(this); }
  void on_launch(const Stream&, const LaunchDesc&) override {}
  void on_event_record(const void* event, const Stream&) override {
    std::lock_guard<std::mutex> lk(mu_);
    last_ = event;
  }
  const void* last() {
    std::lock_guard<std::mutex> lk(mu_);
    return last_;
  }

 private:
  std::mutex mu_;
  const void* last_ = nullptr;
};

SimSchedulerOptions adversarial() {
  SimSchedulerOptions o;
  o.kind = SimSchedulerKind::kDeterministic;
  o.policy = SimPolicy::kAdversarial;
  return o;
}

TEST_CASE("a destroyed event's backend object is reused by the next event of its device",
          "[event][pool]") {
  RecordKeys keys;
  const Stream s = Stream::create("sim:0");
  const void* first = nullptr;
  const uint64_t created = backend_events_created();
  {
    Event e;
    e.record(s);
    first = keys.last();
  }
  Event again;
  again.record(s);
  CHECK(keys.last() == first);
  for (int i = 0; i < 100; ++i) {
    Event e;
    e.record(s);
    e.record(s);  // a second record reuses the object the event holds
  }
  // At most two objects made: `again`'s and the loop's (pooled after its first pass).
  CHECK(backend_events_created() <= created + 2);
  Event live;  // `again` still holds the pooled object: a live event never shares it
  live.record(s);
  CHECK(keys.last() != first);

  // Pools are per device: sim:1 never gets a sim:0 object.
  const void* on_dev0 = keys.last();
  { Event dying = std::move(live); }
  Event other;
  other.record(Stream::create("sim:1"));
  CHECK(keys.last() != on_dev0);
  s.synchronize();
}

TEST_CASE("assigning over an event gives its object back; moving keeps it", "[event][pool]") {
  RecordKeys keys;
  const Stream s = Stream::create("sim:0");
  Event a, b;
  a.record(s);
  const void* key_a = keys.last();
  b.record(s);
  const void* key_b = keys.last();
  b = std::move(a);  // b's own object goes back to the pool, a's moves into b
  Event c;
  c.record(s);
  CHECK(keys.last() == key_b);
  b.record(s);
  CHECK(keys.last() == key_a);  // b records on the object it took from a
  CHECK_FALSE(a.was_recorded());  // NOLINT(bugprone-use-after-move): moved-from is empty
  s.synchronize();
}

TEST_CASE("a reused event never makes a stream wait for its earlier record",
          "[event][pool]") {
  // The adversarial scheduler runs s1's task (enqueued first) only when nothing else can
  // run: s3 finishes without it unless s3 was made to wait for s1.
  SimSchedulerScope scope(adversarial());
  RecordKeys keys;
  const Stream s1 = Stream::create("sim:0"), s2 = Stream::create("sim:0"),
               s3 = Stream::create("sim:0");
  // Empties sim:0's pool (until a record had to create an object), so that `a` below
  // gets a new object whose only record is a's.
  std::vector<Event> held;
  const uint64_t created = backend_events_created();
  while (backend_events_created() == created) {
    held.emplace_back();
    held.back().record(s2);
  }
  s2.synchronize();  // s2 idle: b's record below is the only task there
  std::vector<std::string> ran;
  const void* old_key = nullptr;
  {
    Event a;
    launch(s1, {"s1_work", {}, {}}, [&ran] { ran.push_back("s1"); });
    a.record(s1);  // still pending when `a` dies
    old_key = keys.last();
  }
  Event b;
  b.block(s3);  // never recorded yet: no wait, whatever object it will take
  b.record(s2);
  REQUIRE(keys.last() == old_key);  // b took a's object, whose record on s1 is pending
  b.block(s3);
  launch(s3, {"s3_work", {}, {}}, [&ran] { ran.push_back("s3"); });
  s3.synchronize();
  CHECK(ran == std::vector<std::string>{"s3"});
  CHECK(b.query());
  s1.synchronize();
  CHECK(ran == std::vector<std::string>{"s3", "s1"});
}

TEST_CASE("a reused event keeps CUDA event semantics on every device", "[event][pool]") {
  for (const char* name : {"cpu", "sim:0", "sim:1"}) {
    INFO(name);
    const Stream s = Stream::create(Device(name));
    { Event warm; warm.record(s); }  // the next event takes a used object
    Event e;
    CHECK_FALSE(e.was_recorded());
    CHECK(e.query());
    e.block(s);  // never recorded: a no-op
    e.record(s);
    e.synchronize();
    CHECK(e.query());
    CHECK(e.device() == Device(name));
  }
}

TEST_CASE("events are created, recorded and dropped from many threads at once",
          "[event][pool]") {
  const Stream s0 = Stream::create("sim:0"), s1 = Stream::create("sim:0");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        Event e;
        e.record(t % 2 ? s0 : s1);
        e.block(t % 2 ? s1 : s0);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  s0.synchronize();
  s1.synchronize();
}

TEST_CASE("events_recorded and stream_waits_issued count device-side synchronisation",
          "[event][counters]") {
  const Stream a = Stream::create("sim:0"), b = Stream::create("sim:0");
  const uint64_t records = events_recorded(), waits = stream_waits_issued();
  Event never;
  never.block(a);  // never recorded: no wait
  CHECK(stream_waits_issued() == waits);
  Event e;
  e.record(a);
  e.block(b);
  CHECK(events_recorded() == records + 1);
  CHECK(stream_waits_issued() == waits + 1);
  b.wait_stream(a);  // one event, one wait
  CHECK(events_recorded() == records + 2);
  CHECK(stream_waits_issued() == waits + 2);
  b.wait_stream(b);  // in order already: nothing
  CHECK(events_recorded() == records + 2);
  CHECK(stream_waits_issued() == waits + 2);
  Event on_cpu;
  on_cpu.record(Stream::default_for(Device("cpu")));
  on_cpu.block(a);  // cpu work is complete once launched: no wait
  e.block(Stream::default_for(Device("cpu")));  // the cpu stream waits on the host
  CHECK(stream_waits_issued() == waits + 2);
  a.synchronize();
  b.synchronize();
}

}  // namespace
}  // namespace streamgrad
