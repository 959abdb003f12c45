// The optimisers' foreach path (one multi-tensor launch per device and dtype) against the
// per-tensor path: the same bits over several steps with momentum, dampening, nesterov,
// weight decay and Adam's bias correction, with gradients missing for some parameters
// (skipped, as the reference does), non-contiguous parameters and gradients, mixed
// dtypes and devices, on cpu and sim; one launch per group; declared accesses seen by the
// stream sanitizer; zero_grad leaves gradients undefined.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "nn/optim.h"
#include "ops/ops.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace {

struct Spec {
  Shape shape;
  DType dtype;
  std::string device;
  bool transposed = false;  // the parameter is a transposed (non-contiguous) leaf
};

// Every group the foreach path forms: cpu and two sim devices, float32 and float64, one
// parameter of each group non-contiguous, one empty.
const std::vector<Spec> kMixed = {
    {{3, 4}, DType::kFloat32, "cpu"},         {{5}, DType::kFloat32, "cpu", false},
    {{2, 3}, DType::kFloat64, "cpu", true},   {{4, 2}, DType::kFloat32, "sim:0", true},
    {{7}, DType::kFloat32, "sim:0"},          {{0, 3}, DType::kFloat32, "sim:0"},
    {{3, 3}, DType::kFloat64, "sim:1"},       {{6}, DType::kFloat32, "sim:1"},
};

// Deterministic values that fill the mantissa (no RNG: both runs see the same numbers).
Tensor values_like(const Spec& s, double seed) {
  Shape stored = s.shape;
  if (s.transposed) std::swap(stored[0], stored[1]);
  std::vector<double> v(static_cast<size_t>(numel_of(stored)));
  for (size_t k = 0; k < v.size(); ++k) v[k] = std::sin(seed * 12.9898 + k * 78.233) * 1.7;
  Tensor t = to(from_vector<double>(v, stored, TensorOptions().dtype(DType::kFloat64)), s.dtype);
  t = to(t, Device(s.device));
  return s.transposed ? transpose(t, 0, 1) : t;
}

std::vector<Tensor> make_params(const std::vector<Spec>& specs) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < specs.size(); ++i) {
    out.push_back(values_like(specs[i], 1.0 + i).detach().requires_grad_());
  }
  return out;
}

// Step s's gradients: parameter i has none when (i + s) % 4 == 3 (unless `all`); odd
// steps give transposed parameters transposed (non-contiguous) gradients.
void set_grads(const std::vector<Tensor>& params, const std::vector<Spec>& specs, int s,
               bool all = false) {
  for (size_t i = 0; i < params.size(); ++i) {
    if (!all && (i + s) % 4 == 3) {
      params[i].set_grad(Tensor());
      continue;
    }
    Spec gs = specs[i];
    gs.transposed = specs[i].transposed && s % 2 == 1;
    params[i].set_grad(values_like(gs, 100.0 + 10 * s + i).detach());
  }
}

void run(nn::Optimizer& opt, const std::vector<Tensor>& params, const std::vector<Spec>& specs,
         int steps) {
  for (int s = 0; s < steps; ++s) {
    set_grads(params, specs, s);
    opt.step();
  }
}

// The values as doubles (exact for float32).
std::vector<double> host_values(const Tensor& t) {
  NoGradGuard no_grad;
  return to(to(t, DType::kFloat64), Device("cpu")).to_vector<double>();
}

// Bit for bit: the values as doubles (exact for float32), NaN never expected.
void check_same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("tensor " << i);
    CHECK(host_values(a[i]) == host_values(b[i]));
  }
}

void check_same_state(const nn::Optimizer& a, const nn::Optimizer& b) {
  const nn::OptimizerState sa = a.state_dict(), sb = b.state_dict();
  REQUIRE(sa.tensors.size() == sb.tensors.size());
  for (size_t k = 0; k < sa.tensors.size(); ++k) {
    INFO("state " << sa.tensors[k].first);
    CHECK(sa.tensors[k].first == sb.tensors[k].first);
    CHECK(host_values(sa.tensors[k].second) == host_values(sb.tensors[k].second));
  }
  CHECK(sa.scalars == sb.scalars);
}

TEST_CASE("foreach SGD gives the per-tensor path's bits", "[nn][optim][foreach]") {
  struct Case {
    const char* what;
    nn::SGDOptions o;
  };
  const std::vector<Case> cases = {
      {"plain", nn::SGDOptions(0.1)},
      {"weight decay", nn::SGDOptions(0.05).weight_decay(0.01)},
      {"momentum, dampening, decay", nn::SGDOptions(0.1).momentum(0.9).dampening(0.3).weight_decay(0.05)},
      {"nesterov", nn::SGDOptions(0.07).momentum(0.8).nesterov(true).weight_decay(0.02)},
      {"decay 1, momentum", nn::SGDOptions(0.01).momentum(0.5).weight_decay(1.0)},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const std::vector<Tensor> fused = make_params(kMixed), plain = make_params(kMixed);
    nn::SGD a(fused, nn::SGDOptions(c.o).foreach(true));
    nn::SGD b(plain, nn::SGDOptions(c.o).foreach(false));
    run(a, fused, kMixed, 6);
    run(b, plain, kMixed, 6);
    check_same_bits(fused, plain);
    check_same_state(a, b);
  }
}

TEST_CASE("foreach Adam and AdamW give the per-tensor path's bits", "[nn][optim][foreach]") {
  const bool decoupled = GENERATE(false, true);
  const double wd = GENERATE(0.0, 0.1);
  INFO((decoupled ? "AdamW" : "Adam") << ", weight decay " << wd);
  const nn::AdamOptions o = nn::AdamOptions(0.03).beta1(0.8).beta2(0.95).eps(1e-6).weight_decay(wd);
  const std::vector<Tensor> fused = make_params(kMixed), plain = make_params(kMixed);
  std::unique_ptr<nn::Optimizer> a, b;
  if (decoupled) {
    a = std::make_unique<nn::AdamW>(fused, nn::AdamOptions(o).foreach(true));
    b = std::make_unique<nn::AdamW>(plain, nn::AdamOptions(o).foreach(false));
  } else {
    a = std::make_unique<nn::Adam>(fused, nn::AdamOptions(o).foreach(true));
    b = std::make_unique<nn::Adam>(plain, nn::AdamOptions(o).foreach(false));
  }
  run(*a, fused, kMixed, 6);
  run(*b, plain, kMixed, 6);
  check_same_bits(fused, plain);
  check_same_state(*a, *b);
}

TEST_CASE("foreach steps agree under the adversarial sim scheduler", "[nn][optim][foreach]") {
  SimSchedulerOptions det;
  det.kind = SimSchedulerKind::kDeterministic;
  det.policy = SimPolicy::kAdversarial;
  det.seed = 7;
  SimSchedulerScope scope(det);
  const std::vector<Tensor> fused = make_params(kMixed), plain = make_params(kMixed);
  nn::SGD a(fused, nn::SGDOptions(0.1).momentum(0.9).nesterov(true));
  nn::SGD b(plain, nn::SGDOptions(0.1).momentum(0.9).nesterov(true).foreach(false));
  run(a, fused, kMixed, 4);
  run(b, plain, kMixed, 4);
  check_same_bits(fused, plain);
}

// The kernel launches (not the tests' copies) made while it lives.
class KernelLaunches : public LaunchObserver {
 public:
  KernelLaunches() { add_launch_observer(this); }
  ~KernelLaunches() override { remove_launch_observer(this); }
  void on_launch(const Stream& s, const LaunchDesc& d) override {
    if (d.kind != LaunchKind::kKernel) return;
    std::lock_guard<std::mutex> lk(mu_);
    seen_.push_back({d.name, s});
  }
  std::vector<std::pair<std::string, Stream>> seen() {
    std::lock_guard<std::mutex> lk(mu_);
    return seen_;
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<std::string, Stream>> seen_;
};

TEST_CASE("one foreach step is one launch per (device, dtype) group", "[nn][optim][foreach]") {
  SECTION("SGD with momentum over N parameters of one group") {
    std::vector<Spec> specs;
    for (int i = 0; i < 12; ++i) specs.push_back({{3, 2}, DType::kFloat32, "sim:0", i % 3 == 0});
    const std::vector<Tensor> params = make_params(specs);
    nn::SGD opt(params, nn::SGDOptions(0.1).momentum(0.9).weight_decay(0.01));
    for (int s = 0; s < 2; ++s) {  // the first step creates the buffers, the second reads them
      set_grads(params, specs, 0);
      KernelLaunches launches;
      opt.step();
      REQUIRE(launches.seen().size() == 1);
      CHECK(launches.seen()[0].first == "sgd_update");
      CHECK(launches.seen()[0].second == current_stream(Device("sim:0")));
    }
  }
  SECTION("mixed devices and dtypes: SGD and AdamW") {
    const std::vector<Tensor> params = make_params(kMixed);
    set_grads(params, kMixed, 1, /*all=*/true);
    nn::SGD sgd(params, nn::SGDOptions(0.1).momentum(0.9));
    nn::AdamW adamw(params);
    for (nn::Optimizer* opt : std::vector<nn::Optimizer*>{&sgd, &adamw}) {
      KernelLaunches launches;
      opt->step();
      // cpu float32, cpu float64, sim:0 float32, sim:1 float64, sim:1 float32.
      CHECK(launches.seen().size() == 5);
    }
    KernelLaunches per_tensor;
    nn::SGD slow(params, nn::SGDOptions(0.1).momentum(0.9).foreach(false));
    slow.step();
    CHECK(per_tensor.seen().size() > 5);  // what foreach saves: several kernels per parameter
  }
}

TEST_CASE("the foreach launch declares what it reads and writes", "[nn][optim][foreach]") {
  // Gradients made on a side stream: a step on the default stream without waiting for it
  // reads them unordered, which the sanitizer can only see if the launch declares them.
  const Device dev("sim:0");
  const Stream side = Stream::create(dev);
  const std::vector<Spec> specs = {{{4}, DType::kFloat32, "sim:0"}, {{2, 2}, DType::kFloat32, "sim:0"}};
  const std::vector<Tensor> params = make_params(specs);
  nn::SGD opt(params, nn::SGDOptions(0.1).momentum(0.9));
  const bool wait = GENERATE(false, true);
  INFO((wait ? "with a wait" : "without a wait"));
  // Races on purpose: the process-wide sanitizer (CI runs the suite under
  // STREAMGRAD_SANITIZE_STREAMS=1) must not throw for them; this one collects.
  SanitizerSuppression races_on_purpose;
  StreamSanitizer sanitizer(StreamSanitizer::Mode::kCollect);
  side.wait_stream(current_stream(dev));  // the parameters were made on the default stream
  for (const Tensor& p : params) {
    StreamGuard on_side(side);
    p.set_grad(mul(ones_like(p), 2.0));
  }
  if (wait) current_stream(dev).wait_stream(side);
  for (const Tensor& p : params) p.grad().storage().record_stream(current_stream(dev));
  opt.step();
  synchronize(dev);
  CHECK(sanitizer.findings().empty() == wait);
  for (const SanitizerFinding& f : sanitizer.findings()) CHECK(f.current.op == "sgd_update");
}

TEST_CASE("a foreach step bumps the versions of what it writes", "[nn][optim][foreach]") {
  const std::vector<Tensor> params = make_params(kMixed);
  nn::SGD opt(params, nn::SGDOptions(0.1).momentum(0.9));
  set_grads(params, kMixed, 0, /*all=*/true);
  opt.step();  // creates the momentum buffers
  const Tensor& p = params[0];
  Tensor loss = sum(mul(p, p));  // saves p for backward
  const uint32_t version = p.version();
  const Tensor buf = opt.state_dict().tensors[0].second;
  const uint32_t buf_version = buf.version();
  opt.step();
  CHECK(p.version() > version);
  CHECK(buf.version() > buf_version);
  CHECK_THROWS_WITH(loss.backward(), Catch::Contains("modified"));
}

TEST_CASE("zero_grad leaves gradients undefined; zero_grad(false) zeroes them",
          "[nn][optim][foreach]") {
  const std::vector<Tensor> params = make_params(kMixed);
  nn::Adam opt(params, nn::AdamOptions());
  set_grads(params, kMixed, 0);
  opt.step();
  opt.zero_grad();
  for (const Tensor& p : params) CHECK_FALSE(p.grad().defined());
  set_grads(params, kMixed, 0);
  opt.zero_grad(/*set_to_none=*/false);
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor g = params[i].grad();
    if (!g.defined()) continue;  // had none this step
    for (double v : host_values(g)) CHECK(v == 0.0);
  }
}

}  // namespace
}  // namespace streamgrad
