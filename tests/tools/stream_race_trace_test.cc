// The timeline of stream_race's seed_race scenario (a), parsed as Chrome trace JSON: the
// forward stream F and the caller's stream S each have a lane; the seed's sleep and fill
// are spans on S, the backward kernels spans on F; with S3 a flow arrow goes from S's
// record to F's wait before the first backward kernel, and the kernel starts after the
// seed was filled. With S3 off (legacy_seed_streams) that arrow is missing and the
// adversarial scheduler runs the backward kernel before the seed exists: the race, drawn.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/grad_mode.h"
#include "nlohmann/json.hpp"
#include "runtime/runtime.h"
#include "tools/stream_race_scenarios.h"

namespace streamgrad {
namespace {

using nlohmann::json;

struct Timeline {
  json doc;
  int pid = -1;  // sim:0
  bool right = false;

  std::vector<const json*> events(const std::string& ph, const std::string& name = "") const {
    std::vector<const json*> out;
    for (const json& e : doc.at("traceEvents")) {
      if (e.at("ph").get<std::string>() == ph &&
          (name.empty() || e.at("name").get<std::string>() == name)) {
        out.push_back(&e);
      }
    }
    return out;
  }
  bool on(const json& e, const Stream& s) const {
    return e.at("pid").get<int>() == pid && e.at("tid").get<int>() == s.id();
  }
  // Spans on `s`, in the order they were enqueued.
  std::vector<const json*> spans_on(const Stream& s) const {
    std::vector<const json*> out;
    for (const json* e : events("X")) {
      if (on(*e, s) && e->at("cat").get<std::string>() != "event") out.push_back(e);
    }
    return out;
  }
  // Flow arrows (start, finish) from lane `from` to lane `to`.
  std::vector<std::pair<const json*, const json*>> flows(const Stream& from,
                                                         const Stream& to) const {
    std::vector<std::pair<const json*, const json*>> out;
    for (const json* s : events("s", "event")) {
      for (const json* f : events("f", "event")) {
        if (s->at("id").get<int>() == f->at("id").get<int>() && on(*s, from) && on(*f, to)) {
          out.emplace_back(s, f);
        }
      }
    }
    return out;
  }
};

// Times are written with three decimals (ns), so ts + dur may miss the end by one: the
// end is taken a little early, which keeps every "after" check conservative.
double end_of(const json& span) {
  return span.at("ts").get<double>() + span.at("dur").get<double>() - 2e-3;
}

Timeline trace_seed_race(bool legacy_seed_streams) {
  EngineOptions options;
  options.legacy_seed_streams = legacy_seed_streams;
  EngineOptionsGuard engine(options);
  SimSchedulerScope scope({SimSchedulerKind::kDeterministic, SimPolicy::kAdversarial, 1, 0});
  SanitizerSuppression races_on_purpose;  // the legacy run races (CI sets the sanitizer on)
  const RaceScenario* scenario = find_race_scenario("seed_race");
  REQUIRE(scenario != nullptr);
  TraceRecorder trace;
  Timeline t;
  t.right = scenario->run().right;
  sim_run_until_idle();
  trace.stop();
  t.doc = json::parse(trace.chrome_json());  // strict: a malformed trace throws
  REQUIRE(t.doc.at("traceEvents").is_array());
  for (const json* e : t.events("M", "process_name")) {
    if (e->at("args").at("name").get<std::string>() == "sim:0") t.pid = e->at("pid").get<int>();
  }
  REQUIRE(t.pid > 0);
  CHECK(t.doc.at("otherData").at("incomplete_spans").get<int>() == 0);
  return t;
}

// The sleep on S and, among F's spans, those enqueued after it (the backward kernels).
struct SeedRaceSpans {
  const json* sleep = nullptr;
  const json* seed_fill = nullptr;
  std::vector<const json*> backward_on_f;
};

SeedRaceSpans find_spans(const Timeline& t) {
  const RaceStreams& rs = race_streams();
  SeedRaceSpans out;
  const auto on_s = t.spans_on(rs.caller);
  for (size_t i = 0; i < on_s.size(); ++i) {
    if (on_s[i]->at("name").get<std::string>() == "sleep") {
      out.sleep = on_s[i];
      if (i + 1 < on_s.size()) out.seed_fill = on_s[i + 1];
    }
  }
  REQUIRE(out.sleep != nullptr);
  REQUIRE(out.seed_fill != nullptr);
  CHECK(out.seed_fill->at("name").get<std::string>() == "fill");  // ones_like(y): the implicit seed
  CHECK(out.sleep->at("dur").get<double>() >= 200);
  for (const json* e : t.spans_on(rs.forward)) {
    if (e->at("args").at("enqueued_us").get<double>() >
        out.sleep->at("args").at("enqueued_us").get<double>()) {
      out.backward_on_f.push_back(e);
    }
  }
  REQUIRE_FALSE(out.backward_on_f.empty());
  return out;
}

TEST_CASE("seed_race timeline: lanes, spans, and the S3 arrow from the seed to backward",
          "[trace][seed_race]") {
  const Timeline t = trace_seed_race(/*legacy_seed_streams=*/false);
  CHECK(t.right);
  const RaceStreams& rs = race_streams();
  int lanes = 0;
  for (const json* e : t.events("M", "thread_name")) {
    if (e->at("pid").get<int>() == t.pid && (e->at("tid").get<int>() == rs.forward.id() ||
                                                e->at("tid").get<int>() == rs.caller.id())) {
      ++lanes;
    }
  }
  CHECK(lanes == 2);

  const SeedRaceSpans spans = find_spans(t);
  // Backward kernels say which node they ran for (the engine's LaunchScope).
  const json& first_backward = *spans.backward_on_f.front();
  REQUIRE(first_backward.at("args").contains("node"));
  CHECK(first_backward.at("args").at("node").get<std::string>().find("Backward") !=
        std::string::npos);
  // Measured: the first backward kernel on F started after the seed was filled on S.
  CHECK(spans.backward_on_f.front()->at("ts").get<double>() >= end_of(*spans.seed_fill));

  // S3: F waits for S (the seed's producer) -- an arrow from after the fill to F.
  const auto seed_arrows = t.flows(rs.caller, rs.forward);
  REQUIRE(seed_arrows.size() == 1);
  CHECK(seed_arrows[0].first->at("ts").get<double>() >= end_of(*spans.seed_fill));
  CHECK(seed_arrows[0].second->at("ts").get<double>() <=
        spans.backward_on_f.front()->at("ts").get<double>());
  // S6: the caller's stream S waits for F, where x.grad was accumulated.
  const auto result_arrows = t.flows(rs.forward, rs.caller);
  REQUIRE(result_arrows.size() == 1);
  CHECK(result_arrows[0].first->at("ts").get<double>() >= end_of(*spans.backward_on_f.back()));
}

TEST_CASE("seed_race timeline with S3 off: no arrow, and backward runs before the seed",
          "[trace][seed_race][S9]") {
  const Timeline t = trace_seed_race(/*legacy_seed_streams=*/true);
  CHECK_FALSE(t.right);
  const RaceStreams& rs = race_streams();
  const SeedRaceSpans spans = find_spans(t);
  CHECK(t.flows(rs.caller, rs.forward).empty());
  CHECK(spans.backward_on_f.front()->at("ts").get<double>() <
        spans.seed_fill->at("ts").get<double>());
}

}  // namespace
}  // namespace streamgrad
