#include "tools/missing_waits_check.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <memory>

#include "absl/strings/str_cat.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace {

SimSchedulerOptions scheduler_for(const SyncProgram& p, const MissingWaitsOptions& o,
                                  uint64_t seed, uint64_t steps,
                                  SimPolicy policy = SimPolicy::kPct) {
  SimSchedulerOptions s;
  s.seed = seed;
  if (!p.deterministic) {
    s.kind = SimSchedulerKind::kThreaded;
    s.jitter_us = o.jitter_us;
    return s;
  }
  s.kind = SimSchedulerKind::kDeterministic;
  s.policy = policy;
  s.pct_depth = o.pct_depth;
  s.pct_steps = std::max<uint64_t>(steps, 1);
  return s;
}

// Waits for every sim stream and clears the errors a run left on them (a stream's error
// is reported by the next synchronisation of its device, which would be the next run's).
// Then poisons the memory the next run may be handed: the allocators' caches are emptied
// (the next raw allocations are poisoned, PoisonScope) and the free blocks they must keep
// (in segments that also hold live tensors) are filled with NaN. A read that overtakes its
// producer then sees NaN, not the value the same buffer held in the last run.
void drain() {
  sim_run_until_idle();
  for (int d = 0; d < device_count(DeviceType::kSim); ++d) {
    const Device device(DeviceType::kSim, d);
    try {
      synchronize(device);
    } catch (const std::exception&) {
      // Already counted: the run that left it threw or read a wrong value.
    }
    empty_cache(device);
    for (const SegmentInfo& segment : memory_snapshot(device)) {
      for (const BlockInfo& b : segment.blocks) {
        // Sim memory is host memory, and no stream runs: the host may write it.
        if (!b.allocated && !b.pending) {
          std::memset(reinterpret_cast<void*>(b.address), 0xFF, b.size);
        }
      }
    }
  }
}

struct PoisonScope {
  PoisonScope() { set_sim_poison_new_memory(true); }
  ~PoisonScope() { set_sim_poison_new_memory(false); }
};

std::string first_difference(const std::vector<float>& want, const std::vector<float>& got) {
  if (want.size() != got.size()) {
    return absl::StrCat(got.size(), " values, want ", want.size());
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&want[i], &got[i], sizeof(float)) != 0) {
      return absl::StrCat("value ", i, " = ", got[i], ", want ", want[i]);
    }
  }
  return "";
}

struct Outcome {
  std::vector<float> values;
  std::string wrong;  // "" when right (or when there is no reference yet)
};

// One run of `p` under the scheduler `s`; compared with `reference` when given.
Outcome run_once(const SyncProgram& p, const SimSchedulerOptions& s,
                 const std::vector<float>* reference) {
  set_sim_scheduler(s);
  Outcome out;
  try {
    ProgramRun r = p.run();
    drain();
    out.values = std::move(r.values);
    out.wrong = r.wrong;
  } catch (const std::exception& e) {
    out.wrong = absl::StrCat("threw: ", e.what());
    try {
      drain();
    } catch (const std::exception&) {
      // The run is already wrong.
    }
  }
  if (out.wrong.empty() && reference != nullptr) {
    out.wrong = first_difference(*reference, out.values);
  }
  return out;
}

std::string access(const SanitizerAccess& a) {
  return absl::StrCat(a.op, a.node.empty() ? "" : absl::StrCat(" in ", a.node), " (",
                      a.stream.str(), ")");
}

std::string pair(const SanitizerFinding& f) {
  return absl::StrCat(access(f.current), f.current.write ? " writes" : " reads",
                      " unordered after ", access(f.previous),
                      f.previous.write ? " wrote" : " read");
}

// Sorted: calls made by several threads at once (the engine's workers of two devices)
// come in either order, each with the same id.
std::vector<std::string> ids(const std::vector<SyncCall>& calls) {
  std::vector<std::string> out;
  for (const SyncCall& c : calls) out.push_back(c.id());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::string VariantReport::verdict() const {
  if (made_in < runs) return "not made";
  if (runs_to_wrong > 0) {
    if (findings > 0) return "caught";
    return wrong_run_flagged ? "caught, first run clean" : "wrong, sanitizer silent";
  }
  return flagged_runs > 0 ? "race, no wrong value" : "redundant";
}

std::string VariantReport::reason() const {
  const std::string v = verdict();
  if (v == "not made") {
    return absl::StrCat("made in ", made_in, " of ", runs, " runs: the number of calls with "
                        "this id depends on the interleaving (threads, completed events)");
  }
  if (v == "redundant") {
    if (call.kind == SyncKind::kWait && call.stream == call.other) {
      return "the stream waits for an event recorded on itself: in order already";
    }
    return call.kind == SyncKind::kWait
               ? "every access this wait orders is still ordered without it (another wait, "
                 "an event or a host synchronisation): no finding in any run"
               : "no memory of this buffer is handed out again while the stream may still "
                 "use it (or the reuse is ordered otherwise): no finding in any run";
  }
  if (v == "race, no wrong value") {
    return absl::StrCat("unordered accesses (the sanitizer's finding, in ", flagged_runs, " of ",
                        runs, " runs) that gave the same bits in every run");
  }
  if (v == "caught, first run clean") {
    return absl::StrCat("the race needs a buffer reused or an order that not every run has: "
                        "the sanitizer flagged ", flagged_runs, " of ", runs, " runs, the wrong "
                        "one included");
  }
  return "";
}

ProgramReport check_missing_waits(const SyncProgram& p, const MissingWaitsOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  SimSchedulerScope restore(sim_scheduler());
  ProgramReport report;
  report.program = &p;
  report.scheduler = p.deterministic ? "pct" : "threaded";
  report.pct_depth = p.deterministic ? o.pct_depth : 0;
  SanitizerSuppression races_on_purpose;  // a process-wide sanitizer must not throw
  PoisonScope poison;
  set_sim_scheduler(scheduler_for(p, o, 0, kSimDefaultPctSteps));
  if (p.setup) p.setup();
  drain();
  // A warm-up run: a first run may make fewer calls than the next ones (DDP's first
  // backward has no previous copy-back to wait for), which would shift every id.
  // In a scope: waits in the next run may block events it records.
  {
    SyncFaultScope warm_up;
    run_once(p, scheduler_for(p, o, 0, kSimDefaultPctSteps), nullptr);
  }

  // The two counting runs.
  Outcome first, second;
  std::vector<SyncCall> again;
  {
    StreamSanitizer san(StreamSanitizer::Mode::kCollect);
    SyncFaultScope count;
    first = run_once(p, scheduler_for(p, o, 0, kSimDefaultPctSteps), nullptr);
    report.steps = p.deterministic ? sim_steps_run() : 0;
    report.calls = count.calls();
    for (const SanitizerFinding& f : san.findings()) {
      report.problems.push_back(absl::StrCat("with every call in place: ", f.message));
    }
  }
  if (!first.wrong.empty()) throw Error(absl::StrCat(p.name, ": correct run: ", first.wrong));
  {
    SyncFaultScope count;
    second = run_once(p, scheduler_for(p, o, 1, report.steps), &first.values);
    again = count.calls();
  }
  if (!second.wrong.empty()) {
    report.problems.push_back(absl::StrCat("two correct runs differ: ", second.wrong));
  }
  if (ids(again) != ids(report.calls)) {
    report.problems.push_back(absl::StrCat("the calls' ids differ between two correct runs (",
                                           report.calls.size(), " and ", again.size(),
                                           " calls)"));
  }

  const int cap = p.deterministic ? o.max_seeds : o.max_threaded_runs;
  for (const SyncCall& call : report.calls) {
    if ((!o.only_calls.empty() && std::find(o.only_calls.begin(), o.only_calls.end(),
                                            call.index) == o.only_calls.end()) ||
        (o.select && !o.select(call))) {
      continue;
    }
    VariantReport v;
    v.call = call;
    for (int run = 0; run < cap && v.runs_to_wrong == 0; ++run) {
      StreamSanitizer san(StreamSanitizer::Mode::kCollect);
      SyncFaultScope drop(call.id());
      const Outcome out =
          run_once(p, scheduler_for(p, o, static_cast<uint64_t>(run), report.steps), &first.values);
      ++v.runs;
      v.made_in += drop.dropped() ? 1 : 0;
      const std::vector<SanitizerFinding> found = san.findings();
      if (run == 0) v.findings = static_cast<int>(found.size());
      if (!found.empty()) {
        ++v.flagged_runs;
        if (v.first_finding.empty()) {
          v.first_finding = found.front().message;
          v.finding_pair = pair(found.front());
        }
      }
      if (!out.wrong.empty()) {
        v.runs_to_wrong = run + 1;
        v.first_wrong = out.wrong;
        v.wrong_run_flagged = !found.empty();
      }
      if (!drop.dropped()) break;
    }
    if (p.deterministic && o.adversarial) {
      SyncFaultScope drop(call.id());
      const Outcome out = run_once(p, scheduler_for(p, o, 0, report.steps, SimPolicy::kAdversarial),
                                   &first.values);
      v.adversarial_wrong = out.wrong.empty() ? 0 : 1;
    }
    if (o.progress) {
      o.progress(absl::StrCat(p.name, " #", call.index, " ", call.id(), ": ", v.verdict(),
                              " (first-run findings ", v.findings, ", wrong at run ",
                              v.runs_to_wrong, ")"));
    }
    report.variants.push_back(std::move(v));
  }
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace streamgrad
