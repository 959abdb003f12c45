// nn::GradScaler, with the behaviours the reference framework's grad-scaling tests check:
// scale; unscale_ gives grads / scale and finds nothing in finite grads; one Inf or NaN in
// any gradient (any device, dtype, position, non-contiguous ones included) skips the step
// and leaves the parameters and the optimiser's state as they were; update() backs off
// and grows with its tracker as _amp_update_scale_ does, and never past float32; calls
// out of order are refused; step after unscale_ does not unscale again. Also: one fused
// launch per (device, dtype) group. grad_scaler_run_test.cc has the rest.
#include "tests/nn/grad_scaler_test_util.h"

namespace streamgrad {
namespace {

using namespace grad_scaler_testing;  // NOLINT: the tests' shared helpers

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

}  // namespace
}  // namespace streamgrad
