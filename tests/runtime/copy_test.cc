// Copies host <-> device and device <-> device, blocking and non-blocking, ordered
// against both devices' current streams (S7).
#include "runtime/memory/copy.h"

#include <catch2/catch.hpp>
#include <numeric>
#include <vector>

#include "runtime/runtime.h"

namespace streamgrad {
namespace {

SimSchedulerOptions adversarial(uint64_t seed) {
  SimSchedulerOptions o;
  o.kind = SimSchedulerKind::kDeterministic;
  o.policy = SimPolicy::kAdversarial;
  o.seed = seed;
  return o;
}

std::vector<float> iota(size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 1.0f);
  return v;
}

TEST_CASE("blocking round trip host -> sim -> host", "[copy]") {
  const auto src = iota(1000);
  std::vector<float> back(1000, 0);
  Storage dev = Storage::allocate(4000, Device("sim:0"));
  copy_bytes(dev.data(), "sim:0", src.data(), "cpu", 4000);
  copy_bytes(back.data(), "cpu", dev.data(), "sim:0", 4000);
  CHECK(back == src);
}

TEST_CASE("copies are ordered on the current stream, even under the adversarial policy",
          "[copy]") {
  SimSchedulerScope scope(adversarial(1));
  const Stream side = Stream::create("sim:0");
  StreamGuard g(side);
  Storage dev = Storage::allocate(4, Device("sim:0"));
  fill_async(side, dev.data(), 0, 4);
  sleep(side, 1000);
  fill_async(side, dev.data(), 0x3c, 4);
  int32_t out = 0;
  copy_bytes(&out, "cpu", dev.data(), "sim:0", 4);
  CHECK(out == 0x3c3c3c3c);
}

TEST_CASE("non-blocking copies from pinned memory do not wait; from pageable they do",
          "[copy]") {
  SimSchedulerScope scope(adversarial(0));  // nothing runs unless the host waits
  const Stream s = current_stream("sim:0");
  Storage dev = Storage::allocate(64, Device("sim:0"));
  float* pinned = static_cast<float*>(pinned_alloc(64));
  for (int i = 0; i < 16; ++i) pinned[i] = static_cast<float>(i);
  copy_bytes(dev.data(), "sim:0", pinned, "cpu", 64, /*non_blocking=*/true);
  CHECK_FALSE(s.query());  // enqueued only
  std::vector<float> pageable(16, 0);
  copy_bytes(pageable.data(), "cpu", dev.data(), "sim:0", 64, /*non_blocking=*/true);
  CHECK(s.query());  // pageable destination: the copy completed before returning
  CHECK(pageable[15] == 15.0f);
  pinned_free(pinned);
}

TEST_CASE("sim:0 -> sim:1 copies wait for both devices' current streams", "[copy][S7]") {
  for (uint64_t seed = 0; seed < 50; ++seed) {
    SimSchedulerScope scope(adversarial(seed));
    const Stream s0 = Stream::create("sim:0"), s1 = Stream::create("sim:1");
    DeviceGuard g0("sim:0");
    g0.set_stream(s0);
    DeviceGuard g1("sim:1");
    g1.set_stream(s1);
    Storage a = Storage::allocate(4, Device("sim:0"));
    Storage b = Storage::allocate(4, Device("sim:1"));
    fill_async(s1, b.data(), 0, 4);         // earlier user of the destination
    fill_async(s0, a.data(), 0x11, 4);      // producer of the source
    copy_bytes(b.data(), "sim:1", a.data(), "sim:0", 4);
    int32_t out = 0;
    copy_bytes(&out, "cpu", b.data(), "sim:1", 4);  // consumer on sim:1's current stream
    INFO("seed " << seed);
    CHECK(out == 0x11111111);
  }
}

TEST_CASE("sim:0 -> sim:1 copies are ordered under the threaded scheduler with jitter",
          "[copy][S7][threaded]") {
  SimSchedulerOptions o;
  o.jitter_us = 30;
  o.seed = 11;
  SimSchedulerScope scope(o);
  // Reused across runs: streams are never destroyed, so each run would add more.
  const Stream s0 = Stream::create("sim:0"), s1 = Stream::create("sim:1");
  DeviceGuard g0("sim:0");
  g0.set_stream(s0);
  DeviceGuard g1("sim:1");
  g1.set_stream(s1);
  int wrong = 0;
  for (int run = 0; run < 1000; ++run) {
    Storage a = Storage::allocate(4, Device("sim:0"));
    Storage b = Storage::allocate(4, Device("sim:1"));
    fill_async(s1, b.data(), 0, 4);
    fill_async(s0, a.data(), static_cast<unsigned char>(run), 4);
    copy_bytes(b.data(), "sim:1", a.data(), "sim:0", 4);
    unsigned char out[4] = {};
    copy_bytes(out, "cpu", b.data(), "sim:1", 4);
    if (out[3] != static_cast<unsigned char>(run)) ++wrong;
  }
  CHECK(wrong == 0);
}

TEST_CASE("device to device on one device, and zero-byte copies", "[copy]") {
  Storage a = Storage::allocate(8, Device("sim:1"));
  Storage b = Storage::allocate(8, Device("sim:1"));
  const int64_t v = 0x0102030405060708;
  copy_bytes(a.data(), "sim:1", &v, "cpu", 8);
  copy_bytes(b.data(), "sim:1", a.data(), "sim:1", 8);
  int64_t out = 0;
  copy_bytes(&out, "cpu", b.data(), "sim:1", 8);
  CHECK(out == v);
  copy_bytes(nullptr, "sim:0", nullptr, "cpu", 0);
  CHECK_THROWS_AS(copy_bytes(&out, "cpu", b.data(), "sim:4", 8), DeviceError);
}

}  // namespace
}  // namespace streamgrad
