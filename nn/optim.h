// Optimisers (SGD, Adam, AdamW) and learning-rate schedulers (StepLR,
// CosineAnnealingLR), with PyTorch's update rules, as torch::optim.
//
//   nn::SGD opt(model->parameters(), nn::SGDOptions(0.1).momentum(0.9).nesterov(true));
//   nn::StepLR sched(opt, /*step_size=*/2, /*gamma=*/0.5);
//   for (...) { opt.zero_grad(); loss.backward(); opt.step(); }  sched.step();  // per epoch
//
// step() runs under NoGradGuard on each parameter's device's current stream (so
// parameters on several devices are fine); parameters without a gradient are skipped, as
// in PyTorch. With the `foreach` option (the default) one multi-tensor kernel updates all
// parameters of each (device, dtype) group in one launch (kernels/foreach.h, the
// reference framework's "foreach" path); without it each parameter is updated by several
// in-place ops, one kernel each. Both give the same bits (kernels/functors/optim_ops.h says when
// they may not) and the same state. State (momentum buffers, Adam's moments and step
// counts) is created lazily on the first step, and exported by state_dict() as named
// tensors ("<param index>.<name>") plus named scalars, for checkpoints.
//
// Thread-safety: one thread steps an optimiser. Failure: ValueError for an empty
// parameter list, negative learning rates or weight decay, momentum/betas outside [0, 1),
// nesterov without momentum, and for load_state_dict states whose keys, shapes or dtypes
// do not match (the optimiser is then unchanged).
#ifndef STREAMGRAD_NN_OPTIM_H_
#define STREAMGRAD_NN_OPTIM_H_

#include <map>
#include <string>
#include <vector>

#include "nn/module.h"
#include "nn/options.h"

namespace streamgrad {
namespace nn {

struct OptimizerState {
  NamedTensors tensors;
  std::map<std::string, double> scalars;
};

class Optimizer {
 public:
  Optimizer(std::vector<Tensor> params, double lr, const char* name);
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  void zero_grad(bool set_to_none = true);
  double lr() const { return lr_; }
  void set_lr(double lr);
  const std::vector<Tensor>& params() const { return params_; }

  OptimizerState state_dict() const;
  void load_state_dict(const OptimizerState& state);

 protected:
  // The state tensor `name` of parameter i (undefined until created).
  Tensor& state(size_t i, const std::string& name);
  std::vector<Tensor> params_;
  double lr_;
  const char* name_;
  std::vector<std::map<std::string, Tensor>> state_;  // per parameter
  std::map<std::string, double> scalars_;             // step counts and the like
};

struct SGDOptions {
  explicit SGDOptions(double lr) : lr_(lr) {}
  SG_NN_OPTION(double, lr);
  SG_NN_OPTION(double, momentum) = 0;
  SG_NN_OPTION(double, dampening) = 0;
  SG_NN_OPTION(double, weight_decay) = 0;
  SG_NN_OPTION(bool, nesterov) = false;
  SG_NN_OPTION(bool, foreach) = true;  // one launch per (device, dtype) group
};

struct AdamOptions {
  explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
  SG_NN_OPTION(double, lr);
  SG_NN_OPTION(double, beta1) = 0.9;
  SG_NN_OPTION(double, beta2) = 0.999;
  SG_NN_OPTION(double, eps) = 1e-8;
  SG_NN_OPTION(double, weight_decay) = 0;  // Adam: L2 added to the gradient; AdamW: decoupled
  SG_NN_OPTION(bool, foreach) = true;      // one launch per (device, dtype) group
};


class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, const SGDOptions& options);
  void step() override;
  SGDOptions options;

 private:
  void step_per_tensor();
  void step_foreach();  // nn/optim_foreach.cc
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, const AdamOptions& options, bool decoupled = false);
  void step() override;
  AdamOptions options;

 private:
  void step_per_tensor();
  void step_foreach();  // nn/optim_foreach.cc
  bool decoupled_;
};

// Adam with decoupled weight decay (PyTorch's default weight_decay for AdamW is 0.01).
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamOptions options = AdamOptions().weight_decay(0.01))
      : Adam(std::move(params), options, /*decoupled=*/true) {}
};

// Schedulers set the optimiser's learning rate from the epoch count; step() once per
// epoch, after the optimiser's steps.
class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  void step();
  double get_last_lr() const { return optimizer_.lr(); }
  int64_t last_epoch() const { return epoch_; }

 protected:
  virtual double lr_at(int64_t epoch) const = 0;
  Optimizer& optimizer_;
  double base_lr_;
  int64_t epoch_ = 0;
};

class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 private:
  double lr_at(int64_t epoch) const override;
  int64_t step_size_;
  double gamma_;
};

class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min = 0);

 private:
  double lr_at(int64_t epoch) const override;
  int64_t t_max_;
  double eta_min_;
};

}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_OPTIM_H_
