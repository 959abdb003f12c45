// Optimisers (SGD, Adam, AdamW, RMSprop, Adagrad) with PyTorch's update rules, as torch::optim; the
// learning-rate schedulers are in nn/schedulers.h (included here), the common base with
// parameter groups and state dicts in nn/optimizer.h.
//
//   nn::SGD opt(model->parameters(), nn::SGDOptions(0.1).momentum(0.9).nesterov(true));
//   nn::StepLR sched(opt, /*step_size=*/2, /*gamma=*/0.5);
//   for (...) { opt.zero_grad(); loss.backward(); opt.step(); }  sched.step();  // per epoch
//
// Each optimiser also takes parameter groups, each with its own options (nn/optimizer.h).
// step() runs under NoGradGuard on each parameter's device's current stream (so
// parameters on several devices are fine); parameters without a gradient are skipped, as
// in PyTorch. With the `foreach` option (the default) one multi-tensor kernel updates all
// parameters of each (parameter group, device, dtype) in one launch (kernels/foreach.h,
// the reference framework's "foreach" path); without it each parameter is updated by
// several in-place ops, one kernel each. Both give the same bits (kernels/functors/optim_ops.h
// says when they may not) and the same state. State (momentum buffers, Adam's moments and
// step counts) is created lazily on the first step, and exported by state_dict() as named
// tensors ("<param index>.<name>") plus named scalars, for checkpoints.
//
// Thread-safety: one thread steps an optimiser. Failure: ValueError for an empty
// parameter list, negative learning rates or weight decay, momentum/betas outside [0, 1),
// nesterov without momentum, RMSprop's alpha, momentum or eps < 0, Adagrad's lr_decay,
// initial_accumulator_value or eps < 0, and for load_state_dict states whose groups, keys, shapes or
// dtypes do not match (the optimiser is then unchanged).
#ifndef STREAMGRAD_NN_OPTIM_H_
#define STREAMGRAD_NN_OPTIM_H_

#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"
#include "nn/optimizer.h"
#include "nn/options.h"
#include "nn/schedulers.h"

namespace streamgrad {
namespace nn {

struct SGDOptions : OptimizerOptions {
  explicit SGDOptions(double lr) : lr_(lr) {}
  SG_NN_OPTION(double, lr);
  SG_NN_OPTION(double, momentum) = 0;
  SG_NN_OPTION(double, dampening) = 0;
  SG_NN_OPTION(double, weight_decay) = 0;
  SG_NN_OPTION(bool, nesterov) = false;
  SG_NN_OPTION(bool, foreach) = true;  // one launch per (group, device, dtype)

  std::unique_ptr<OptimizerOptions> clone() const override;
  double get_lr() const override { return lr_; }
  void set_lr(double lr) override { lr_ = lr; }
  std::map<std::string, double> numbers() const override;
  bool set_numbers(const std::map<std::string, double>& numbers) override;
};

struct AdamOptions : OptimizerOptions {
  explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
  SG_NN_OPTION(double, lr);
  SG_NN_OPTION(double, beta1) = 0.9;
  SG_NN_OPTION(double, beta2) = 0.999;
  SG_NN_OPTION(double, eps) = 1e-8;
  SG_NN_OPTION(double, weight_decay) = 0;  // Adam: L2 added to the gradient; AdamW: decoupled
  SG_NN_OPTION(bool, foreach) = true;      // one launch per (group, device, dtype)

  std::unique_ptr<OptimizerOptions> clone() const override;
  double get_lr() const override { return lr_; }
  void set_lr(double lr) override { lr_ = lr; }
  std::map<std::string, double> numbers() const override;
  bool set_numbers(const std::map<std::string, double>& numbers) override;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, const SGDOptions& defaults);
  // `SGD({p, q}, ...)` and `SGD({}, ...)`: a list of tensors, not of groups.
  SGD(std::initializer_list<Tensor> params, const SGDOptions& defaults)
      : SGD(std::vector<Tensor>(params), defaults) {}
  SGD(const std::vector<OptimizerParamGroup>& groups, const SGDOptions& defaults);
  void step() override;

 private:
  void check_options(const OptimizerOptions& o, const std::string& where) const override;
  void step_per_tensor(size_t group, const SGDOptions& o);
  void step_foreach(size_t group, const SGDOptions& o);  // nn/optim_foreach.cc
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, const AdamOptions& defaults, bool decoupled = false);
  Adam(std::initializer_list<Tensor> params, const AdamOptions& defaults, bool decoupled = false)
      : Adam(std::vector<Tensor>(params), defaults, decoupled) {}
  Adam(const std::vector<OptimizerParamGroup>& groups, const AdamOptions& defaults,
       bool decoupled = false);
  void step() override;

 private:
  void check_options(const OptimizerOptions& o, const std::string& where) const override;
  void step_per_tensor(size_t group, const AdamOptions& o);
  void step_foreach(size_t group, const AdamOptions& o);  // nn/optim_foreach.cc
  bool decoupled_;
};

// Adam with decoupled weight decay (PyTorch's default weight_decay for AdamW is 0.01).
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamOptions defaults = AdamOptions().weight_decay(0.01))
      : Adam(std::move(params), defaults, /*decoupled=*/true) {}
  AdamW(std::initializer_list<Tensor> params,
        AdamOptions defaults = AdamOptions().weight_decay(0.01))
      : Adam(std::vector<Tensor>(params), defaults, /*decoupled=*/true) {}
  AdamW(const std::vector<OptimizerParamGroup>& groups,
        AdamOptions defaults = AdamOptions().weight_decay(0.01))
      : Adam(groups, defaults, /*decoupled=*/true) {}
};

struct RMSpropOptions : OptimizerOptions {
  explicit RMSpropOptions(double lr = 1e-2) : lr_(lr) {}
  SG_NN_OPTION(double, lr);
  SG_NN_OPTION(double, alpha) = 0.99;
  SG_NN_OPTION(double, eps) = 1e-8;
  SG_NN_OPTION(double, weight_decay) = 0;
  SG_NN_OPTION(double, momentum) = 0;
  SG_NN_OPTION(bool, centered) = false;

  std::unique_ptr<OptimizerOptions> clone() const override;
  double get_lr() const override { return lr_; }
  void set_lr(double lr) override { lr_ = lr; }
  std::map<std::string, double> numbers() const override;
  bool set_numbers(const std::map<std::string, double>& numbers) override;
};

struct AdagradOptions : OptimizerOptions {
  explicit AdagradOptions(double lr = 1e-2) : lr_(lr) {}
  SG_NN_OPTION(double, lr);
  SG_NN_OPTION(double, lr_decay) = 0;
  SG_NN_OPTION(double, weight_decay) = 0;
  SG_NN_OPTION(double, initial_accumulator_value) = 0;
  SG_NN_OPTION(double, eps) = 1e-10;

  std::unique_ptr<OptimizerOptions> clone() const override;
  double get_lr() const override { return lr_; }
  void set_lr(double lr) override { lr_ = lr; }
  std::map<std::string, double> numbers() const override;
  bool set_numbers(const std::map<std::string, double>& numbers) override;
};

// RMSprop and Adagrad (nn/optim_rmsprop.cc) update each parameter with in-place ops (no
// foreach kernel). State: RMSprop's "square_avg", "momentum_buffer" (momentum > 0) and
// "grad_avg" (centered); Adagrad's "sum" (starting at initial_accumulator_value); both
// count steps in the "<i>.step" scalars.
class RMSprop : public Optimizer {
 public:
  RMSprop(std::vector<Tensor> params, const RMSpropOptions& defaults = RMSpropOptions());
  RMSprop(std::initializer_list<Tensor> params, const RMSpropOptions& defaults = RMSpropOptions())
      : RMSprop(std::vector<Tensor>(params), defaults) {}
  RMSprop(const std::vector<OptimizerParamGroup>& groups,
          const RMSpropOptions& defaults = RMSpropOptions());
  void step() override;

 private:
  void check_options(const OptimizerOptions& o, const std::string& where) const override;
};

class Adagrad : public Optimizer {
 public:
  Adagrad(std::vector<Tensor> params, const AdagradOptions& defaults = AdagradOptions());
  Adagrad(std::initializer_list<Tensor> params, const AdagradOptions& defaults = AdagradOptions())
      : Adagrad(std::vector<Tensor>(params), defaults) {}
  Adagrad(const std::vector<OptimizerParamGroup>& groups,
          const AdagradOptions& defaults = AdagradOptions());
  void step() override;

 private:
  void check_options(const OptimizerOptions& o, const std::string& where) const override;
};

}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_OPTIM_H_
