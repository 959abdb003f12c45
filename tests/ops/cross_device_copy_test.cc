#include "runtime/sim/sim.h"
#include "runtime/stream_sanitizer.h"
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

void body(uint64_t seed, bool grad, bool src_side, bool dtype) {
  StreamSanitizer san(StreamSanitizer::Mode::kCollect);
  const Stream side = Stream::create(Device("sim:1"));
  const Stream side0 = Stream::create(Device("sim:0"));
  Tensor src;
  {
    std::optional<StreamGuard> g0;
    if (src_side) g0.emplace(side0);
    src = input(random_values(64, seed), {64}, Device("sim:0"), grad);
    if (dtype) src = to(src, DType::kFloat32);
    src = mul(src, 1.0);
  }
  std::vector<double> got;
  {
    StreamGuard g(side);
    Tensor base = zeros({64}, f64(Device("sim:1")));
    if (grad) base.requires_grad_();
    Tensor dst = mul(base, 3.0);
    {
      std::optional<StreamGuard> g0;
      if (src_side) g0.emplace(side0);
      copy_(dst, src);
    }
    Tensor y = mul(dst, 2.0);
    got = values(y);
    if (grad) {
      sum(y).backward();
    }
  }
  std::vector<double> want = random_values(64, seed);
  for (double& w : want) w *= 2;
  if (!dtype) CHECK(got == want);
  for (auto& f : san.findings()) WARN(f.message);
  CHECK(san.findings().empty());
}

TEST_CASE("probe", "[probe]") {
  const uint64_t seed = GENERATE(range<uint64_t>(0, 10));
  const bool grad = GENERATE(false, true);
  const bool src_side = GENERATE(false, true);
  const bool dtype = GENERATE(false, true);
  SimSchedulerScope scope({SimSchedulerKind::kDeterministic, SimPolicy::kAdversarial, seed});
  body(seed, grad, src_side, dtype);
}
TEST_CASE("probe threaded", "[probe]") {
  for (int i = 0; i < 50; ++i) body(i, true, true, false);
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad
