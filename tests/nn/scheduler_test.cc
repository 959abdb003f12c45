// Learning-rate schedulers (nn/schedulers.h) against lr sequences derived here from the
// reference's documented formulas (torch.optim.lr_scheduler): LinearLR, LambdaLR,
// SequentialLR, OneCycleLR (cos, linear, three phases) and ReduceLROnPlateau's
// patience, cooldown, threshold and min_lr; every group from its own base lr; state
// dicts that resume exactly; arguments out of range.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "nn/optim.h"
#include "ops/ops.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace {

const double kPi = std::acos(-1.0);

Tensor param(double v) {
  return from_vector<double>({v, -v}, {2}, TensorOptions().dtype(DType::kFloat64)).requires_grad_();
}

// SGD over two groups: lr 0.5 and lr 0.1.
struct TwoGroups {
  Tensor a = param(1.5), b = param(-0.5);
  nn::SGD opt{std::vector<nn::OptimizerParamGroup>{
                  nn::OptimizerParamGroup({a}), nn::OptimizerParamGroup({b}, nn::SGDOptions(0.1))},
              nn::SGDOptions(0.5)};
};

// The lrs of every group after construction and after each of `steps` steps.
std::vector<std::vector<double>> trace(nn::LRScheduler& s, int steps) {
  std::vector<std::vector<double>> out{s.get_last_lrs()};
  for (int e = 0; e < steps; ++e) {
    s.step();
    out.push_back(s.get_last_lrs());
  }
  return out;
}

void check_trace(const std::vector<std::vector<double>>& got, const std::vector<double>& base,
                 const std::function<double(int e, double base)>& want) {
  for (size_t e = 0; e < got.size(); ++e) {
    for (size_t g = 0; g < base.size(); ++g) {
      INFO("epoch " << e << " group " << g);
      CHECK(got[e][g] == Approx(want(static_cast<int>(e), base[g])).epsilon(1e-12));
    }
  }
}

TEST_CASE("LinearLR warms each group up from its own base lr", "[nn][sched]") {
  TwoGroups t;
  nn::LinearLR warm(t.opt);  // start_factor 1/3, end_factor 1, total_iters 5
  check_trace(trace(warm, 8), {0.5, 0.1}, [](int e, double base) {
    return base * (1.0 / 3 + (1 - 1.0 / 3) * std::min(e, 5) / 5.0);
  });
  nn::SGD other({param(1)}, nn::SGDOptions(2.0));
  nn::LinearLR down(other, 1.0, 0.25, 3);
  check_trace(trace(down, 4), {2.0}, [](int e, double base) {
    return base * (1.0 + (0.25 - 1.0) * std::min(e, 3) / 3.0);
  });
}

TEST_CASE("LambdaLR: one function for all groups, or one per group", "[nn][sched]") {
  TwoGroups t;
  nn::LambdaLR shared(t.opt, [](int64_t e) { return std::pow(0.9, e); });
  check_trace(trace(shared, 4), {0.5, 0.1}, [](int e, double base) { return base * std::pow(0.9, e); });
  TwoGroups u;
  nn::LambdaLR per_group(u.opt, std::vector<nn::LambdaLR::Fn>{
                                    [](int64_t e) { return 1.0 / (e + 1); },
                                    [](int64_t e) { return 1.0 + e; }});
  const auto lrs = trace(per_group, 3);
  for (int e = 0; e <= 3; ++e) {
    CHECK(lrs[e][0] == Approx(0.5 / (e + 1)));
    CHECK(lrs[e][1] == Approx(0.1 * (1 + e)));
  }
}

TEST_CASE("SequentialLR: warm-up then step decay, each from the original lr", "[nn][sched]") {
  TwoGroups t;
  auto warm = std::make_shared<nn::LinearLR>(t.opt, 0.1, 1.0, 2);
  // Made after the warm-up changed the lrs: still starts from the groups' initial lrs.
  auto decay = std::make_shared<nn::StepLR>(t.opt, 2, 0.5);
  nn::SequentialLR seq(t.opt, {warm, decay}, {3});
  check_trace(trace(seq, 9), {0.5, 0.1}, [](int e, double base) {
    if (e < 3) return base * (0.1 + 0.9 * std::min(e, 2) / 2.0);
    return base * std::pow(0.5, (e - 3) / 2);
  });
}

// The reference's annealing between two lrs, pct in [0, 1] of the phase.
double cos_anneal(double from, double to, double pct) {
  return to + (from - to) / 2 * (std::cos(kPi * pct) + 1);
}

TEST_CASE("OneCycleLR: up to max_lr, then down to the minimum", "[nn][sched]") {
  const bool cos = GENERATE(true, false);
  TwoGroups t;
  // max 1 (group 0) and 0.2 (group 1); total 10, pct_start 0.3: the peak at step 2.
  nn::OneCycleLR one(t.opt, std::vector<double>{1.0, 0.2}, 10, 0.3, cos ? "cos" : "linear");
  auto anneal = [&](double from, double to, double pct) {
    return cos ? cos_anneal(from, to, pct) : from + (to - from) * pct;
  };
  const auto lrs = trace(one, 10);
  for (int g = 0; g < 2; ++g) {
    const double max = g == 0 ? 1.0 : 0.2, initial = max / 25, min = initial / 1e4;
    for (int e = 0; e <= 10; ++e) {
      INFO("step " << e << " group " << g);
      const double want = e <= 2 ? anneal(initial, max, e / 2.0) : anneal(max, min, (e - 2) / 7.0);
      CHECK(lrs[e][g] == Approx(want).epsilon(1e-12));
    }
    CHECK(lrs[0][g] == Approx(initial));
    CHECK(lrs[2][g] == Approx(max));
    CHECK(lrs[9][g] == Approx(min));
  }
  CHECK(t.opt.param_groups()[0].initial_lr() == Approx(1.0 / 25));
  CHECK_THROWS_WITH(one.step(), Catch::Contains("tried to step 11 times, but total_steps is 10"));
  CHECK(one.last_epoch() == 10);
  CHECK(one.get_last_lrs() == lrs[10]);
}

TEST_CASE("OneCycleLR three_phase: up, back to the start, then to the minimum", "[nn][sched]") {
  nn::SGD opt({param(1)}, nn::SGDOptions(0.3));
  nn::OneCycleLR one(opt, 0.5, 20, 0.25, "cos", 10, 100, /*three_phase=*/true);
  const double initial = 0.05, min = initial / 100;
  // Phase ends: 0.25 * 20 - 1 = 4, 2 * 0.25 * 20 - 2 = 8, 19.
  const auto lrs = trace(one, 20);
  for (int e = 0; e <= 20; ++e) {
    INFO("step " << e);
    const double want = e <= 4   ? cos_anneal(initial, 0.5, e / 4.0)
                        : e <= 8 ? cos_anneal(0.5, initial, (e - 4) / 4.0)
                                 : cos_anneal(initial, min, (e - 8) / 11.0);
    CHECK(lrs[e][0] == Approx(want).epsilon(1e-12));
  }
}

TEST_CASE("ReduceLROnPlateau: patience, strict relative threshold, cooldown", "[nn][sched]") {
  TwoGroups t;
  nn::ReduceLROnPlateau plateau(
      t.opt, nn::ReduceLROnPlateauOptions().factor(0.5).patience(2).threshold(0.1).cooldown(1));
  // Derived by hand from the reference's rule: better means below best * (1 - 0.1); more
  // than 2 bad epochs halve the lrs; the epoch after a reduction counts as good.
  const std::vector<double> metrics{10, 9.5, 9.2, 9.1, 9.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0};
  const std::vector<double> want{1, 1, 1, .5, .5, .5, .5, .5, .25, .25, .25, .25, .125};
  for (size_t e = 0; e < metrics.size(); ++e) {
    plateau.step(metrics[e]);
    INFO("epoch " << e + 1);
    CHECK(plateau.get_last_lrs() == std::vector<double>{0.5 * want[e], 0.1 * want[e]});
  }
  CHECK(plateau.best() == 8.0);
  CHECK(plateau.last_epoch() == 13);
}

TEST_CASE("ReduceLROnPlateau: max mode, absolute threshold, min_lr and eps", "[nn][sched]") {
  nn::SGD opt({param(1)}, nn::SGDOptions(1.0));
  nn::ReduceLROnPlateau plateau(
      opt, nn::ReduceLROnPlateauOptions().mode("max").threshold_mode("abs").threshold(0.5)
               .patience(0).factor(0.5).min_lr(0.3));
  // 1.4 is not above 1 + 0.5: bad; 1.6 is; 1.7 is not above 1.6 + 0.5.
  const std::vector<double> metrics{1.0, 1.4, 1.6, 1.7, 1.8, std::nan("")};
  const std::vector<double> want{1.0, 0.5, 0.5, 0.3, 0.3, 0.3};
  for (size_t e = 0; e < metrics.size(); ++e) {
    plateau.step(metrics[e]);
    INFO("epoch " << e + 1);
    CHECK(plateau.get_last_lr() == want[e]);
  }
  CHECK(plateau.num_bad_epochs() == 0);
  // A reduction below eps is skipped: 1e-9 * 0.5 differs by less than 1e-8.
  nn::SGD tiny({param(1)}, nn::SGDOptions(1e-9));
  nn::ReduceLROnPlateau skip(tiny, nn::ReduceLROnPlateauOptions().patience(0));
  skip.step(1);
  skip.step(2);
  CHECK(tiny.lr() == 1e-9);
}

TEST_CASE("scheduler state dicts resume exactly", "[nn][sched]") {
  Tensor a = param(1.5), b = param(1.5);
  nn::SGD o1({a}, nn::SGDOptions(0.4).momentum(0.9));
  nn::CosineAnnealingLR s1(o1, 10, 0.01);
  auto train = [](nn::Optimizer& o, nn::LRScheduler& s, const Tensor& p, int epochs) {
    for (int e = 0; e < epochs; ++e) {
      o.zero_grad();
      sum(mul(p, p)).backward();
      o.step();
      s.step();
    }
  };
  train(o1, s1, a, 3);
  nn::SGD o2({b}, nn::SGDOptions(9.0).momentum(0.9));
  nn::CosineAnnealingLR s2(o2, 10, 0.01);
  {
    NoGradGuard no_grad;
    copy_(b, a);
  }
  o2.load_state_dict(o1.state_dict());
  s2.load_state_dict(s1.state_dict());
  CHECK(s2.last_epoch() == 3);
  CHECK(s2.base_lrs() == std::vector<double>{0.4});
  train(o1, s1, a, 3);
  train(o2, s2, b, 3);
  CHECK(a.to_vector<double>() == b.to_vector<double>());
  CHECK(o1.lr() == o2.lr());
  // A longer schedule resumed from a shorter one's state: lr as the longer one's at epoch 6.
  nn::CosineAnnealingLR longer(o2, 20, 0.01);
  longer.load_state_dict(s1.state_dict());
  CHECK(o2.lr() != Approx(0.01 + (0.4 - 0.01) * (1 + std::cos(M_PI * 6 / 20)) / 2));
  longer.restore_lrs();
  CHECK(o2.lr() == Approx(0.01 + (0.4 - 0.01) * (1 + std::cos(M_PI * 6 / 20)) / 2));
  o2.set_lr(o1.lr());

  nn::ReduceLROnPlateau p1(o1, nn::ReduceLROnPlateauOptions().patience(2).cooldown(2));
  for (double m : {5.0, 4.0, 4.0, 4.0, 4.0}) p1.step(m);  // reduced at the 5th, cooling down
  nn::ReduceLROnPlateau p2(o2, nn::ReduceLROnPlateauOptions().patience(2).cooldown(2));
  p2.load_state_dict(p1.state_dict());
  o2.set_lr(o1.lr());
  CHECK(p2.cooldown_counter() == 2);
  for (double m : {4.0, 4.0, 4.0, 4.0, 4.0}) {
    p1.step(m);
    p2.step(m);
    CHECK(o1.lr() == o2.lr());
  }
  CHECK_THROWS_WITH(p2.load_state_dict({{"best", 1}}), Catch::Contains("no 'last_epoch'"));
  TwoGroups t;
  nn::StepLR two(t.opt, 2);
  CHECK_THROWS_WITH(two.load_state_dict(s1.state_dict()), Catch::Contains("no 'base_lr.1'"));
  CHECK(two.last_epoch() == 0);
}

TEST_CASE("scheduler misuse is a clear ValueError", "[nn][sched][errors]") {
  TwoGroups t;
  CHECK_THROWS_WITH(nn::LinearLR(t.opt, 0.0), Catch::Contains("LinearLR: start_factor 0"));
  CHECK_THROWS_WITH(nn::LambdaLR(t.opt, std::vector<nn::LambdaLR::Fn>{[](int64_t) { return 1.0; }}),
                    Catch::Contains("1 functions for 2 parameter groups"));
  CHECK_THROWS_WITH(nn::OneCycleLR(t.opt, 1.0, 10, 0.3, "cosine"),
                    Catch::Contains("anneal_strategy 'cosine'"));
  CHECK_THROWS_WITH(nn::OneCycleLR(t.opt, 1.0, 0), Catch::Contains("total_steps 0"));
  auto s = std::make_shared<nn::StepLR>(t.opt, 1);
  CHECK_THROWS_WITH(nn::SequentialLR(t.opt, {s, s}, {}), Catch::Contains("2 schedulers and 0 milestones"));
  CHECK_THROWS_WITH(nn::SequentialLR(t.opt, {s, s, s}, {3, 3}), Catch::Contains("milestone 1 (3)"));
  nn::SGD other({param(1)}, nn::SGDOptions(0.1));
  auto foreign = std::make_shared<nn::StepLR>(other, 1);
  CHECK_THROWS_WITH(nn::SequentialLR(t.opt, {s, foreign}, {2}), Catch::Contains("another optimizer"));
  CHECK_THROWS_WITH(nn::ReduceLROnPlateau(t.opt, nn::ReduceLROnPlateauOptions().factor(1.0)),
                    Catch::Contains("factor 1"));
  CHECK_THROWS_WITH(nn::ReduceLROnPlateau(t.opt, nn::ReduceLROnPlateauOptions().mode("avg")),
                    Catch::Contains("mode 'avg'"));
  t.opt.add_param_group(nn::OptimizerParamGroup({param(3)}));
  CHECK_THROWS_WITH(s->step(), Catch::Contains("make the scheduler after adding every group"));
}

}  // namespace
}  // namespace streamgrad
