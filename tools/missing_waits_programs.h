// The correct multi-stream programs of the project, for tools/missing_waits: each run of
// one computes values that do not depend on the interleaving of its streams, so a run
// with one synchronisation call left out (runtime/backend/sync_faults.h, SyncFaultScope) that gives
// other values has shown that call to be needed.
//
//   for (const SyncProgram& p : sync_programs()) {
//     if (p.setup) p.setup();         // once
//     const ProgramRun r = p.run();   // r.values, bit for bit the same every correct run
//   }
//
// The programs: every stream_race scenario that is safe with the engine's default
// switches (tools/stream_race_scenarios.h); tools/train's twobranch model, two training
// steps on its side streams; the DataLoader handing batches from its copy stream to a
// compute stream; DataParallel's replicas on sim:0 and sim:1; DistributedDataParallel
// with two ranks played by threads over loopback, each on its own sim device, with
// small buckets so that all-reduces overlap backward.
//
// Thread-safety: run one program at a time. Failure: run() lets errors through (a run
// with a synchronisation left out may throw; the caller counts that as a wrong run).
#ifndef STREAMGRAD_TOOLS_MISSING_WAITS_PROGRAMS_H_
#define STREAMGRAD_TOOLS_MISSING_WAITS_PROGRAMS_H_

#include <functional>
#include <string>
#include <vector>

namespace streamgrad {

struct ProgramRun {
  std::vector<float> values;  // what the program computed, read on the host at its end
  std::string wrong;          // a self-check that failed (stream_race scenarios), or ""
};

struct SyncProgram {
  const char* name;
  const char* summary;
  // Makes what every run reuses (models, streams, a loader, the ranks' threads), once:
  // streams are never destroyed, so a program that made its own per run would pile up
  // thousands. Its synchronisation calls are not the runs'. May be empty.
  std::function<void()> setup;
  std::function<ProgramRun()> run;
  int devices = 1;  // sim devices it needs
  // false: the program cannot run under the deterministic sim scheduler (two ranks in one
  // process: a collective is a task that blocks until the peer's runs, and that
  // scheduler runs one task at a time), only under the threaded one.
  bool deterministic = true;
};

// In the order of the report.
const std::vector<SyncProgram>& sync_programs();
const SyncProgram* find_sync_program(const std::string& name);

}  // namespace streamgrad

#endif  // STREAMGRAD_TOOLS_MISSING_WAITS_PROGRAMS_H_
