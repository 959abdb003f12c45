// tools/stream_race's runs: the settings its flags give (Settings, filled by
// tools/stream_race.cc), running every chosen scenario `repeat` times under them, and
// what each scenario's runs gave (Report), which tools/stream_race_report.h prints.
//
// Thread-safety: call from one thread; run_all sets process-wide state (the sim
// scheduler, the engine's switches) for its duration and restores it. Failure: a run that
// throws is counted as wrong and its message kept; run_all throws streamgrad::Error only
// when a trace file cannot be written.
#ifndef STREAMGRAD_TOOLS_STREAM_RACE_RUN_H_
#define STREAMGRAD_TOOLS_STREAM_RACE_RUN_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "engine/grad_mode.h"
#include "runtime/runtime.h"
#include "tools/stream_race_scenarios.h"

namespace streamgrad {

struct Settings {
  DeviceType device = DeviceType::kSim;
  std::vector<const RaceScenario*> scenarios;
  std::vector<std::string> left_out;  // scenarios needing more devices than there are
  int repeat = 0;
  std::string scheduler;
  SimSchedulerOptions sim;  // seed set per run
  uint64_t seed = 0;
  EngineOptions engine;
  bool sanitizer = true;
  std::set<std::string> assume_safe;
  std::string trace_dir;  // empty: no traces
};

struct Report {
  const RaceScenario* scenario = nullptr;
  bool unsafe = false;  // expected
  int runs = 0;
  int wrong = 0;   // wrong values and runs that threw
  int errors = 0;  // runs that threw
  int64_t findings = 0;
  int flagged = 0;
  std::string first_wrong, first_error, first_finding;
  std::string trace_path;  // the first run's timeline, when --trace
  double time_ms = 0;

  bool safe_failed() const { return !unsafe && (wrong > 0 || findings > 0); }
  bool as_expected(bool sanitizer) const {
    if (!unsafe) return wrong == 0 && findings == 0;
    return sanitizer ? flagged == runs : wrong > 0;
  }
};

// Whether `sc` is expected to race under the settings' switches (--assume-safe aside).
bool expected_unsafe(const Settings& s, const RaceScenario& sc);

// Every scenario of `s`, `s.repeat` runs each (run i with seed s.seed + i).
std::vector<Report> run_all(const Settings& s);

}  // namespace streamgrad

#endif  // STREAMGRAD_TOOLS_STREAM_RACE_RUN_H_
