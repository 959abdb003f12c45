// tools/stream_race's output (tools/stream_race_report.h).
#include "tools/stream_race_report.h"

#include <string>

#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "runtime/backend/backend.h"
#include "tools/cli_flags.h"

namespace streamgrad {
namespace {

const char* on_off(bool b) { return b ? "on" : "off"; }

}  // namespace

void print_text(const Settings& s, const std::vector<Report>& reports) {
  if (s.device == DeviceType::kSim) {
    absl::PrintF("stream_race: device=sim scheduler=%s seed=%d jitter_us=%g ", s.scheduler,
                 s.seed, s.sim.jitter_us);
    if (s.scheduler == "pct") {
      absl::PrintF("pct_depth=%d pct_steps=%d ", s.sim.pct_depth, s.sim.pct_steps);
    }
  } else {
    absl::PrintF("stream_race: device=%s (%s) ", race_device(0).str(),
                 backend(s.device).device_name(0));
  }
  absl::PrintF("repeat=%d sanitizer=%s legacy_seed_streams=%s legacy_leaf_sync=%s\n",
               s.repeat, on_off(s.sanitizer), on_off(s.engine.legacy_seed_streams),
               on_off(s.engine.legacy_leaf_sync));
  for (const std::string& name : s.left_out) {
    absl::PrintF("left out: %s (needs two %s devices)\n", name, device_type_name(s.device));
  }
  absl::PrintF("\n");
  absl::PrintF("%-36s %-8s %6s %6s %9s %8s %-11s %9s\n", "scenario", "expected", "runs", "wrong",
               "findings", "flagged", "as_expected", "time ms");
  int unexpected = 0, safe_failed = 0;
  for (const Report& r : reports) {
    const bool ok = r.as_expected(s.sanitizer);
    unexpected += ok ? 0 : 1;
    safe_failed += r.safe_failed() ? 1 : 0;
    absl::PrintF("%-36s %-8s %6d %6d %9d %8d %-11s %9.0f\n", r.scenario->name,
                 r.unsafe ? "unsafe" : "safe", r.runs, r.wrong, r.findings, r.flagged,
                 ok ? "yes" : "NO", r.time_ms);
    // Indented under their row; only the first of each kind, the rest are alike.
    if (!r.first_wrong.empty()) absl::PrintF("    first wrong: %s\n", r.first_wrong);
    if (!r.first_error.empty()) absl::PrintF("    first error: %s\n", r.first_error);
    if (!r.first_finding.empty()) absl::PrintF("    first finding: %s\n", r.first_finding);
    if (!r.trace_path.empty()) absl::PrintF("    trace of run 0: %s\n", r.trace_path);
  }
  absl::PrintF("\nstream_race: %d of %d scenarios as expected; %d expected safe failed\n",
               static_cast<int>(reports.size()) - unexpected, static_cast<int>(reports.size()),
               safe_failed);
}

void print_json(const Settings& s, const std::vector<Report>& reports) {
  using nlohmann::ordered_json;  // keys stay in the order written: readers grep the text
  ordered_json j;
  j["scenarios"] = ordered_json::array();
  for (const Report& r : reports) {
    ordered_json row{{"name", r.scenario->name},
                     {"expected", r.unsafe ? "unsafe" : "safe"},
                     {"runs", r.runs},
                     {"wrong", r.wrong},
                     {"sanitizer_findings", r.findings},
                     {"flagged_runs", r.flagged},
                     {"as_expected", r.as_expected(s.sanitizer)},
                     {"errors", r.errors},
                     {"first_finding", r.first_finding},
                     {"first_error", r.first_error},
                     {"first_wrong", r.first_wrong},
                     {"time_ms", r.time_ms},
                     {"summary", r.scenario->summary}};
    if (!r.trace_path.empty()) row["trace"] = r.trace_path;
    j["scenarios"].push_back(std::move(row));
  }
  j["device"] = device_type_name(s.device);
  j["left_out"] = s.left_out;
  j["scheduler"] = s.device == DeviceType::kSim ? s.scheduler : "gpu";
  j["seed"] = s.seed;
  if (s.scheduler == "pct") {
    j["pct_depth"] = s.sim.pct_depth;
    j["pct_steps"] = s.sim.pct_steps;
  }
  j["jitter_us"] = s.sim.jitter_us;
  j["repeat"] = s.repeat;
  j["sanitizer"] = s.sanitizer;
  j["legacy_seed_streams"] = s.engine.legacy_seed_streams;
  j["legacy_leaf_sync"] = s.engine.legacy_leaf_sync;
  j["assume_safe"] = s.assume_safe;
  print_json_line(j);
}

void print_list(const Settings& s) {
  for (const RaceScenario& sc : race_scenarios()) {
    absl::PrintF("%-36s %-6s  %s\n", sc.name, expected_unsafe(s, sc) ? "unsafe" : "safe",
                 sc.summary);
  }
}

}  // namespace streamgrad
