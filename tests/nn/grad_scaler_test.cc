// nn::GradScaler, with the behaviours the reference framework's grad-scaling tests check:
// unscale_ gives grads / scale and finds nothing in finite grads; one Inf or NaN in any
// gradient (any device, dtype, position, non-contiguous ones included) skips the step
// and leaves the parameters and the optimiser's state as they were; update() backs off
// and grows with its tracker as _amp_update_scale_ does; calls out of order are refused;
// step after unscale_ does not unscale again; a disabled scaler changes nothing; a scaled
// run (skipped iteration included, one or two optimisers) ends where the unscaled run
// does; state_dict goes through a checkpoint and back. Also: one fused launch per
// (device, dtype) group, and no host synchronisation before step reads the flags.
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
namespace {

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
const std::vector<Spec> kMixed = {
    {{3, 4}, DType::kFloat32, "cpu"},         {{5}, DType::kFloat64, "cpu"},
    {{2, 3}, DType::kFloat32, "sim:0", true}, {{4}, DType::kFloat32, "sim:0"},
    {{3, 3}, DType::kFloat64, "sim:1", true}, {{6}, DType::kFloat32, "sim:1"},
};

// Exactly representable values, so that scaling by powers of two is exact.
std::vector<double> values(const Spec& s, double seed) {
  std::vector<double> v(static_cast<size_t>(numel_of(s.shape)));
  for (size_t k = 0; k < v.size(); ++k) v[k] = seed + 0.125 * static_cast<double>(k % 9) - 0.5;
  return v;
}

// A tensor of spec s whose storage holds `v` row-major (before the transpose).
Tensor make(const Spec& s, const std::vector<double>& v) {
  NoGradGuard no_grad;
  Shape stored = s.shape;
  if (s.transposed) std::swap(stored[0], stored[1]);
  Tensor t = to(from_vector<double>(v, stored, TensorOptions().dtype(DType::kFloat64)), s.dtype);
  t = to(t, Device(s.device));
  return s.transposed ? transpose(t, 0, 1) : t;
}

std::vector<Tensor> make_params(const std::vector<Spec>& specs) {
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
void set_grads(const std::vector<Tensor>& params, const std::vector<Spec>& specs, double scale,
               int step, int bad_param = -1, size_t pos = 0, double bad = kInf) {
  for (size_t i = 0; i < params.size(); ++i) {
    std::vector<double> v = values(specs[i], 10.0 * step + 1.0 + i);
    for (double& x : v) x *= scale;
    if (static_cast<int>(i) == bad_param) v.at(pos) = bad;
    params[i].set_grad(make(specs[i], v));
  }
}

std::vector<double> host(const Tensor& t) {
  NoGradGuard no_grad;
  return to(to(t, DType::kFloat64), Device("cpu")).to_vector<double>();
}

std::vector<std::vector<double>> host_all(const std::vector<Tensor>& ts) {
  std::vector<std::vector<double>> out;
  for (const Tensor& t : ts) out.push_back(host(t));
  return out;
}

std::vector<std::vector<double>> host_state(const nn::Optimizer& opt) {
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

TEST_CASE("scale multiplies the loss by the scale, differentiably, on its device", "[nn][amp]") {
  const Device d(GENERATE(from_range(testing::device_names())));
  nn::GradScaler scaler(nn::GradScalerOptions().init_scale(1024));
  Tensor w = to(from_vector<float>({1, 2, 3}), d).detach().requires_grad_();
  Tensor loss = sum(mul(w, w));
  Tensor scaled = scaler.scale(loss);
  CHECK(scaled.device() == d);
  CHECK(scaled.item<float>() == 14.0f * 1024);
  scaled.backward();
  CHECK(host(w.grad()) == std::vector<double>{2048, 4096, 6144});
  const std::vector<Tensor> both = scaler.scale(std::vector<Tensor>{loss, mul(loss, 2.0)});
  REQUIRE(both.size() == 2);
  CHECK(both[1].item<float>() == 28.0f * 1024);
  CHECK_THROWS_AS(scaler.scale(Tensor()), ValueError);
}

TEST_CASE(
    "unscale_ leaves grads / scale, one launch per (device, dtype) group; step steps on "
    "them without unscaling again",
    "[nn][amp]") {
  const double scale = 1024;
  const std::vector<Tensor> scaled = make_params(kMixed), plain = make_params(kMixed);
  nn::SGD opt(scaled, nn::SGDOptions(0.5).momentum(0.9));
  nn::SGD reference(plain, nn::SGDOptions(0.5).momentum(0.9));
  nn::GradScaler scaler(nn::GradScalerOptions().init_scale(scale));
  const std::vector<Stream> expected_streams = {current_stream(Device("cpu")),
                                                current_stream(Device("sim:0")),
                                                current_stream(Device("sim:1"))};
  for (int s = 0; s < 3; ++s) {
    INFO("iteration " << s);
    set_grads(scaled, kMixed, scale, s);
    set_grads(plain, kMixed, 1, s);
    std::vector<uint32_t> versions;
    for (const Tensor& p : scaled) versions.push_back(p.grad().version());
    {
      Launches launches;
      scaler.unscale_(opt);
      // cpu float32, cpu float64, sim:0 float32, sim:1 float64, sim:1 float32.
      const std::vector<Stream> streams = launches.streams_of(kUnscale);
      CHECK(streams.size() == 5);
      for (const Stream& st : streams) {
        CHECK(std::find(expected_streams.begin(), expected_streams.end(), st) !=
              expected_streams.end());
      }
    }
    for (size_t i = 0; i < scaled.size(); ++i) {
      INFO("parameter " << i);
      CHECK(host(scaled[i].grad()) == host(plain[i].grad()));
      CHECK(scaled[i].grad().version() > versions[i]);  // written in place
    }
    Launches launches;
    CHECK(scaler.step(opt));
    CHECK(launches.count(kUnscale) == 0);
    reference.step();
    scaler.update();
    CHECK(host_all(scaled) == host_all(plain));
    CHECK(host_state(opt) == host_state(reference));
  }
  CHECK(scaler.get_scale() == scale);  // 3 clean iterations of 2000
  CHECK(scaler.get_growth_tracker() == 3);
}

TEST_CASE("step unscales when unscale_ was not called: one launch per group, then the step",
          "[nn][amp]") {
  const std::vector<Tensor> scaled = make_params(kMixed), plain = make_params(kMixed);
  nn::Adam opt(scaled, nn::AdamOptions(0.01));
  nn::Adam reference(plain, nn::AdamOptions(0.01));
  nn::GradScaler scaler(nn::GradScalerOptions().init_scale(64));
  set_grads(scaled, kMixed, 64, 0);
  set_grads(plain, kMixed, 1, 0);
  Launches launches;
  CHECK(scaler.step(opt));
  CHECK(launches.count(kUnscale) == 5);
  reference.step();
  CHECK(host_all(scaled) == host_all(plain));
  CHECK(opt.state_dict().scalars == reference.state_dict().scalars);
}

TEST_CASE("undefined gradients are skipped", "[nn][amp]") {
  const std::vector<Tensor> params = make_params(kMixed);
  set_grads(params, kMixed, 8, 0);
  // The only float64 gradients (cpu and sim:1): their groups have nothing left.
  params[1].set_grad(Tensor());
  params[4].set_grad(Tensor());
  nn::SGD opt(params, nn::SGDOptions(0.5));
  nn::GradScaler scaler(nn::GradScalerOptions().init_scale(8));
  Launches launches;
  scaler.unscale_(opt);
  CHECK(launches.count(kUnscale) == 3);
  CHECK_FALSE(params[1].grad().defined());
  CHECK(host(params[0].grad()) == host(make(kMixed[0], values(kMixed[0], 1.0))));
  CHECK(scaler.step(opt));
}

TEST_CASE(
    "one Inf or NaN in any gradient, at any position, skips the step and keeps the "
    "optimiser's state",
    "[nn][amp]") {
  const bool adam = GENERATE(false, true);
  INFO((adam ? "Adam" : "SGD with momentum"));
  for (size_t i = 0; i < kMixed.size(); ++i) {
    const size_t n = static_cast<size_t>(numel_of(kMixed[i].shape));
    for (const size_t pos : {size_t{0}, size_t{1}, n - 1}) {
      for (const double bad : {kInf, -kInf, kNaN}) {
        INFO("gradient " << i << " (" << kMixed[i].device << ", " << dtype_name(kMixed[i].dtype)
                         << (kMixed[i].transposed ? ", transposed" : "") << "), storage position "
                         << pos << ": " << bad);
        const std::vector<Tensor> params = make_params(kMixed);
        std::unique_ptr<nn::Optimizer> opt;
        if (adam) {
          opt = std::make_unique<nn::Adam>(params, nn::AdamOptions(0.1));
        } else {
          opt = std::make_unique<nn::SGD>(params, nn::SGDOptions(0.1).momentum(0.9));
        }
        nn::GradScaler scaler(nn::GradScalerOptions().init_scale(256));
        set_grads(params, kMixed, 256, 0);
        REQUIRE(scaler.step(*opt));  // a clean step: the optimiser has state now
        scaler.update();
        const auto before = host_all(params);
        const auto state_before = host_state(*opt);
        const nn::OptimizerState scalars_before = opt->state_dict();
        set_grads(params, kMixed, 256, 1, static_cast<int>(i), pos, bad);
        CHECK_FALSE(scaler.step(*opt));
        CHECK(host_all(params) == before);
        CHECK(host_state(*opt) == state_before);
        CHECK(opt->state_dict().scalars == scalars_before.scalars);
        // The other gradients were unscaled all the same.
        const size_t j = (i + 1) % kMixed.size();
        CHECK(host(params[j].grad()) == host(make(kMixed[j], values(kMixed[j], 11.0 + j))));
        scaler.update();
        CHECK(scaler.get_scale() == 128);
        CHECK(scaler.get_growth_tracker() == 0);
      }
    }
  }
}

// One iteration of a scaled loop over one parameter: gradients of 1 at the current
// scale, Inf in the first element when `inf`; step, then update. Whether it stepped.
bool iterate(nn::GradScaler& scaler, nn::Optimizer& opt, const std::vector<Tensor>& params,
             const std::vector<Spec>& specs, bool inf) {
  set_grads(params, specs, scaler.get_scale(), 0, inf ? 0 : -1, 0, kInf);
  const bool stepped = scaler.step(opt);
  scaler.update();
  return stepped;
}

TEST_CASE(
    "update backs off on Inf and grows after growth_interval clean steps, resetting the "
    "tracker",
    "[nn][amp]") {
  const Device d(GENERATE(from_range(testing::device_names())));
  const std::vector<Spec> specs = {{{4}, DType::kFloat32, d.str()}};
  const std::vector<Tensor> params = make_params(specs);
  nn::SGD opt(params, nn::SGDOptions(0.1));
  // The reference test's numbers: growth 2, backoff 0.25, interval 2, scale 4.
  nn::GradScaler scaler(
      nn::GradScalerOptions().init_scale(4).growth_factor(2).backoff_factor(0.25).growth_interval(
          2));
  struct Expect {
    bool inf;
    double scale;
    int64_t tracker;
  };
  const std::vector<Expect> steps = {
      {false, 4, 1},   {false, 8, 0},  {true, 2, 0},
      {false, 2, 1},   {true, 0.5, 0},  // the backoff resets a tracker of 1
      {false, 0.5, 1}, {false, 1, 0},  {false, 1, 1},
  };
  for (size_t k = 0; k < steps.size(); ++k) {
    INFO("iteration " << k << (steps[k].inf ? " (Inf)" : ""));
    CHECK(iterate(scaler, opt, params, specs, steps[k].inf) == !steps[k].inf);
    CHECK(scaler.get_scale() == steps[k].scale);
    CHECK(scaler.get_growth_tracker() == steps[k].tracker);
  }
  SECTION("update() after unscale_ alone reads the flags itself") {
    set_grads(params, specs, scaler.get_scale(), 0, 0, 0, kNaN);
    scaler.unscale_(opt);
    scaler.update();
    CHECK(scaler.get_scale() == 0.25);
    CHECK(scaler.get_growth_tracker() == 0);
  }
  SECTION("update(new_scale) sets the scale, rounded to float32, and keeps the tracker") {
    set_grads(params, specs, scaler.get_scale(), 0);
    scaler.unscale_(opt);
    scaler.update(0.1);
    CHECK(scaler.get_scale() == static_cast<double>(0.1f));
    CHECK(scaler.get_growth_tracker() == 1);
    scaler.unscale_(opt);  // the iteration was ended
    CHECK_THROWS_AS(scaler.update(0.0), ValueError);
    CHECK_THROWS_AS(scaler.update(1e39), ValueError);  // infinite as a float32
    CHECK_THROWS_AS(scaler.update(kNaN), ValueError);
    CHECK(scaler.get_scale() == static_cast<double>(0.1f));
  }
  SECTION("a growth_interval lowered below the tracker grows at the next clean step") {
    CHECK(scaler.get_growth_tracker() == 1);
    scaler.set_growth_interval(1);
    iterate(scaler, opt, params, specs, false);
    CHECK(scaler.get_scale() == 2);
    CHECK(scaler.get_growth_tracker() == 0);
  }
}

TEST_CASE("one update per iteration over several optimisers: one backoff for any Inf",
          "[nn][amp]") {
  const std::vector<Spec> specs = {{{4}, DType::kFloat32, "sim:0"}};
  const std::vector<Tensor> a = make_params(specs), b = make_params(specs);
  nn::SGD opt_a(a, nn::SGDOptions(0.1)), opt_b(b, nn::SGDOptions(0.1));
  nn::GradScaler scaler(nn::GradScalerOptions().init_scale(16).growth_interval(1));
  set_grads(a, specs, 16, 0);
  set_grads(b, specs, 16, 0, 0, 2, kInf);
  const auto a_before = host_all(a), b_before = host_all(b);
  scaler.unscale_(opt_a);  // as the reference's test: one optimiser unscaled explicitly
  CHECK(scaler.step(opt_a));
  CHECK_FALSE(scaler.step(opt_b));
  scaler.update();
  CHECK(host_all(a) != a_before);
  CHECK(host_all(b) == b_before);
  CHECK(scaler.get_scale() == 8);
  set_grads(a, specs, 8, 0);
  set_grads(b, specs, 8, 0);
  CHECK(scaler.step(opt_a));
  CHECK(scaler.step(opt_b));
  scaler.update();
  CHECK(scaler.get_scale() == 16);
}

TEST_CASE("the scale never grows past float32's range", "[nn][amp]") {
  const std::vector<Spec> specs = {{{3}, DType::kFloat32, "cpu"}};
  const std::vector<Tensor> params = make_params(specs);
  nn::SGD opt(params, nn::SGDOptions(0.1));
  nn::GradScaler scaler(
      nn::GradScalerOptions().init_scale(1e38).growth_factor(16).growth_interval(1));
  const double start = static_cast<double>(1e38f);
  CHECK(scaler.get_scale() == start);
  params[0].set_grad(make(specs[0], {1e-30, 2e-30, 0}));
  CHECK(scaler.step(opt));
  scaler.update();
  CHECK(scaler.get_scale() == start);
  CHECK(scaler.get_growth_tracker() == 0);
}

TEST_CASE("calls out of order are refused, naming the call", "[nn][amp]") {
  const std::vector<Spec> specs = {{{4}, DType::kFloat32, "sim:0"}};
  const std::vector<Tensor> params = make_params(specs);
  nn::SGD opt(params, nn::SGDOptions(0.1));
  nn::GradScaler scaler;
  set_grads(params, specs, scaler.get_scale(), 0);
  scaler.unscale_(opt);
  const auto unscaled = host(params[0].grad());
  CHECK_THROWS_AS(scaler.unscale_(opt), Error);
  CHECK_THROWS_WITH(scaler.unscale_(opt),
                    Contains("GradScaler::unscale_") &&
                        Contains("unscale_() has already been called on this optimizer since "
                                 "the last update()"));
  CHECK(host(params[0].grad()) == unscaled);  // not divided twice
  CHECK(scaler.step(opt));
  CHECK_THROWS_WITH(scaler.unscale_(opt), Contains("unscale_() is being called after step()"));
  CHECK_THROWS_WITH(scaler.step(opt),
                    Contains("GradScaler::step") &&
                        Contains("step() has already been called for this optimizer since the "
                                 "last update()"));
  scaler.update();
  CHECK_THROWS_WITH(scaler.update(), Contains("GradScaler::update") &&
                                         Contains("no inf checks were recorded prior to update()"));
  set_grads(params, specs, scaler.get_scale(), 0);
  scaler.unscale_(opt);  // a new iteration
  scaler.update();

  SECTION("an optimiser without any gradient") {
    opt.zero_grad();
    CHECK_THROWS_WITH(scaler.step(opt),
                      Contains("GradScaler::step") && Contains("no inf checks were recorded"));
    CHECK_THROWS_WITH(scaler.update(), Contains("no inf checks were recorded"));
    set_grads(params, specs, scaler.get_scale(), 0);  // update() ended the iteration
    CHECK(scaler.step(opt));
  }
  SECTION("a broadcast gradient is refused before anything is unscaled") {
    const std::vector<Spec> two = {{{3}, DType::kFloat32, "cpu"}, {{3}, DType::kFloat32, "sim:0"}};
    const std::vector<Tensor> ps = make_params(two);
    nn::SGD opt2(ps, nn::SGDOptions(0.1));
    ps[0].set_grad(make(two[0], {2, 4, 6}));
    ps[1].set_grad(expand(full({1}, 2.0, TensorOptions().device(Device("sim:0"))), {3}));
    Launches launches;
    CHECK_THROWS_AS(scaler.unscale_(opt2), ValueError);
    CHECK_THROWS_WITH(scaler.unscale_(opt2), Contains("GradScaler::unscale_") &&
                                                 Contains("parameter 1") && Contains("broadcast"));
    CHECK(launches.count(kUnscale) == 0);
    CHECK(host(ps[0].grad()) == std::vector<double>{2, 4, 6});
    ps[1].set_grad(contiguous(ps[1].grad()));
    scaler.unscale_(opt2);  // refused calls left no record behind
    CHECK(launches.count(kUnscale) == 2);
  }
}

TEST_CASE("a disabled scaler is a pass-through", "[nn][amp]") {
  const std::vector<Tensor> params = make_params(kMixed);
  nn::SGD opt(params, nn::SGDOptions(0.5));
  nn::GradScaler scaler(nn::GradScalerOptions().init_scale(1024).enabled(false));
  CHECK_FALSE(scaler.is_enabled());
  CHECK(scaler.get_scale() == 1.0);
  const Tensor loss = sum(mul(params[0], params[0]));
  CHECK(scaler.scale(loss).is_same(loss));
  set_grads(params, kMixed, 1, 0, 0, 0, kInf);
  const auto grads = host_all({params[1].grad(), params[2].grad()});
  Launches launches;
  scaler.unscale_(opt);
  scaler.unscale_(opt);  // no stage is kept
  CHECK(launches.count(kUnscale) == 0);
  CHECK(host_all({params[1].grad(), params[2].grad()}) == grads);
  const auto before = host_all(params);
  CHECK(scaler.step(opt));  // the step runs, Inf and all
  CHECK(host_all(params) != before);
  CHECK(std::isinf(host(params[0])[0]));
  scaler.update();
  scaler.update(8.0);
  CHECK(scaler.get_scale() == 1.0);
  CHECK(scaler.get_growth_tracker() == 0);
  CHECK(scaler.state_dict().empty());
  scaler.load_state_dict(nn::GradScaler().state_dict());  // ignored
  CHECK(scaler.get_scale() == 1.0);
}

// The reference's scaling case: two Linear layers trained with MSE on 4 batches, a
// control run without scaling and a scaled run whose iteration 2 gets an Inf gradient
// (and whose step is therefore skipped; the control skips its step there too).
std::shared_ptr<nn::Sequential> make_model(Device d, uint64_t seed) {
  manual_seed(seed);
  auto m = std::make_shared<nn::Sequential>(
      Layers{std::make_shared<nn::Linear>(8, 8), std::make_shared<nn::Linear>(8, 8)});
  m->to(d);
  return m;
}

Tensor mse(const Tensor& out, const Tensor& target) {
  const Tensor diff = sub(out, target);
  return mean(mul(diff, diff));
}

void poison_grad(const Tensor& p) {
  NoGradGuard no_grad;
  Tensor g = p.grad();
  fill_(g, kInf);
}

TEST_CASE("a scaled run ends where the unscaled run does, skipped iteration included",
          "[nn][amp]") {
  const Device d(GENERATE(from_range(testing::device_names())));
  const bool enabled = GENERATE(true, false);
  const bool separate_unscale = GENERATE(false, true);
  INFO(d.str() << (enabled ? ", enabled" : ", disabled")
               << (separate_unscale ? ", unscale_ before step" : ""));
  manual_seed(9);
  std::vector<std::pair<Tensor, Tensor>> data;
  for (int i = 0; i < 4; ++i) {
    data.emplace_back(randn({8, 8}, TensorOptions().device(d)),
                      randn({8, 8}, TensorOptions().device(d)));
  }
  const int skip_iter = 2;
  auto control = make_model(d, 5), scaled = make_model(d, 5);
  nn::SGD opt_control(control->parameters(), nn::SGDOptions(0.25).momentum(0.5));
  nn::SGD opt_scaled(scaled->parameters(), nn::SGDOptions(0.25).momentum(0.5));
  nn::GradScaler scaler(
      nn::GradScalerOptions().init_scale(128).growth_factor(2).growth_interval(1).enabled(enabled));
  for (int i = 0; i < 4; ++i) {
    opt_control.zero_grad();
    mse(control->forward(data[i].first), data[i].second).backward();
    if (!enabled || i != skip_iter) opt_control.step();

    opt_scaled.zero_grad();
    scaler.scale(mse(scaled->forward(data[i].first), data[i].second)).backward();
    if (enabled && i == skip_iter) poison_grad(scaled->parameters()[2]);
    if (separate_unscale) scaler.unscale_(opt_scaled);
    CHECK(scaler.step(opt_scaled) == (!enabled || i != skip_iter));
    scaler.update();
  }
  CHECK(scaler.get_scale() == (enabled ? 128.0 * 2 * 2 * 2 * 0.5 : 1.0));
  // Powers of two scale every gradient exactly: the same bits.
  CHECK(host_all(scaled->parameters()) == host_all(control->parameters()));
  std::vector<Tensor> grads_scaled, grads_control;
  for (const Tensor& p : scaled->parameters()) grads_scaled.push_back(p.grad());
  for (const Tensor& p : control->parameters()) grads_control.push_back(p.grad());
  CHECK(host_all(grads_scaled) == host_all(grads_control));
  CHECK(host_state(opt_scaled) == host_state(opt_control));
}

TEST_CASE("two models, two optimisers, two scaled losses", "[nn][amp]") {
  const Device d("sim:0");
  manual_seed(11);
  std::vector<std::pair<Tensor, Tensor>> data;
  for (int i = 0; i < 4; ++i) {
    data.emplace_back(randn({8, 8}, TensorOptions().device(d)),
                      randn({8, 8}, TensorOptions().device(d)));
  }
  auto c0 = make_model(d, 1), c1 = make_model(d, 2), s0 = make_model(d, 1), s1 = make_model(d, 2);
  nn::SGD oc0(c0->parameters(), nn::SGDOptions(0.25)), oc1(c1->parameters(), nn::SGDOptions(0.25));
  nn::SGD os0(s0->parameters(), nn::SGDOptions(0.25)), os1(s1->parameters(), nn::SGDOptions(0.25));
  nn::GradScaler scaler(nn::GradScalerOptions().init_scale(128).growth_interval(1));
  const int skip_iter = 2;
  for (int i = 0; i < 4; ++i) {
    for (const bool scaling : {false, true}) {
      nn::Module& m0 = scaling ? *s0 : *c0;
      nn::Module& m1 = scaling ? *s1 : *c1;
      nn::SGD& o0 = scaling ? os0 : oc0;
      nn::SGD& o1 = scaling ? os1 : oc1;
      o0.zero_grad();
      o1.zero_grad();
      const Tensor out0 = m0.forward(data[i].first), out1 = m1.forward(data[i].first);
      Tensor loss0 = mse(add(mul(out0, 0.3), mul(out1, 0.7)), data[i].second);
      Tensor loss1 = mse(sub(mul(out0, 0.6), mul(out1, 0.4)), data[i].second);
      if (scaling) {
        scaler.scale(loss0).backward(Tensor(), /*retain_graph=*/true);
        scaler.scale(loss1).backward();
        if (i == skip_iter) poison_grad(m1.parameters()[2]);
        scaler.unscale_(o0);
        scaler.step(o0);
        scaler.step(o1);
        scaler.update();
      } else {
        loss0.backward(Tensor(), /*retain_graph=*/true);
        loss1.backward();
        o0.step();
        if (i != skip_iter) o1.step();
      }
    }
  }
  CHECK(scaler.get_scale() == 128.0 * 2 * 2 * 2 * 0.5);
  CHECK(host_all(s0->parameters()) == host_all(c0->parameters()));
  CHECK(host_all(s1->parameters()) == host_all(c1->parameters()));
}

TEST_CASE("unscale_ only enqueues work; step's read of the flags is the synchronisation",
          "[nn][amp]") {
  SimSchedulerOptions det;
  det.kind = SimSchedulerKind::kDeterministic;
  det.policy = SimPolicy::kAdversarial;
  det.seed = 3;
  SimSchedulerScope scope(det);  // work runs only when the host waits
  const std::vector<Spec> specs = {{{2, 3}, DType::kFloat32, "sim:0", true},
                                   {{5}, DType::kFloat64, "sim:0"},
                                   {{4}, DType::kFloat32, "sim:1"}};
  const bool inf = GENERATE(false, true);
  const std::vector<Tensor> params = make_params(specs);
  nn::SGD opt(params, nn::SGDOptions(0.5));
  nn::GradScaler scaler(nn::GradScalerOptions().init_scale(32));
  set_grads(params, specs, 32, 0, inf ? 1 : -1, 4, kInf);
  const auto before = host_all(params);
  const Stream s0 = current_stream(Device("sim:0")), s1 = current_stream(Device("sim:1"));
  REQUIRE(s0.query());  // the copies above were waited for
  scaler.unscale_(opt);
  CHECK_FALSE(s0.query());  // flags and kernels still queued: nothing waited
  CHECK_FALSE(s1.query());
  CHECK(scaler.step(opt) == !inf);
  scaler.update();
  CHECK((host_all(params) == before) == inf);
  CHECK(scaler.get_scale() == (inf ? 16 : 32));
}

TEST_CASE("state_dict goes through a checkpoint and back: the same scaler afterwards",
          "[nn][amp][checkpoint]") {
  manual_seed(3);
  auto model = std::make_shared<nn::Linear>(4, 2);
  nn::SGD opt(model->parameters(), nn::SGDOptions(0.1).momentum(0.9));
  nn::GradScaler a(
      nn::GradScalerOptions().init_scale(3).growth_factor(4).backoff_factor(0.3).growth_interval(
          3));
  const Tensor x = randn({5, 4});
  // One Inf iteration among clean ones: the scale is 3 * 0.3 in float32, the tracker 1.
  auto run = [&](nn::GradScaler& scaler, nn::Linear& m, nn::Optimizer& o, bool inf) {
    o.zero_grad();
    const Tensor out = m.forward(x);
    scaler.scale(mean(mul(out, out))).backward();
    if (inf) poison_grad(m.weight);
    const bool stepped = scaler.step(o);
    scaler.update();
    return stepped;
  };
  for (const bool inf : {false, true, false}) run(a, *model, opt, inf);
  CHECK(a.get_scale() == static_cast<double>(static_cast<float>(3.0 * 0.3)));
  CHECK(a.get_growth_tracker() == 1);

  const std::map<std::string, std::string> state = a.state_dict();
  CHECK(state.size() == 5);
  for (const auto& [key, value] : state) CHECK(key.rfind("scaler.", 0) == 0);
  CHECK(state.at("scaler.growth_interval") == "3");
  CHECK(state.at("scaler.growth_tracker") == "1");
  CHECK(state.at("scaler.backoff_factor") == nn::metadata_number(0.3));
  nn::Metadata metadata = state;
  metadata["epoch"] = "7";
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/scaler.safetensors";
  REQUIRE(nn::save_checkpoint(path, *model, &opt, metadata).ok());

  manual_seed(4);
  auto model2 = std::make_shared<nn::Linear>(4, 2);
  nn::SGD opt2(model2->parameters(), nn::SGDOptions(0.1).momentum(0.9));
  nn::GradScaler b(
      nn::GradScalerOptions().init_scale(6).growth_factor(7).backoff_factor(0.8).growth_interval(
          1));
  const absl::StatusOr<nn::Metadata> loaded = nn::load_checkpoint(path, *model2, &opt2);
  REQUIRE(loaded.ok());
  CHECK(loaded->at("epoch") == "7");
  b.load_state_dict(*loaded);
  CHECK(b.get_scale() == a.get_scale());
  CHECK(b.get_growth_factor() == 4);
  CHECK(b.get_backoff_factor() == 0.3);
  CHECK(b.get_growth_interval() == 3);
  CHECK(b.get_growth_tracker() == 1);
  CHECK(b.state_dict() == state);
  // Identical behaviour from here: growth after two more clean steps, a backoff, ...
  for (const bool inf : {false, false, true, false, false, false}) {
    INFO((inf ? "Inf" : "clean") << " iteration");
    CHECK(run(a, *model, opt, inf) == run(b, *model2, opt2, inf));
    CHECK(a.get_scale() == b.get_scale());
    CHECK(a.get_growth_tracker() == b.get_growth_tracker());
    CHECK(host_all(model->parameters()) == host_all(model2->parameters()));
  }
  // 3 * 0.3, grown by 4, backed off by 0.3, grown by 4: each product rounded to float32.
  const float before_backoff = static_cast<float>(3.0 * 0.3) * 4;
  const float backed_off = static_cast<float>(static_cast<double>(before_backoff) * 0.3);
  CHECK(a.get_scale() == static_cast<double>(backed_off) * 4);
}

TEST_CASE("load_state_dict refuses bad states and leaves the scaler unchanged", "[nn][amp]") {
  const std::map<std::string, std::string> good =
      nn::GradScaler(nn::GradScalerOptions().init_scale(8).growth_interval(10)).state_dict();
  nn::GradScaler scaler(nn::GradScalerOptions().init_scale(2).growth_factor(3).growth_interval(5));
  auto with = [&](const std::string& key, const std::string& value) {
    std::map<std::string, std::string> s = good;
    s[key] = value;
    return s;
  };
  auto without = [&](const std::string& key) {
    std::map<std::string, std::string> s = good;
    s.erase(key);
    return s;
  };
  struct Bad {
    std::map<std::string, std::string> state;
    std::string says;
  };
  const std::vector<Bad> bad = {
      {{}, "disabled GradScaler"},
      {{{"epoch", "3"}}, "no key starts with 'scaler.'"},
      {without("scaler.growth_tracker"), "'scaler.growth_tracker' is missing"},
      {with("scaler.scale", "big"), "'scaler.scale' is 'big', not a number"},
      {with("scaler.scale", "0"), "finite and > 0"},
      {with("scaler.scale", "inf"), "finite and > 0"},
      {with("scaler.scale", "1e39"), "finite and > 0"},
      {with("scaler.growth_factor", "1"), "growth_factor 1 must be finite and > 1"},
      {with("scaler.backoff_factor", "1"), "backoff_factor 1 must be in (0, 1)"},
      {with("scaler.backoff_factor", "nan"), "backoff_factor"},
      {with("scaler.growth_interval", "0"), "growth_interval"},
      {with("scaler.growth_interval", "2.5"), "growth_interval"},
      {with("scaler.growth_tracker", "10"), "growth_tracker 10 must be an integer in [0, "},
      {with("scaler.growth_tracker", "-1"), "growth_tracker"},
      {with("scaler.growth_tracker", "0.5"), "growth_tracker"},
      {with("scaler.extra", "1"), "unknown key 'scaler.extra'"},
  };
  for (const Bad& b : bad) {
    INFO("expecting: " << b.says);
    CHECK_THROWS_AS(scaler.load_state_dict(b.state), ValueError);
    CHECK_THROWS_WITH(scaler.load_state_dict(b.state),
                      Contains("GradScaler::load_state_dict") && Contains(b.says));
    CHECK(scaler.get_scale() == 2);
    CHECK(scaler.get_growth_factor() == 3);
    CHECK(scaler.get_backoff_factor() == 0.5);
    CHECK(scaler.get_growth_interval() == 5);
    CHECK(scaler.get_growth_tracker() == 0);
  }
  // Keys without the prefix are someone else's: ignored.
  std::map<std::string, std::string> merged = good;
  merged["epoch"] = "3";
  scaler.load_state_dict(merged);
  CHECK(scaler.get_scale() == 8);
  CHECK(scaler.get_growth_interval() == 10);
}

TEST_CASE("options and setters out of range are refused", "[nn][amp]") {
  using O = nn::GradScalerOptions;
  CHECK(O().init_scale() == 65536);
  CHECK(O().growth_factor() == 2);
  CHECK(O().backoff_factor() == 0.5);
  CHECK(O().growth_interval() == 2000);
  CHECK(O().enabled());
  const nn::GradScaler defaults;
  CHECK(defaults.get_scale() == 65536);
  CHECK(defaults.get_growth_tracker() == 0);
  CHECK(defaults.is_enabled());
  for (const O& o :
       {O().init_scale(0), O().init_scale(-1), O().init_scale(kInf), O().init_scale(1e39),
        O().init_scale(kNaN), O().growth_factor(1), O().growth_factor(kInf), O().backoff_factor(0),
        O().backoff_factor(1), O().growth_interval(0)}) {
    CHECK_THROWS_AS(nn::GradScaler(o), ValueError);
  }
  CHECK_THROWS_WITH(nn::GradScaler(O().growth_factor(0.5)),
                    Contains("GradScaler") && Contains("growth_factor 0.5"));
  nn::GradScaler scaler;
  CHECK_THROWS_AS(scaler.set_growth_factor(1.0), ValueError);
  CHECK_THROWS_AS(scaler.set_backoff_factor(1.5), ValueError);
  CHECK_THROWS_WITH(scaler.set_growth_interval(0), Contains("GradScaler::set_growth_interval"));
  scaler.set_growth_factor(3);
  scaler.set_backoff_factor(0.25);
  scaler.set_growth_interval(7);
  CHECK(scaler.get_growth_factor() == 3);
  CHECK(scaler.get_backoff_factor() == 0.25);
  CHECK(scaler.get_growth_interval() == 7);
}

}  // namespace
}  // namespace streamgrad
