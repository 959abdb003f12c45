// tools/missing_waits: the missing-wait catalogue. Takes every correct multi-stream
// program of the project (tools/missing_waits_programs.h) and every variant of it with ONE
// cross-stream synchronisation call left out (a wait: Event::block / wait_stream, the
// engine's and the libraries' included; or a record_stream), and reports for each the
// stream sanitizer's verdict on the variant's first run and how many PCT seeds it takes
// to show a wrong value (tools/missing_waits_check.h has the method).
//
//   missing_waits                         every program: a text table
//   missing_waits --markdown > bench/MISSING_WAITS.md    the stored report
//   missing_waits --programs=fork_join,twobranch --max-seeds=20
//   missing_waits --programs=twobranch --calls=3,7 --progress
//   missing_waits --json                  {"programs":[{"name":...,"variants":[...]}],...}
//   missing_waits --list                  the programs
//
// Exit code: 1 when a program itself is not correct (its two correct runs differ, its
// calls' ids change, or the sanitizer finds a race with every call in place), or when a
// variant gives a wrong value the sanitizer did not see; 2 for bad flags; else 0.
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "runtime/runtime.h"
#include "tools/cli_flags.h"
#include "tools/missing_waits_check.h"
#include "tools/missing_waits_programs.h"

ABSL_FLAG(std::string, programs, "", "comma-separated programs (default: all)");
ABSL_FLAG(std::string, calls, "",
          "comma-separated call numbers (SyncCall::index) to leave out, one program only");
ABSL_FLAG(int, max_seeds, 50, "PCT seeds per variant at most (deterministic programs)");
ABSL_FLAG(int, max_threaded_runs, 50, "runs per variant at most (threaded-only programs)");
ABSL_FLAG(double, jitter_us, 20, "threaded-only programs: max random delay before each launch");
ABSL_FLAG(int, pct_depth, streamgrad::kSimDefaultPctDepth, "PCT bug depth d");
ABSL_FLAG(bool, markdown, false, "print the report as Markdown (bench/MISSING_WAITS.md)");
ABSL_FLAG(bool, json, false, "print the report as JSON");
ABSL_FLAG(bool, progress, false, "a line per variant on stderr as it is checked");
ABSL_FLAG(bool, list, false, "list the programs, then exit");

namespace streamgrad {
namespace {

std::vector<const SyncProgram*> selected_programs() {
  std::vector<const SyncProgram*> out;
  const std::string names = absl::GetFlag(FLAGS_programs);
  if (names.empty()) {
    for (const SyncProgram& p : sync_programs()) out.push_back(&p);
  }
  for (absl::string_view name : absl::StrSplit(names, ',', absl::SkipEmpty())) {
    const SyncProgram* p = find_sync_program(std::string(name));
    if (p == nullptr) {
      std::vector<std::string> known;
      for (const SyncProgram& k : sync_programs()) known.push_back(k.name);
      throw UsageError{absl::StrCat("--programs: unknown program '", name,
                                    "'; known programs: ", absl::StrJoin(known, ", "))};
    }
    out.push_back(p);
  }
  return out;
}

MissingWaitsOptions options(size_t programs) {
  MissingWaitsOptions o;
  o.max_seeds = absl::GetFlag(FLAGS_max_seeds);
  o.max_threaded_runs = absl::GetFlag(FLAGS_max_threaded_runs);
  o.pct_depth = absl::GetFlag(FLAGS_pct_depth);
  o.jitter_us = absl::GetFlag(FLAGS_jitter_us);
  for (absl::string_view c : absl::StrSplit(absl::GetFlag(FLAGS_calls), ',', absl::SkipEmpty())) {
    int64_t k = 0;
    if (!absl::SimpleAtoi(c, &k) || k < 1) {
      throw UsageError{absl::StrCat("--calls: '", c, "' is not a call number (1, 2, ...)")};
    }
    o.only_calls.push_back(k);
  }
  if (!o.only_calls.empty() && programs != 1) {
    throw UsageError{"--calls needs exactly one program in --programs"};
  }
  if (absl::GetFlag(FLAGS_progress)) {
    o.progress = [](const std::string& line) { std::cerr << line << std::endl; };
  }
  return o;
}

std::string runs_cell(const ProgramReport& r, const VariantReport& v) {
  const char* unit = r.scheduler == "pct" ? "seed" : "run";
  if (v.runs_to_wrong > 0) {
    return absl::StrCat(v.runs_to_wrong, " ", unit, v.runs_to_wrong == 1 ? "" : "s");
  }
  return absl::StrCat("none in ", v.runs);
}

std::string findings_cell(const VariantReport& v) {
  if (v.findings == 0) {
    return v.flagged_runs == 0 ? "clean"
                               : absl::StrCat("clean (later runs: ", v.finding_pair, ")");
  }
  return absl::StrCat(v.findings, v.findings == 1 ? " finding: " : " findings, first: ",
                      v.finding_pair);
}

const char* adversarial_cell(const VariantReport& v) {
  if (v.adversarial_wrong < 0) return "-";
  return v.adversarial_wrong == 1 ? "wrong" : "right";
}

// A table cell: pipes escaped (also inside code spans, as GitHub's tables want).
std::string md(std::string s) { return absl::StrReplaceAll(s, {{"|", "\\|"}}); }

int count(const ProgramReport& r, const std::string& verdict) {
  int n = 0;
  for (const VariantReport& v : r.variants) n += v.verdict() == verdict ? 1 : 0;
  return n;
}

const char* kVerdicts[] = {"caught", "caught, first run clean", "redundant",
                           "race, no wrong value", "wrong, sanitizer silent", "not made"};

// What the catalogue does not cover, and why (printed under the summary).
const char* kLeftOut =
    "\nVerdicts: *caught*: a wrong value, and the sanitizer flagged the variant's first run; "
    "*caught, first run clean*: a wrong value, the sanitizer flagged that run but not the "
    "first (the race needs a buffer reuse or an order that not every run has); *redundant*: "
    "no wrong value and no finding in any run, so the call orders nothing this program still "
    "needs; *race, no wrong value*: the sanitizer sees unordered accesses but no run gave other "
    "bits; *not made*: the number of calls with that id depends on the interleaving, so the "
    "variant is not one program.\n\n"
    "Left out: DistributedDataParallel runs as two ranks (threads of one process over "
    "loopback), not as processes under tools/launch, and under the threaded scheduler only: "
    "a collective is a task that blocks until the peer's runs, and the deterministic "
    "scheduler runs one task at a time, so its column counts threaded runs with jitter, not "
    "PCT seeds, and is not reproducible. The nccl process group and every cuda program need a "
    "GPU. tools/devices' two-stream demonstration, gradcheck's stream-consistency check and "
    "the mixed-precision GradScaler are not in the catalogue.\n\n"
    "Reproducibility: a PCT seed gives the same interleaving on every run of a program that "
    "launches from one host thread at a time. data_loader (its worker thread), data_parallel "
    "(a thread per replica, an engine worker per device) and ddp launch from several threads "
    "at once, so their rows can differ from one report to the next.\n";

void print_markdown(const std::vector<ProgramReport>& reports, const MissingWaitsOptions& o) {
  absl::PrintF("# Missing waits: each correct multi-stream program with one synchronisation "
               "call left out\n\n");
  absl::PrintF("Generated by `bazel run -c opt //tools:missing_waits -- --markdown` "
               "(tools/missing_waits.cc; method in tools/missing_waits_check.h). A variant "
               "leaves out ONE cross-stream wait (Event::block / wait_stream: the program's, "
               "the engine's, the libraries') or record_stream, through the runtime's fault "
               "injection (runtime/backend/sync_faults.h). Per variant: the stream sanitizer on its first "
               "run, and the PCT seeds (depth %d, k = the steps of a correct run; seeds 0, 1, "
               "...) until a run's values differ from the correct run's in any bit, at most "
               "%d seeds (%d threaded runs with up to %g us of jitter before each launch for "
               "programs that cannot run under the deterministic scheduler).\n\n",
               o.pct_depth, o.max_seeds, o.max_threaded_runs, o.jitter_us);
  absl::PrintF("| program | scheduler | steps (k) | variants | caught | caught, first run "
               "clean | redundant | race, no wrong value | wrong, sanitizer silent | not made | "
               "most runs to a wrong value | wrong under PCT, right under adversarial | "
               "time s |\n");
  absl::PrintF("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const ProgramReport& r : reports) {
    absl::PrintF("| %s | %s | %s | %d", r.program->name, r.scheduler,
                 r.steps > 0 ? absl::StrCat(r.steps) : std::string("-"), r.variants.size());
    for (const char* v : kVerdicts) absl::PrintF(" | %d", count(r, v));
    int most = 0, missed = 0;
    for (const VariantReport& v : r.variants) {
      most = std::max(most, v.runs_to_wrong);
      missed += v.runs_to_wrong > 0 && v.adversarial_wrong == 0 ? 1 : 0;
    }
    absl::PrintF(" | %d | %s | %.1f |\n", most,
                 r.scheduler == "pct" ? absl::StrCat(missed) : std::string("-"), r.seconds);
  }
  absl::PrintF("%s", kLeftOut);
  for (const ProgramReport& r : reports) {
    absl::PrintF("\n## %s\n\n%s.\n\n", r.program->name, r.program->summary);
    for (const std::string& p : r.problems) absl::PrintF("**Problem:** %s\n\n", md(p));
    absl::PrintF("| # | left out | sanitizer, first run | wrong value after | adversarial | "
                 "verdict |\n");
    absl::PrintF("|---|---|---|---|---|---|\n");
    for (const VariantReport& v : r.variants) {
      const std::string reason = v.reason();
      absl::PrintF("| %d | `%s` | %s | %s | %s | %s%s |\n", v.call.index, md(v.call.id()),
                   md(findings_cell(v)), runs_cell(r, v), adversarial_cell(v), v.verdict(),
                   reason.empty() ? "" : absl::StrCat(": ", md(reason)));
    }
  }
}

void print_text(const std::vector<ProgramReport>& reports) {
  for (const ProgramReport& r : reports) {
    absl::PrintF("%s (%s, %d steps): %d variants in %.1f s\n", r.program->name, r.scheduler,
                 r.steps, r.variants.size(), r.seconds);
    for (const std::string& p : r.problems) absl::PrintF("  PROBLEM: %s\n", p);
    for (const VariantReport& v : r.variants) {
      absl::PrintF("  %3d %-24s wrong: %-12s adversarial: %-5s sanitizer: %s\n      %s\n",
                   v.call.index, v.verdict(), runs_cell(r, v), adversarial_cell(v),
                   findings_cell(v), v.call.id());
    }
  }
}

void print_json(const std::vector<ProgramReport>& reports, const MissingWaitsOptions& o) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["programs"] = ordered_json::array();
  for (const ProgramReport& r : reports) {
    ordered_json p{{"name", r.program->name},     {"scheduler", r.scheduler},
                   {"steps", r.steps},            {"problems", r.problems},
                   {"seconds", r.seconds},        {"variants", ordered_json::array()}};
    for (const VariantReport& v : r.variants) {
      const char* kind = v.call.kind == SyncKind::kWait ? "wait" : "record_stream";
      p["variants"].push_back(ordered_json{{"index", v.call.index},
                                           {"id", v.call.id()},
                                           {"kind", kind},
                                           {"verdict", v.verdict()},
                                           {"findings", v.findings},
                                           {"flagged_runs", v.flagged_runs},
                                           {"made_in", v.made_in},
                                           {"runs", v.runs},
                                           {"runs_to_wrong", v.runs_to_wrong},
                                           {"adversarial", adversarial_cell(v)},
                                           {"first_wrong", v.first_wrong},
                                           {"first_finding", v.first_finding}});
    }
    j["programs"].push_back(std::move(p));
  }
  j["pct_depth"] = o.pct_depth;
  j["max_seeds"] = o.max_seeds;
  j["max_threaded_runs"] = o.max_threaded_runs;
  j["jitter_us"] = o.jitter_us;
  print_json_line(j);
}

}  // namespace
}  // namespace streamgrad

int main(int argc, char** argv) {
  using namespace streamgrad;  // NOLINT
  const ToolSpec spec{
      "missing_waits",
      "missing_waits: every correct multi-stream program with one synchronisation left out: "
      "the sanitizer's verdict and the PCT seeds to a wrong value.\n"
      "Usage: missing_waits [--programs=a,b] [--calls=i,j] [--max-seeds=N] "
      "[--max-threaded-runs=N] [--jitter-us=U] [--pct-depth=D] [--markdown|--json] [--progress] "
      "[--list]",
      __FILE__,
      {{"max_seeds", 1, 1e6},
       {"max_threaded_runs", 1, 1e6},
       {"jitter_us", 0, 1e6},
       {"pct_depth", 1, kSimMaxPctDepth}},
      {"programs", "calls"}};
  return run_tool(spec, argc, argv, [&] {
    // A malformed STREAMGRAD_* variable is its own message here, rather than the sim
    // backend failing to start and the devices missing.
    config();
    const std::vector<const SyncProgram*> programs = selected_programs();
    if (absl::GetFlag(FLAGS_list)) {
      for (const SyncProgram& p : sync_programs()) absl::PrintF("%-36s %s\n", p.name, p.summary);
      return 0;
    }
    const MissingWaitsOptions o = options(programs.size());
    if (device_count(DeviceType::kSim) < 2) {
      throw UsageError{"missing_waits needs sim:0 and sim:1; check STREAMGRAD_SIM_DEVICES"};
    }
    std::vector<ProgramReport> reports;
    for (const SyncProgram* p : programs) reports.push_back(check_missing_waits(*p, o));
    if (absl::GetFlag(FLAGS_json)) {
      print_json(reports, o);
    } else if (absl::GetFlag(FLAGS_markdown)) {
      print_markdown(reports, o);
    } else {
      print_text(reports);
    }
    for (const ProgramReport& r : reports) {
      if (!r.problems.empty() || count(r, "wrong, sanitizer silent") > 0) return 1;
    }
    return 0;
  });
}
