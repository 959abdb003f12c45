// The trace recorder writes Chrome trace JSON: one lane per stream with the spans of the
// work it ran, record/wait marks joined by flow arrows, host synchronisations on host
// lanes. The checks parse the JSON strictly and compare it with what the program did.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "runtime/runtime.h"
#include "tests/runtime/test_devices.h"

namespace streamgrad {
namespace {

using nlohmann::json;

struct Parsed {
  json doc;
  std::vector<const json*> events;

  std::vector<const json*> with(const std::string& ph, const std::string& name = "") const {
    std::vector<const json*> out;
    for (const json* e : events) {
      if (e->at("ph").get<std::string>() == ph &&
          (name.empty() || e->at("name").get<std::string>() == name)) {
        out.push_back(e);
      }
    }
    return out;
  }
  // The pid of the process named `device` and the tid of the lane named `lane`.
  int pid_of(const std::string& device) const {
    for (const json* e : with("M", "process_name")) {
      if (e->at("args").at("name").get<std::string>() == device) return e->at("pid").get<int>();
    }
    FAIL("no process lane named " << device);
    return -1;
  }
  bool has_lane(int pid, int tid) const {
    for (const json* e : with("M", "thread_name")) {
      if (e->at("pid").get<int>() == pid && e->at("tid").get<int>() == tid) return true;
    }
    return false;
  }
};

// A malformed document throws json::parse_error, and a missing key or a value of the wrong
// type throws from at() or get(): each fails the test rather than reading as null.
Parsed parse(const std::string& text) {
  Parsed p;
  p.doc = json::parse(text);
  REQUIRE(p.doc.at("traceEvents").is_array());
  for (const json& e : p.doc.at("traceEvents")) p.events.push_back(&e);
  return p;
}

// Times are written with three decimals (ns): a span's ts + dur may miss its end by one.
constexpr double kRounding = 2e-3;

bool on_lane(const json& e, int pid, const Stream& s) {
  return e.at("pid").get<int>() == pid && e.at("tid").get<int>() == s.id();
}

TEST_CASE("a record/wait across streams is a flow from the producer's lane to the waiter's",
          "[trace]") {
  const Stream a = Stream::create("sim:0"), b = Stream::create("sim:0");
  Storage buf = Storage::allocate(64, a);
  TraceRecorder trace;
  const MemRange r[] = {{buf.data(), 64}};
  sleep(a, 300);
  launch(a, {"producer", {}, r}, [] {});
  b.wait_stream(a);
  launch(b, {"consumer", r, {}}, [] {});
  synchronize("sim:0");

  const Parsed p = parse(trace.chrome_json());
  const int pid = p.pid_of("sim:0");
  CHECK(p.has_lane(pid, a.id()));
  CHECK(p.has_lane(pid, b.id()));
  CHECK(p.pid_of("host") == 0);

  const auto sleeps = p.with("X", "sleep");
  const auto producers = p.with("X", "producer");
  const auto consumers = p.with("X", "consumer");
  REQUIRE(sleeps.size() == 1);
  REQUIRE(producers.size() == 1);
  REQUIRE(consumers.size() == 1);
  CHECK(on_lane(*sleeps[0], pid, a));
  CHECK(on_lane(*producers[0], pid, a));
  CHECK(on_lane(*consumers[0], pid, b));
  CHECK(sleeps[0]->at("cat").get<std::string>() == "sleep");
  CHECK(sleeps[0]->at("dur").get<double>() >= 300);  // measured around the work itself
  const double sleep_end = sleeps[0]->at("ts").get<double>() + sleeps[0]->at("dur").get<double>();
  // Measured, not derived: the consumer really started after the producer's stream.
  CHECK(consumers[0]->at("ts").get<double>() >= sleep_end - kRounding);
  CHECK(consumers[0]->at("args").at("stream").get<std::string>() == b.str());

  const auto starts = p.with("s", "event");
  const auto finishes = p.with("f", "event");
  REQUIRE(starts.size() == 1);
  REQUIRE(finishes.size() == 1);
  CHECK(starts[0]->at("id").get<int>() == finishes[0]->at("id").get<int>());
  CHECK(on_lane(*starts[0], pid, a));
  CHECK(on_lane(*finishes[0], pid, b));
  CHECK(finishes[0]->at("bp").get<std::string>() == "e");
  CHECK(starts[0]->at("ts").get<double>() >= sleep_end - kRounding);
  CHECK(finishes[0]->at("ts").get<double>() >= starts[0]->at("ts").get<double>());
  // Marks sit at the flow's ends.
  REQUIRE(p.with("X", "record").size() == 1);
  REQUIRE(p.with("X", "wait").size() == 1);
  CHECK(p.with("X", "wait")[0]->at("ts").get<double>() == finishes[0]->at("ts").get<double>());
  CHECK(p.doc.at("otherData").at("incomplete_spans").get<int>() == 0);
}

TEST_CASE("spans on one lane never overlap: a stream runs its work in order", "[trace]") {
  const SimSchedulerOptions threaded{SimSchedulerKind::kThreaded, SimPolicy::kRoundRobin, 7, 20};
  SimSchedulerScope scope(threaded);
  const Stream s = Stream::create("sim:1");
  TraceRecorder trace;
  for (int i = 0; i < 50; ++i) launch(s, {"step", {}, {}}, [] {});
  s.synchronize();
  const Parsed p = parse(trace.chrome_json());
  const auto steps = p.with("X", "step");
  REQUIRE(steps.size() == 50);
  double last_end = -1;
  for (const json* e : steps) {
    CHECK(e->at("ts").get<double>() >= last_end - kRounding);
    CHECK(e->at("dur").get<double>() >= 0);
    CHECK(e->at("ts").get<double>() >= e->at("args").at("enqueued_us").get<double>());
    last_end = e->at("ts").get<double>() + e->at("dur").get<double>();
  }
  // The host waited for the stream: a host mark with a flow from the stream's lane.
  const auto syncs = p.with("X", "synchronize " + s.str());
  REQUIRE(syncs.size() == 1);
  CHECK(syncs[0]->at("pid").get<int>() == 0);
  CHECK(syncs[0]->at("ts").get<double>() >= last_end - kRounding);
  REQUIRE(p.with("s", "sync").size() == 1);
  CHECK(on_lane(*p.with("s", "sync")[0], p.pid_of("sim:1"), s));
}

TEST_CASE("work that has not run is left out and counted as incomplete", "[trace]") {
  SimSchedulerScope scope(SimSchedulerOptions{SimSchedulerKind::kDeterministic,
                                              SimPolicy::kRoundRobin, 0, 0});
  const Stream s = Stream::create("sim:0");
  TraceRecorder trace;
  launch(s, {"queued", {}, {}}, [] {});
  Parsed p = parse(trace.chrome_json());
  CHECK(p.with("X", "queued").empty());
  CHECK(p.doc.at("otherData").at("incomplete_spans").get<int>() == 1);
  CHECK(trace.span_count() == 1);
  s.synchronize();
  p = parse(trace.chrome_json());
  CHECK(p.with("X", "queued").size() == 1);
  CHECK(p.doc.at("otherData").at("incomplete_spans").get<int>() == 0);
}

TEST_CASE("tracing leaves a deterministic schedule unchanged", "[trace]") {
  // A racy program (no wait between the streams): what runs when depends only on the
  // interleaving the adversarial scheduler picks, which must not move under tracing, and
  // tracing must add no task to the streams (the same number of scheduler steps).
  struct Run {
    std::vector<int> order;
    int steps = 0;
  };
  auto racy = [](bool traced) {
    SimSchedulerScope scope(SimSchedulerOptions{SimSchedulerKind::kDeterministic,
                                                SimPolicy::kAdversarial, 5, 0});
    const Stream a = Stream::create("sim:0"), b = Stream::create("sim:0");
    std::unique_ptr<TraceRecorder> trace;
    if (traced) trace = std::make_unique<TraceRecorder>();
    Run run;
    for (int i = 0; i < 5; ++i) {
      launch(a, {"a", {}, {}}, [&run, i] { run.order.push_back(i); });
      sleep(b, 1);
      launch(b, {"b", {}, {}}, [&run, i] { run.order.push_back(100 + i); });
    }
    while (sim_step()) ++run.steps;
    return run;
  };
  const Run plain = racy(false), traced = racy(true);
  CHECK(traced.order == plain.order);
  CHECK(traced.steps == plain.steps);
  CHECK(plain.steps == 15);
}

TEST_CASE("cpu launches, copies and fills are spans on the cpu lane", "[trace]") {
  TraceRecorder trace;
  std::vector<float> x(16, 1.0f), y(16);
  const Stream cpu = current_stream("cpu");
  copy_async(cpu, y.data(), x.data(), sizeof(float) * 16);
  launch(cpu, {"twice", {}, {}}, [&] { for (float& v : y) v *= 2; });
  const Parsed p = parse(trace.chrome_json());
  const int pid = p.pid_of("cpu");
  REQUIRE(p.with("X", "copy").size() == 1);
  REQUIRE(p.with("X", "twice").size() == 1);
  CHECK(on_lane(*p.with("X", "copy")[0], pid, cpu));
  CHECK(p.with("X", "copy")[0]->at("cat").get<std::string>() == "copy");
  CHECK(p.with("X", "twice")[0]->at("ts").get<double>() >=
        p.with("X", "copy")[0]->at("ts").get<double>() +
            p.with("X", "copy")[0]->at("dur").get<double>() - kRounding);
}

TEST_CASE("a launch refused by the sanitizer is not a span, and the next launch is timed",
          "[trace]") {
  // Either observer may come first: the recorder may already have seen the launch when
  // the sanitizer throws.
  const bool recorder_first = GENERATE(false, true);
  INFO((recorder_first ? "recorder registered first" : "sanitizer registered first"));
  // Under STREAMGRAD_SANITIZE_STREAMS=1 the process-wide sanitizer, registered before both,
  // would throw first: it collects here, so the order under test is the one below.
  SanitizerSuppression global_collects;
  const Stream a = Stream::create("sim:0"), b = Stream::create("sim:0");
  Storage buf = Storage::allocate(64, a);
  const MemRange r[] = {{buf.data(), 64}};
  std::unique_ptr<TraceRecorder> trace;
  if (recorder_first) trace = std::make_unique<TraceRecorder>();
  StreamSanitizer san(StreamSanitizer::Mode::kThrow);
  if (!recorder_first) trace = std::make_unique<TraceRecorder>();
  launch(a, {"writer", {}, r}, [] {});
  CHECK_THROWS_AS(launch(b, {"racing_reader", r, {}}, [] {}), SanitizerError);
  b.wait_stream(a);
  launch(b, {"ordered_reader", r, {}}, [] {});
  synchronize("sim:0");
  const Parsed p = parse(trace->chrome_json());
  CHECK(p.with("X", "racing_reader").empty());
  REQUIRE(p.with("X", "ordered_reader").size() == 1);
  CHECK(p.doc.at("otherData").at("incomplete_spans").get<int>() == 0);
  CHECK(trace->span_count() == (recorder_first ? 3 : 2));
  // The wait is placed after the writer, not after the launch that never happened.
  REQUIRE(p.with("X", "wait").size() == 1);
  CHECK(p.with("X", "wait")[0]->at("ts").get<double>() <=
        p.with("X", "ordered_reader")[0]->at("ts").get<double>());
}

TEST_CASE("two recorders at once both see everything; a stopped one sees nothing more",
          "[trace]") {
  const Stream s = Stream::create("sim:0");
  TraceRecorder first;
  TraceRecorder second;
  launch(s, {"both", {}, {}}, [] {});
  second.stop();
  launch(s, {"first_only", {}, {}}, [] {});
  s.synchronize();
  CHECK(parse(first.chrome_json()).with("X", "both").size() == 1);
  CHECK(parse(second.chrome_json()).with("X", "both").size() == 1);
  CHECK(parse(first.chrome_json()).with("X", "first_only").size() == 1);
  CHECK(parse(second.chrome_json()).with("X", "first_only").empty());
}

TEST_CASE("names with control characters or bytes that are not UTF-8 still give valid JSON",
          "[trace]") {
  const Stream s = Stream::create("sim:0");
  TraceRecorder trace;
  launch(s, {"tab\there, bell\x07, bad byte \xff", {}, {}}, [] {});
  s.synchronize();
  const Parsed p = parse(trace.chrome_json());
  CHECK(p.with("X", "tab\there, bell\x07, bad byte \xef\xbf\xbd").size() == 1);  // U+FFFD
}

TEST_CASE("save writes the JSON; an unwritable path is an Error naming it", "[trace]") {
  const Stream s = Stream::create("sim:0");
  TraceRecorder trace;
  launch(s, {"saved \"quoted\" name", {}, {}}, [] {});
  s.synchronize();
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/trace_test.json";
  trace.save(path);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(parse(text.str()).with("X", "saved \"quoted\" name").size() == 1);
  CHECK_THROWS_WITH(trace.save("/nonexistent-dir/t.json"),
                    Catch::Contains("/nonexistent-dir/t.json") &&
                        Catch::Contains("TraceRecorder::save"));
}

}  // namespace
}  // namespace streamgrad
