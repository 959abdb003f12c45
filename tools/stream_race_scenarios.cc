#include "tools/stream_race_scenarios.h"

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backward.h"
#include "engine/factories.h"
#include "kernels/kernels.h"
#include "ops/ops.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace {

// Long enough for the other streams to finish several kernels (with 20 µs of jitter each)
// while the delayed stream still sleeps: the unordered access then sees the wrong value.
constexpr double kLateUs = 200;
// The free-while-read tensor has a size nothing else uses, so each of its allocations gets
// a segment of its own, and the block a drop frees is the block the next allocation of
// that size gets back (best fit, lowest address first).
constexpr int64_t kFreeElems = 3001;

std::atomic<DeviceType> g_device_type{DeviceType::kSim};

Device dev0() { return race_device(0); }
TensorOptions on0() { return TensorOptions().device(dev0()); }

RaceOutcome expect(const char* what, double got, double want) {
  if (got == want) return {};
  return {false, absl::StrCat(what, " = ", got, ", want ", want)};
}

RaceOutcome expect_all(const char* what, const std::vector<float>& got, float want) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want) return {false, absl::StrCat(what, "[", i, "] = ", got[i], ", want ", want)};
  }
  return {};
}

// x = ones({n}) made on `on`, with a zero .grad that backward accumulates into in place:
// a read that overtakes the accumulation sees 0, never a stale right value. Synchronised,
// so that the zeros are in memory even when a deterministic scheduler would otherwise run
// the overtaking read before them.
Tensor leaf_with_zero_grad(const Stream& on, int64_t n) {
  StreamGuard g(on);
  Tensor x = ones({n}, on0()).requires_grad_();
  x.set_grad(zeros({n}, on0()));
  on.synchronize();
  return x;
}

// Forward y = 2x on F, finished long before backward starts (F idle). x.grad = 2.
struct ForwardOnF {
  Tensor x, y;
};
ForwardOnF forward_on_f() {
  const Stream f = race_streams().forward;
  ForwardOnF r;
  r.x = leaf_with_zero_grad(f, 1);
  StreamGuard g(f);
  r.y = mul(r.x, 2.0);
  f.synchronize();
  return r;
}

// Frees a block holding 7 on `s`: the next one-element allocation there (the implicit
// seed) gets it back, so a read that overtakes the seed's fill sees 7.
void leave_stale_seven(const Stream& s) {
  StreamGuard g(s);
  Tensor stale = full({1}, 7, on0());
  s.synchronize();
}

}  // namespace

// The scenarios have names the linker exports (no anonymous namespace): tools/
// missing_waits names each synchronisation call by the functions that made it.
namespace race_programs {

// (a) Implicit seed made on S behind a sleep and over a stale 7; first node on F. S3 has F
// wait for S; without S3 (or without S6 for the final read on S) it races.
RaceOutcome seed_race() {
  const Stream s = race_streams().caller;
  ForwardOnF fw = forward_on_f();
  StreamGuard g(s);
  leave_stale_seven(s);
  sleep(s, kLateUs);
  fw.y.backward();  // ones_like(y) on S, late
  return expect("x.grad", fw.x.grad().item<float>(), 2.0);  // read on S (S6)
}

// (b) Explicit seed filled on S, late; backward with S current: the seed is S's (S3).
RaceOutcome seed_filled_on_backward_stream() {
  const Stream s = race_streams().caller;
  ForwardOnF fw = forward_on_f();
  StreamGuard g(s);
  Tensor seed = full({1}, 7, on0());
  s.synchronize();
  sleep(s, kLateUs);
  kernels::fill(s, seed.view(), 1);
  fw.y.backward(seed);
  return expect("x.grad", fw.x.grad().item<float>(), 2.0);
}

// Explicit seed filled late on the default stream D; backward with S current. The engine
// orders the graph after S only, so unless S waits for D the first node reads the 7.
RaceOutcome seed_filled_on_default(bool user_syncs) {
  const Stream s = race_streams().caller;
  const Stream d = Stream::default_for(dev0());
  ForwardOnF fw = forward_on_f();
  Tensor seed;
  {
    StreamGuard gd(d);
    seed = full({1}, 7, on0());
    d.synchronize();
    sleep(d, kLateUs);
    kernels::fill(d, seed.view(), 1);
  }
  StreamGuard g(s);
  if (user_syncs) {
    s.wait_stream(d);
    seed.storage().record_stream(s);
  }
  fw.y.backward(seed);
  return expect("x.grad", fw.x.grad().item<float>(), 2.0);
}
RaceOutcome seed_filled_elsewhere_no_sync() { return seed_filled_on_default(false); }
RaceOutcome seed_filled_elsewhere_synced() { return seed_filled_on_default(true); }

// (e) x on D is read on two side streams (each waits for D) and joined on D; backward
// with D current. x.grad = 2 + 3, loss = 10.
RaceOutcome fork_join() {
  const Stream p1 = race_streams().forward, p2 = race_streams().caller;
  const Stream d = current_stream(dev0());
  Tensor x = ones({2}, on0()).requires_grad_();
  Tensor y1, y2;
  p1.wait_stream(d);
  p2.wait_stream(d);
  {
    StreamGuard g(p1);
    y1 = mul(x, 2.0);
  }
  {
    StreamGuard g(p2);
    y2 = mul(x, 3.0);
  }
  d.wait_stream(p1);
  d.wait_stream(p2);
  y1.storage().record_stream(d);
  y2.storage().record_stream(d);
  const Tensor loss = sum(add(y1, y2));
  loss.backward();
  const RaceOutcome grad = expect_all("x.grad", x.grad().to_vector<float>(), 5);
  // The forward's result too: the gradient does not depend on y1 and y2's values.
  return grad.right ? expect("loss", loss.item<float>(), 10) : grad;
}

// (f) Forward and backward on S (delayed by a sleep); x.grad is then copied on R right
// away. S6 orders only the caller's streams: R needs its own wait.
RaceOutcome grads_read_elsewhere(bool wait) {
  const Stream s = race_streams().caller, r = race_streams().reader;
  Tensor x = leaf_with_zero_grad(s, 4);
  {
    StreamGuard g(s);
    Tensor y = sum(mul(x, 2.0));
    sleep(s, kLateUs);
    y.backward();
  }
  const Tensor grad = x.grad();
  StreamGuard g(r);
  if (wait) {
    r.wait_stream(s);
    grad.storage().record_stream(r);
  }
  Tensor copy = clone(grad);  // on R
  r.synchronize();
  return expect_all("x.grad read on R", copy.to_vector<float>(), 2);
}
RaceOutcome grads_read_elsewhere_no_wait() { return grads_read_elsewhere(false); }
RaceOutcome grads_read_elsewhere_wait() { return grads_read_elsewhere(true); }

// (g) t = 1 made on P is read on R (after a wait and a sleep); its last handle is dropped
// while R still reads it, and u = 2 is allocated and filled on P. Without record_stream
// the block is free on P at once, u gets it and R reads 2 (S8).
RaceOutcome free_while_read_elsewhere(bool recorded) {
  const Stream p = race_streams().producer, r = race_streams().reader;
  Tensor copy;
  {
    Tensor t;
    {
      StreamGuard g(p);
      t = full({kFreeElems}, 1, on0());
    }
    r.wait_stream(p);
    sleep(r, kLateUs);
    {
      StreamGuard g(r);
      copy = clone(t);
    }
    if (recorded) t.storage().record_stream(r);
  }  // t's last handle: the block goes back to P's pool (or waits for R when recorded)
  Tensor u;
  {
    StreamGuard g(p);
    u = full({kFreeElems}, 2, on0());
  }
  r.synchronize();
  StreamGuard g(r);
  return expect_all("value read on R", copy.to_vector<float>(), 1);
}
RaceOutcome free_while_read_unrecorded() { return free_while_read_elsewhere(false); }
RaceOutcome free_while_read_recorded() { return free_while_read_elsewhere(true); }

// (h) With side streams current on both devices: y = to(2 * to(x, dev 1), dev 0), loss =
// sum(y * x); backward copies gradients back across devices (S7). x.grad = 4x = 12.
RaceOutcome cross_device_copy() {
  const Stream a = race_streams().forward, b = race_streams().remote;
  StreamGuard g0(a);
  StreamGuard g1(b);
  Tensor x = full({2}, 3, on0()).requires_grad_();
  Tensor y = to(mul(to(x, race_device(1)), 2.0), dev0());
  sum(mul(y, x)).backward();
  const Tensor grad = x.grad();
  if (grad.device() != dev0()) {
    return {false, absl::StrCat("x.grad is on ", grad.device().str(), ", want ", dev0().str())};
  }
  return expect_all("x.grad", grad.to_vector<float>(), 12);  // read on A (device 0 current)
}

// Leaf grads are accumulated on F; the caller reads them on S right after backward, with
// no sync of its own: S6 makes S wait for F. The implicit seed lands over a stale 7 on S.
RaceOutcome leaf_sync() {
  const Stream f = race_streams().forward, s = race_streams().caller;
  Tensor x = leaf_with_zero_grad(f, 1);
  Tensor y;
  {
    StreamGuard g(f);
    y = sum(mul(x, 2.0));
    f.synchronize();
  }
  StreamGuard g(s);
  leave_stale_seven(s);
  s.wait_stream(f);
  y.backward();
  return expect("x.grad", x.grad().item<float>(), 2.0);
}

}  // namespace race_programs

namespace {

bool seed_on_caller_or_read_on_caller(const EngineOptions& o) {
  // The seed is S's and the result is read on S: needs both S3 and S6.
  return o.legacy_seed_streams || o.legacy_leaf_sync;
}
bool seed_on_default(const EngineOptions& o) {
  // Without S3 the engine assumes the seed on D, which is where it really is: the
  // historical behaviour this program relied on. The read on S still needs S6.
  return !o.legacy_seed_streams || o.legacy_leaf_sync;
}
bool read_on_caller(const EngineOptions& o) { return o.legacy_leaf_sync; }
bool never(const EngineOptions&) { return false; }
bool always(const EngineOptions&) { return true; }

}  // namespace

const RaceStreams& race_streams() {
  static const RaceStreams streams = [] {
    // The remote stream exists only where a second device does (one GPU: the
    // cross-device scenario is left out, and its stream is never used).
    const bool two = device_count(race_device_type()) > 1;
    return RaceStreams{Stream::create(dev0()), Stream::create(dev0()), Stream::create(dev0()),
                       Stream::create(dev0()),
                       two ? Stream::create(race_device(1)) : Stream::default_for(dev0())};
  }();
  return streams;
}

void set_race_device_type(DeviceType type) { g_device_type.store(type); }
DeviceType race_device_type() { return g_device_type.load(); }
Device race_device(int index) { return Device(race_device_type(), index); }

const std::vector<RaceScenario>& race_scenarios() {
  using namespace race_programs;  // NOLINT: the table lists them all
  static const std::vector<RaceScenario> catalogue{
      {"seed_race",
       "forward on F; implicit seed made on S behind a sleep over a stale 7; backward with S "
       "current",
       seed_on_caller_or_read_on_caller, seed_race},
      {"seed_filled_on_backward_stream",
       "explicit seed filled late on S; backward with S current", seed_on_caller_or_read_on_caller,
       seed_filled_on_backward_stream},
      {"seed_filled_elsewhere_no_sync",
       "explicit seed filled late on the default stream; backward with S current, no sync",
       seed_on_default, seed_filled_elsewhere_no_sync},
      {"seed_filled_elsewhere_synced",
       "as seed_filled_elsewhere_no_sync, plus S.wait_stream(default) and record_stream(S)",
       read_on_caller, seed_filled_elsewhere_synced},
      {"fork_join", "x read on two side streams that wait for default; joined on default",
       never, fork_join},
      {"grads_read_elsewhere_no_wait",
       "backward on S (late); x.grad copied on R at once, without R.wait_stream(S)", always,
       grads_read_elsewhere_no_wait},
      {"grads_read_elsewhere_wait",
       "backward on S (late); R.wait_stream(S), record_stream(R), then x.grad copied on R",
       never, grads_read_elsewhere_wait},
      {"free_while_read_elsewhere",
       "t made on P, read late on R, dropped on the host; a new tensor on P reuses its block",
       always, free_while_read_unrecorded},
      {"free_while_read_elsewhere_recorded",
       "as free_while_read_elsewhere, with t.storage().record_stream(R) before the drop", never,
       free_while_read_recorded},
      {"cross_device_copy",
       "to(device 1), compute, to(device 0) on side streams of both devices; backward copies "
       "back",
       never, cross_device_copy, 2},
      {"leaf_sync",
       "leaf grads accumulated on F; read on S right after backward with S current",
       seed_on_caller_or_read_on_caller, leaf_sync},
  };
  return catalogue;
}

const RaceScenario* find_race_scenario(const std::string& name) {
  for (const RaceScenario& s : race_scenarios()) {
    if (name == s.name) return &s;
  }
  return nullptr;
}

}  // namespace streamgrad
