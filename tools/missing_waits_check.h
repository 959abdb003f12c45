// The missing-wait catalogue's engine: for one correct multi-stream program
// (tools/missing_waits_programs.h), every variant with ONE cross-stream synchronisation
// call left out (runtime/backend/sync_faults.h, SyncFaultScope), and for each what the stream
// sanitizer says on its first run and how many scheduler seeds it takes to show a wrong
// value.
//
//   MissingWaitsOptions o;                      // 50 PCT seeds per variant at most
//   ProgramReport r = check_missing_waits(*find_sync_program("fork_join"), o);
//   for (const VariantReport& v : r.variants) ... v.call.id(), v.findings, v.runs_to_wrong
//
// Method. Memory the sim devices hand out is poisoned (NaN), and between runs the
// allocators' caches are emptied and their remaining free blocks poisoned, so that a read
// that overtakes its producer sees garbage, as on a GPU, not the value the same buffer
// held in the last run. After the program's setup, one warm-up run (a first run may make
// fewer calls). Then two counting runs with every call in place, under PCT seeds 0 and 1:
// they give the reference values (which must agree, bit for bit), the calls (whose ids
// must agree: a variant is named by its id), the steps k a run takes (PCT's bound is then
// 1 / (n * k^(d-1))) and the sanitizer's verdict on the program itself (it must be clean).
// Then, per call, runs s = 0, 1, ... (PCT seed s) with that call left out, until a run's
// values differ from the reference in any bit, a self-check fails or the run throws, or
// the cap is reached. Every run has a collect-mode stream sanitizer attached; the report
// gives its verdict on the first run and whether it flagged the run that went wrong.
// Programs that cannot run under the deterministic scheduler (SyncProgram::deterministic)
// use the threaded one with jitter instead; seeds then only seed the jitter, and a count
// of runs is not reproducible. For comparison, each variant of a deterministic program
// also runs once under the adversarial policy.
//
// Thread-safety: one call at a time; it changes the sim scheduler (restored on return).
// Failure: errors of the program's setup or reference runs are thrown; errors of a
// variant's runs count as wrong values.
#ifndef STREAMGRAD_TOOLS_MISSING_WAITS_CHECK_H_
#define STREAMGRAD_TOOLS_MISSING_WAITS_CHECK_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/backend/config.h"  // kSimDefaultPctDepth, and SyncFaultScope (sync_faults.h)
#include "tools/missing_waits_programs.h"

namespace streamgrad {

struct MissingWaitsOptions {
  int max_seeds = 50;          // runs per variant, deterministic programs (PCT seeds)
  int max_threaded_runs = 50;  // runs per variant, threaded-only programs
  int pct_depth = kSimDefaultPctDepth;
  double jitter_us = 20;       // threaded-only programs
  // Only the variants whose call index (1-based, SyncCall::index) is listed and that
  // `select` accepts (when set); all by default.
  std::vector<int64_t> only_calls;
  std::function<bool(const SyncCall&)> select;
  // Deterministic programs: also one run under the adversarial policy per variant.
  bool adversarial = true;
  std::function<void(const std::string&)> progress;  // a line per variant, when set
};

struct VariantReport {
  SyncCall call;      // as the first counting run saw it
  int made_in = 0;    // runs in which the call left out was made (and skipped)
  int findings = 0;   // the stream sanitizer's, on the variant's first run
  std::string first_finding;  // the first run's first finding, or a later run's
  std::string finding_pair;   // its two accesses, short: "join (sim:0/s1) reads ... after ..."
  int flagged_runs = 0;       // runs in which the sanitizer found something
  bool wrong_run_flagged = false;  // the sanitizer found something in the first wrong run
  // The adversarial policy's run (it has no randomness): -1 not run, 0 right, 1 wrong.
  int adversarial_wrong = -1;
  int runs = 0;           // runs made (stops at the first wrong one)
  int runs_to_wrong = 0;  // 1-based index of the first wrong run; 0: none within `runs`
  std::string first_wrong;
  // "caught" (a wrong value; the sanitizer flagged the first run), "caught, first run
  // clean" (the sanitizer flagged the wrong run but not the first: whether the race happens
  // depended on the run, e.g. on a buffer being reused), "wrong, sanitizer silent",
  // "race, no wrong value", "redundant" (no wrong value, no finding in any run), or "not
  // made" (the call was not made in every run: its id is not stable).
  std::string verdict() const;
  // Why a variant is redundant or shows no wrong value, in words; "" otherwise.
  std::string reason() const;
};

struct ProgramReport {
  const SyncProgram* program = nullptr;
  std::string scheduler;  // "pct" or "threaded"
  int pct_depth = 0;
  uint64_t steps = 0;  // tasks one correct run takes (PCT's k); 0 for threaded
  std::vector<SyncCall> calls;
  // Problems with the program itself: its two correct runs disagreed, its calls' ids
  // changed between them, or the sanitizer found a race with every call in place.
  std::vector<std::string> problems;
  std::vector<VariantReport> variants;
  double seconds = 0;
};

ProgramReport check_missing_waits(const SyncProgram& program, const MissingWaitsOptions& options);

}  // namespace streamgrad

#endif  // STREAMGRAD_TOOLS_MISSING_WAITS_CHECK_H_
