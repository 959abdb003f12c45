// Helpers of the GradScaler tests (grad_scaler_test.cc, grad_scaler_run_test.cc): parameter
// and gradient specs over cpu, sim:0 and sim:1 in float32 and float64, exactly
// representable values, gradients with an Inf or NaN at a chosen place, host copies, and a
// launch observer that counts the fused unscale launches.
//
// Thread-safety: the observer is; the rest is for the test thread. Failure: Catch2.
#ifndef STREAMGRAD_TESTS_NN_GRAD_SCALER_TEST_UTIL_H_
#define STREAMGRAD_TESTS_NN_GRAD_SCALER_TEST_UTIL_H_

#include "nn/grad_scaler.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "nn/checkpoint.h"
#include "nn/layers.h"
#include "nn/optim.h"
#include "ops/ops.h"
#include "runtime/runtime.h"
#include "tests/device_names.h"


namespace streamgrad {
namespace grad_scaler_testing {

using Catch::Matchers::Contains;
using Layers = std::vector<std::shared_ptr<nn::Module>>;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr const char* kUnscale = "non_finite_check_and_unscale";

struct Spec {
  Shape shape;
  DType dtype;
  std::string device;
  bool transposed = false;  // gradients are transposed views (non-contiguous)
};

// Five (device, dtype) groups: cpu, sim:0 and sim:1; float32 and float64.
inline const std::vector<Spec> kMixed = {
    {{3, 4}, DType::kFloat32, "cpu"},         {{5}, DType::kFloat64, "cpu"},
    {{2, 3}, DType::kFloat32, "sim:0", true}, {{4}, DType::kFloat32, "sim:0"},
    {{3, 3}, DType::kFloat64, "sim:1", true}, {{6}, DType::kFloat32, "sim:1"},
};

// Exactly representable values, so that scaling by powers of two is exact.
inline std::vector<double> values(const Spec& s, double seed) {
  std::vector<double> v(static_cast<size_t>(numel_of(s.shape)));
  for (size_t k = 0; k < v.size(); ++k) v[k] = seed + 0.125 * static_cast<double>(k % 9) - 0.5;
  return v;
}

// A tensor of spec s whose storage holds `v` row-major (before the transpose).
inline Tensor make(const Spec& s, const std::vector<double>& v) {
  NoGradGuard no_grad;
  Shape stored = s.shape;
  if (s.transposed) std::swap(stored[0], stored[1]);
  Tensor t = to(from_vector<double>(v, stored, TensorOptions().dtype(DType::kFloat64)), s.dtype);
  t = to(t, Device(s.device));
  return s.transposed ? transpose(t, 0, 1) : t;
}

inline std::vector<Tensor> make_params(const std::vector<Spec>& specs) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < specs.size(); ++i) {
    Spec p = specs[i];
    p.transposed = false;
    out.push_back(make(p, values(p, 1.0 + i)).detach().requires_grad_());
  }
  return out;
}

// Step `step`'s gradients times `scale`; grad `bad_param` (if any) holds `bad` at storage
// position `pos`.
inline void set_grads(const std::vector<Tensor>& params, const std::vector<Spec>& specs, double scale,
               int step, int bad_param = -1, size_t pos = 0, double bad = kInf) {
  for (size_t i = 0; i < params.size(); ++i) {
    std::vector<double> v = values(specs[i], 10.0 * step + 1.0 + i);
    for (double& x : v) x *= scale;
    if (static_cast<int>(i) == bad_param) v.at(pos) = bad;
    params[i].set_grad(make(specs[i], v));
  }
}

inline std::vector<double> host(const Tensor& t) {
  NoGradGuard no_grad;
  return to(to(t, DType::kFloat64), Device("cpu")).to_vector<double>();
}

inline std::vector<std::vector<double>> host_all(const std::vector<Tensor>& ts) {
  std::vector<std::vector<double>> out;
  for (const Tensor& t : ts) out.push_back(host(t));
  return out;
}

inline std::vector<std::vector<double>> host_state(const nn::Optimizer& opt) {
  std::vector<Tensor> ts;
  for (const auto& [name, t] : opt.state_dict().tensors) ts.push_back(t);
  return host_all(ts);
}

// The kernel launches (not copies) made while it lives: names and streams.
class Launches : public LaunchObserver {
 public:
  Launches() { add_launch_observer(this); }
  ~Launches() override { remove_launch_observer(this); }
  void on_launch(const Stream& s, const LaunchDesc& d) override {
    if (d.kind != LaunchKind::kKernel) return;
    std::lock_guard<std::mutex> lk(mu_);
    seen_.emplace_back(d.name, s);
  }
  std::vector<Stream> streams_of(const std::string& name) {
    std::lock_guard<std::mutex> lk(mu_);
    std::vector<Stream> out;
    for (const auto& [n, s] : seen_) {
      if (n == name) out.push_back(s);
    }
    return out;
  }
  size_t count(const std::string& name) { return streams_of(name).size(); }

 private:
  std::mutex mu_;
  std::vector<std::pair<std::string, Stream>> seen_;
};

}  // namespace grad_scaler_testing
}  // namespace streamgrad

#endif  // STREAMGRAD_TESTS_NN_GRAD_SCALER_TEST_UTIL_H_
