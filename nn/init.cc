#include "nn/init.h"

#include <cmath>

#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "ops/ops.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace nn {
namespace init {
namespace {

thread_local bool t_skip_init = false;

TensorOptions options_of(const Tensor& t) {
  return TensorOptions().dtype(t.dtype()).device(t.device());
}

Tensor fill_with(Tensor t, const Tensor& values) {
  NoGradGuard no_grad;
  copy_(t, values);
  return t;
}

double fan(const Tensor& t, FanMode mode) {
  const auto [in, out] = calculate_fan_in_and_fan_out(t);
  return static_cast<double>(mode == FanMode::kFanIn ? in : out);
}

}  // namespace

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  SG_CHECK(t.dim() >= 2, ValueError, "init: fan in and fan out need at least 2 dims, got ",
           t.describe());
  int64_t field = 1;
  for (int64_t d = 2; d < t.dim(); ++d) field *= t.size(d);
  return {t.size(1) * field, t.size(0) * field};
}

double calculate_gain(Nonlinearity nonlinearity, double param) {
  switch (nonlinearity) {
    case Nonlinearity::kLinear:
    case Nonlinearity::kSigmoid:
      return 1;
    case Nonlinearity::kRelu:
      return std::sqrt(2.0);
    case Nonlinearity::kLeakyRelu:
      return std::sqrt(2.0 / (1 + param * param));
    case Nonlinearity::kTanh:
      return 5.0 / 3;
  }
  return 1;
}

NoInitGuard::NoInitGuard() : previous_(t_skip_init) { t_skip_init = true; }
NoInitGuard::~NoInitGuard() { t_skip_init = previous_; }

Tensor uniform_(Tensor t, double low, double high) {
  SG_CHECK(low <= high, ValueError, "init::uniform_: low ", low, " is above high ", high);
  if (t_skip_init) return t;
  NoGradGuard no_grad;
  return fill_with(t, add(mul(rand(t.sizes(), options_of(t)), high - low), low));
}

Tensor normal_(Tensor t, double mean, double std) {
  SG_CHECK(std >= 0, ValueError, "init::normal_: std ", std, " is negative");
  if (t_skip_init) return t;
  NoGradGuard no_grad;
  return fill_with(t, add(mul(randn(t.sizes(), options_of(t)), std), mean));
}

Tensor constant_(Tensor t, double value) {
  if (t_skip_init) return t;
  NoGradGuard no_grad;
  fill_(t, value);
  return t;
}
Tensor zeros_(Tensor t) { return constant_(t, 0); }
Tensor ones_(Tensor t) { return constant_(t, 1); }

Tensor kaiming_uniform_(Tensor t, double a, FanMode mode, Nonlinearity nonlinearity) {
  const double bound = std::sqrt(3.0) * calculate_gain(nonlinearity, a) / std::sqrt(fan(t, mode));
  return uniform_(t, -bound, bound);
}

Tensor kaiming_normal_(Tensor t, double a, FanMode mode, Nonlinearity nonlinearity) {
  return normal_(t, 0, calculate_gain(nonlinearity, a) / std::sqrt(fan(t, mode)));
}

Tensor xavier_uniform_(Tensor t, double gain) {
  const auto [in, out] = calculate_fan_in_and_fan_out(t);
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(in + out));
  return uniform_(t, -bound, bound);
}

}  // namespace init
}  // namespace nn
}  // namespace streamgrad
