// The catalogue of tools/stream_race: small multi-stream programs on the sim devices (or
// on GPUs: set_race_device_type), each with a known-correct result, some of which race on
// purpose (ARCHITECTURE.md §5, S3–S9).
//
//   for (const RaceScenario& s : race_scenarios()) {
//     const bool unsafe = s.unsafe(engine_options());  // does it race under these switches?
//     const RaceOutcome o = s.run();                    // one run; o.right when the value was
//   }                                                   // the known-correct one
//
// A scenario's run() builds its tensors, runs forward/backward and the reads under test,
// and checks the values it read on the host. It leaves work queued on the streams (the
// caller drains them with sim_run_until_idle() between runs) but holds no tensor after it
// returns. The races are real: an unsafe scenario reads a stale or overwritten value when
// the scheduler lets the unordered stream run first (with the default switches: every run
// under the adversarial scheduler, most runs under the threaded one with its sleeps), and
// the stream sanitizer reports it on every run whatever the interleaving, because its
// findings depend on the order of launches and syncs, not on timing. Being real, they are
// data races on host memory too: ThreadSanitizer reports the unsafe ones when they run
// on the threaded scheduler (the deterministic ones run one task at a time).
//
// Every scenario uses the same few streams, made once (race_streams()): streams are never
// destroyed, so streams made per run would pile up stream state over 1000 runs.
//
// Thread-safety: run() uses process-wide streams, engine options and the allocator's
// cache as its stage; run one scenario at a time. The catalogue itself is immutable.
// Failure: run() reports a wrong value in its outcome and lets every exception through
// (streamgrad::Error, SanitizerError from a throwing sanitizer): the caller decides what a
// throwing run means. The catalogue needs device 0 of the race device type, and device 1
// for the scenarios whose `devices` is 2; race_streams() throws DeviceError when device 0
// is absent.
#ifndef STREAMGRAD_TOOLS_STREAM_RACE_SCENARIOS_H_
#define STREAMGRAD_TOOLS_STREAM_RACE_SCENARIOS_H_

#include <string>
#include <vector>

#include "engine/grad_mode.h"
#include "runtime/backend/stream.h"

namespace streamgrad {

// What one run of a scenario saw.
struct RaceOutcome {
  bool right = true;
  std::string detail;  // when wrong: what was read and what was expected
};

struct RaceScenario {
  const char* name;
  const char* summary;  // one line: the mechanism
  // Whether the program races under these engine switches (S9). Safe programs rely on
  // the contract (S3, S6, S8) or on the user's own waits; the switches take S3 or S6
  // away, which turns some safe programs unsafe and one unsafe program safe.
  bool (*unsafe)(const EngineOptions& options);
  RaceOutcome (*run)();
  int devices = 1;  // how many devices of the race device type it needs
};

// The device type the scenarios run on: sim (the default) or cuda. Set it once, before
// the first race_streams() or run(); race_device(i) is device i of that type.
void set_race_device_type(DeviceType type);
DeviceType race_device_type();
Device race_device(int index);

// The scenarios in a fixed order (the order of the report).
const std::vector<RaceScenario>& race_scenarios();
// nullptr when there is no scenario of that name.
const RaceScenario* find_race_scenario(const std::string& name);

// The dedicated streams every scenario uses.
struct RaceStreams {
  Stream forward;   // device 0, side stream the forward passes run on (F)
  Stream caller;    // device 0, side stream current when backward() is called (S)
  Stream reader;    // device 0, another stream reading results (R)
  Stream producer;  // device 0, producer whose freed blocks are reused (P)
  Stream remote;    // device 1, side stream of the cross-device scenario
};
const RaceStreams& race_streams();

}  // namespace streamgrad

#endif  // STREAMGRAD_TOOLS_STREAM_RACE_SCENARIOS_H_
