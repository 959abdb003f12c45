// tools/stream_race: runs the catalogued multi-stream backward scenarios
// (tools/stream_race_scenarios.h) many times and reports how often each one gave a wrong
// result and what the stream sanitizer found, with the engine's protections on or off.
//
//   stream_race                               every scenario, 1000 threaded runs each
//   stream_race --scenarios=seed_race,fork_join --repeat=200
//   stream_race --scheduler=adversarial       deterministic: newest work first
//   stream_race --scheduler=pct --pct-depth=1 deterministic, PCT (runtime/sim/sim.h): a run
//                                             shows a depth-1 race with probability >= 1/n
//   stream_race --legacy-seed-streams         S3 off: seed_race is expected unsafe
//   stream_race --legacy-leaf-sync            S6 off: leaf_sync (and others) expected unsafe
//   stream_race --assume-safe=seed_race       check a fix: treat seed_race as safe anyway
//   stream_race --nosanitizer                 count wrong values only
//   stream_race --trace=DIR                   DIR/<scenario>.json: Chrome trace of run 0
//   stream_race --json                        {"scenarios":[{"name":...,"expected":"safe",
//                                             "runs":N,"wrong":K,"sanitizer_findings":F,
//                                             "flagged_runs":G,"as_expected":true,...}],
//                                             "scheduler":...,"seed":...,...}
//   stream_race --list                        the scenarios and their expectations
//   stream_race --device=cuda                 the same programs on GPUs (cuda:0, and cuda:1
//                                             for the cross-device one where it exists)
//
// Schedulers (sim): threaded (a pool of workers serving every stream, --jitter-us of
// random delay before each launch), or the deterministic adversarial, pct (--pct-depth,
// --pct-steps), random and round-robin policies; run i uses seed --seed + i. On cuda the
// GPU schedules the streams: wrong values then depend on real timing (the scenarios'
// sleeps make them likely), while the sanitizer's findings, which depend only on the
// order of launches and syncs, are the same as on sim. Each run is wrapped in a SanitizerSuppression (the races are on purpose,
// so a process-wide STREAMGRAD_SANITIZE_STREAMS=1 sanitizer must not throw) and, unless
// --nosanitizer, in a collect-mode StreamSanitizer of its own that counts the findings.
// A run that throws counts as wrong and its message is kept. Flags are read here;
// tools/stream_race_run.h runs the scenarios and tools/stream_race_report.h prints.
//
// A scenario is as expected when, if expected safe, no run was wrong and nothing was
// found; if expected unsafe, every run was flagged by the sanitizer (or, without it, at
// least one run was wrong).
// Exit code: 1 when a scenario expected safe gave a wrong result or a finding, 2 for bad
// flags (unknown scenario or scheduler: the message lists the known ones; unknown flags or
// malformed values) or a trace file that cannot be written, else 0.
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runtime/runtime.h"
#include "tools/cli_flags.h"
#include "tools/stream_race_report.h"
#include "tools/stream_race_run.h"
#include "tools/stream_race_scenarios.h"

ABSL_FLAG(std::string, scenarios, "", "comma-separated scenarios to run (default: all)");
ABSL_FLAG(bool, list, false, "list the scenarios and their expectations, then exit");
ABSL_FLAG(int, repeat, 1000, "runs per scenario");
ABSL_FLAG(std::string, device, "sim", "device type the scenarios run on: sim or cuda");
ABSL_FLAG(std::string, scheduler, "threaded",
          "sim scheduler: threaded, adversarial, pct, random or round-robin");
ABSL_FLAG(int, pct_depth, streamgrad::kSimDefaultPctDepth,
          "pct: bug depth d (d - 1 priority change points per run)");
ABSL_FLAG(uint64_t, pct_steps, streamgrad::kSimDefaultPctSteps,
          "pct: change points fall among the first N steps of a run");
ABSL_FLAG(uint64_t, seed, 0, "seed of run 0 (run i uses seed + i)");
ABSL_FLAG(double, jitter_us, 20, "threaded scheduler: max random delay before each launch (µs)");
ABSL_FLAG(bool, legacy_seed_streams, false, "S3 off: seeds assumed on the default stream");
ABSL_FLAG(bool, legacy_leaf_sync, false, "S6 off: only default streams wait for the results");
ABSL_FLAG(bool, sanitizer, true, "count stream sanitizer findings in every run");
ABSL_FLAG(std::string, assume_safe, "",
          "comma-separated scenarios to expect safe whatever the switches");
ABSL_FLAG(bool, json, false, "print the report as JSON");
ABSL_FLAG(std::string, trace, "",
          "directory: write a Chrome trace of each scenario's first run to DIR/<name>.json");

namespace streamgrad {
namespace {

const RaceScenario& scenario_named(absl::string_view name, const char* flag) {
  const RaceScenario* s = find_race_scenario(std::string(name));
  if (s == nullptr) {
    std::vector<std::string> known;
    for (const RaceScenario& k : race_scenarios()) known.push_back(k.name);
    throw UsageError{absl::StrCat(flag, ": unknown scenario '", name,
                                  "'; known scenarios: ", absl::StrJoin(known, ", "))};
  }
  return *s;
}

Settings parse_settings() {
  Settings s;
  const std::string device = absl::GetFlag(FLAGS_device);
  if (device == "cuda") {
    s.device = DeviceType::kCuda;
  } else if (device != "sim") {
    throw UsageError{absl::StrCat("unknown --device '", device, "'; known: sim, cuda")};
  }
  const std::string names = absl::GetFlag(FLAGS_scenarios);
  if (names.empty()) {
    for (const RaceScenario& sc : race_scenarios()) s.scenarios.push_back(&sc);
  }
  for (const absl::string_view name : absl::StrSplit(names, ',', absl::SkipEmpty())) {
    s.scenarios.push_back(&scenario_named(name, "--scenarios"));
  }
  for (const absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_assume_safe), ',', absl::SkipEmpty())) {
    s.assume_safe.insert(scenario_named(name, "--assume-safe").name);
  }
  s.repeat = absl::GetFlag(FLAGS_repeat);
  s.scheduler = absl::GetFlag(FLAGS_scheduler);
  if (s.scheduler == "threaded") {
    s.sim.kind = SimSchedulerKind::kThreaded;
    s.sim.jitter_us = absl::GetFlag(FLAGS_jitter_us);
  } else if (s.scheduler == "adversarial" || s.scheduler == "random" ||
             s.scheduler == "round-robin" || s.scheduler == "pct") {
    s.sim.kind = SimSchedulerKind::kDeterministic;
    s.sim.policy = parse_sim_policy(s.scheduler);
    s.sim.pct_depth = absl::GetFlag(FLAGS_pct_depth);
    s.sim.pct_steps = absl::GetFlag(FLAGS_pct_steps);
  } else {
    throw UsageError{absl::StrCat("unknown --scheduler '", s.scheduler,
                                  "'; known: threaded, adversarial, pct, random, round-robin")};
  }
  s.seed = absl::GetFlag(FLAGS_seed);
  s.engine.legacy_seed_streams = absl::GetFlag(FLAGS_legacy_seed_streams);
  s.engine.legacy_leaf_sync = absl::GetFlag(FLAGS_legacy_leaf_sync);
  s.sanitizer = absl::GetFlag(FLAGS_sanitizer);
  s.trace_dir = user_path(absl::GetFlag(FLAGS_trace));
  if (!s.trace_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(s.trace_dir, ec);
    if (ec || !std::filesystem::is_directory(s.trace_dir)) {
      throw UsageError{absl::StrCat("--trace=", s.trace_dir, ": not a directory that can be made (",
                                    ec ? ec.message() : "a file is in the way", ")")};
    }
  }
  const int count = device_count(s.device);
  if (s.device == DeviceType::kSim && count < 2) {
    throw UsageError{"stream_race needs sim:0 and sim:1; check STREAMGRAD_SIM_DEVICES and "
                     "STREAMGRAD_VISIBLE_DEVICES"};
  }
  if (s.device == DeviceType::kCuda) {
    if (count == 0) {
      throw UsageError{absl::StrCat("--device=cuda: ", cuda_unavailable_reason(),
                                    "; run on the sim devices (--device=sim) instead")};
    }
    if (s.scheduler != "threaded") {
      throw UsageError{absl::StrCat("--scheduler=", s.scheduler,
                                    " applies to sim devices; on cuda the GPU schedules")};
    }
  }
  set_race_device_type(s.device);
  std::vector<const RaceScenario*> runnable;
  for (const RaceScenario* sc : s.scenarios) {
    if (sc->devices <= count) {
      runnable.push_back(sc);
    } else {
      s.left_out.push_back(sc->name);
    }
  }
  s.scenarios = runnable;
  return s;
}

}  // namespace
}  // namespace streamgrad

int main(int argc, char** argv) {
  using namespace streamgrad;  // NOLINT
  const ToolSpec spec{
      "stream_race",
      "stream_race: runs multi-stream backward scenarios many times and reports race "
      "incidence.\n"
      "Usage: stream_race [--device=sim|cuda] [--scenarios=a,b] [--repeat=N] "
      "[--scheduler=threaded|adversarial|pct|"
      "random|round-robin] [--pct-depth=D] [--pct-steps=K] [--seed=N] [--jitter-us=X] "
      "[--legacy-seed-streams] "
      "[--legacy-leaf-sync] [--nosanitizer] [--assume-safe=a,b] [--trace=DIR] [--json] [--list]",
      __FILE__,
      {{"repeat", 1, 1e7},
       {"seed", 0, static_cast<long double>(UINT64_MAX)},
       {"jitter_us", 0, 1e6},
       {"pct_depth", 1, kSimMaxPctDepth},
       {"pct_steps", 1, static_cast<long double>(UINT64_MAX)}},
      {"scenarios", "assume_safe"}};
  return run_tool(spec, argc, argv, [&] {
    const Settings settings = parse_settings();
    if (absl::GetFlag(FLAGS_list)) {
      print_list(settings);
      return 0;
    }
    const std::vector<Report> reports = run_all(settings);
    if (absl::GetFlag(FLAGS_json)) {
      print_json(settings, reports);
    } else {
      print_text(settings, reports);
    }
    for (const Report& r : reports) {
      if (r.safe_failed()) return 1;
    }
    return 0;
  });
}
