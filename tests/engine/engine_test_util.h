// Helpers for engine tests: scheduler scopes and small graphs on sim devices.
#ifndef STREAMGRAD_TESTS_ENGINE_ENGINE_TEST_UTIL_H_
#define STREAMGRAD_TESTS_ENGINE_ENGINE_TEST_UTIL_H_

#include <cstdint>
#include <exception>
#include <string>

#include "engine/backward.h"
#include "engine/factories.h"
#include "engine/function.h"
#include "engine/grad_mode.h"
#include "ops/ops.h"
#include "kernels/kernels.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace testing {

inline SimSchedulerOptions adversarial(uint64_t seed) {
  SimSchedulerOptions o;
  o.kind = SimSchedulerKind::kDeterministic;
  o.policy = SimPolicy::kAdversarial;
  o.seed = seed;
  return o;
}

inline SimSchedulerOptions threaded_jitter(uint64_t seed, double jitter_us = 20) {
  SimSchedulerOptions o;
  o.kind = SimSchedulerKind::kThreaded;
  o.jitter_us = jitter_us;
  o.seed = seed;
  return o;
}

// Reused streams: streams live for the whole process, so tests do not make new ones per case.
inline Stream side_stream(int device, int which) {
  static const Stream s[2][3] = {
      {Stream::create("sim:0"), Stream::create("sim:0"), Stream::create("sim:0")},
      {Stream::create("sim:1"), Stream::create("sim:1"), Stream::create("sim:1")}};
  return s[device][which];
}

// Lets `to` use `t`, which was produced on its stamp stream: `to` waits for that stream,
// and the buffer is protected from reuse until `to` is done with it (S8).
inline void hand_over(const Tensor& t, const Stream& to) {
  to.wait_stream(t.stream());
  t.storage().record_stream(to);
}

// float64 on `d`: gradcheck's inputs.
inline TensorOptions f64(Device d = Device("cpu")) {
  return TensorOptions().dtype(DType::kFloat64).device(d);
}

// The message of the exception of type E that `fn` throws, or a text saying that it threw
// another type or nothing: one call checks type and message together.
template <typename E, typename F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<an exception of another type: ") + e.what() + ">";
  }
  return "<no exception>";
}

}  // namespace testing
}  // namespace streamgrad

#endif  // STREAMGRAD_TESTS_ENGINE_ENGINE_TEST_UTIL_H_
