// Running tools/stream_race's scenarios (tools/stream_race_run.h): each run under its own
// seed, sanitizer and (for run 0) trace, counted into the scenario's Report.
#include "tools/stream_race_run.h"

#include <chrono>
#include <exception>
#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "runtime/observe/trace.h"

namespace streamgrad {
namespace {

// Waits until every stream of the race devices is idle.
void drain(const Settings& s) {
  if (s.device == DeviceType::kSim) {
    sim_run_until_idle();
    return;
  }
  for (int i = 0; i < device_count(s.device); ++i) synchronize(Device(s.device, i));
}

// One run, counted into `r`. Leaves every sim stream idle, so that no work of this run
// overlaps the next one or escapes its sanitizer (or its trace, which is then complete).
// Throws Error only when the trace cannot be written.
void run_once(const Settings& s, const RaceScenario& sc, uint64_t seed, bool traced, Report& r) {
  if (s.device == DeviceType::kSim) {
    SimSchedulerOptions sim = s.sim;
    sim.seed = seed;
    set_sim_scheduler(sim);
  }
  SanitizerSuppression races_on_purpose;
  std::unique_ptr<StreamSanitizer> san;
  if (s.sanitizer) san = std::make_unique<StreamSanitizer>(StreamSanitizer::Mode::kCollect);
  std::unique_ptr<TraceRecorder> trace;
  if (traced) trace = std::make_unique<TraceRecorder>();
  ++r.runs;
  try {
    const RaceOutcome o = sc.run();
    drain(s);
    if (!o.right) {
      ++r.wrong;
      if (r.first_wrong.empty()) r.first_wrong = absl::StrCat("run ", r.runs - 1, ": ", o.detail);
    }
  } catch (const std::exception& e) {
    ++r.wrong;
    ++r.errors;
    if (r.first_error.empty()) r.first_error = absl::StrCat("run ", r.runs - 1, ": ", e.what());
    try {
      drain(s);
    } catch (const std::exception&) {
      // The run is already counted as wrong with its first error.
    }
  }
  if (san != nullptr) {
    const std::vector<SanitizerFinding> found = san->findings();
    r.findings += static_cast<int64_t>(found.size());
    if (!found.empty()) {
      ++r.flagged;
      if (r.first_finding.empty()) {
        r.first_finding = absl::StrCat("run ", r.runs - 1, ": ", found.front().message);
      }
    }
  }
  if (trace != nullptr) {
    trace->stop();
    r.trace_path = (std::filesystem::path(s.trace_dir) / absl::StrCat(sc.name, ".json")).string();
    trace->save(r.trace_path);
  }
}

}  // namespace

bool expected_unsafe(const Settings& s, const RaceScenario& sc) {
  return s.assume_safe.count(sc.name) == 0 && sc.unsafe(s.engine);
}

std::vector<Report> run_all(const Settings& s) {
  SimSchedulerScope restore(sim_scheduler());
  EngineOptionsGuard engine(s.engine);
  std::vector<Report> reports;
  for (const RaceScenario* sc : s.scenarios) {
    Report r;
    r.scenario = sc;
    r.unsafe = expected_unsafe(s, *sc);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < s.repeat; ++i) {
      run_once(s, *sc, s.seed + static_cast<uint64_t>(i), i == 0 && !s.trace_dir.empty(), r);
    }
    const auto elapsed = std::chrono::steady_clock::now() - start;
    r.time_ms = std::chrono::duration<double, std::milli>(elapsed).count();
    reports.push_back(std::move(r));
  }
  return reports;
}

}  // namespace streamgrad
