// nn::GradScaler over whole runs: a disabled scaler changes nothing; a scaled run
// (skipped iteration included, one or two optimisers) ends where the unscaled run does;
// no host synchronisation before step reads the flags; state_dict goes through a
// checkpoint and back. grad_scaler_test.cc has the single-call behaviours.
#include "tests/nn/grad_scaler_test_util.h"

namespace streamgrad {
namespace {

using namespace grad_scaler_testing;  // NOLINT: the tests' shared helpers

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
  nn::save_checkpoint(path, *model, &opt, metadata);

  manual_seed(4);
  auto model2 = std::make_shared<nn::Linear>(4, 2);
  nn::SGD opt2(model2->parameters(), nn::SGDOptions(0.1).momentum(0.9));
  nn::GradScaler b(
      nn::GradScalerOptions().init_scale(6).growth_factor(7).backoff_factor(0.8).growth_interval(
          1));
  const nn::Metadata loaded = nn::load_checkpoint(path, *model2, &opt2);
  CHECK(loaded.at("epoch") == "7");
  b.load_state_dict(loaded);
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
