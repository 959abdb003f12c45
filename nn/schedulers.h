// Learning-rate schedulers, as torch.optim.lr_scheduler: StepLR, CosineAnnealingLR,
// LinearLR, LambdaLR, SequentialLR, OneCycleLR (closed forms of the epoch count) and
// ReduceLROnPlateau (driven by a metric).
//
//   nn::AdamW opt(groups, nn::AdamOptions(1e-3));
//   auto warm = std::make_shared<nn::LinearLR>(opt, 0.1, 1.0, 5);
//   auto cos = std::make_shared<nn::CosineAnnealingLR>(opt, 95);
//   nn::SequentialLR sched(opt, {warm, cos}, {5});
//   for (...) { ...; opt.step(); sched.step(); }
//
// Every scheduler acts on every parameter group, each from its own base lr: the group's
// initial_lr (nn/optimizer.h), which the first scheduler made for the optimiser sets to
// the group's lr then, as PyTorch's group["initial_lr"]. Making a scheduler sets each
// group's lr to its value at epoch 0 (LinearLR starts at start_factor times the base);
// step() advances one epoch (or one batch, for OneCycleLR) and sets the lrs again.
// OneCycleLR does not cycle momentum (PyTorch's cycle_momentum=False).
//
// state_dict() / load_state_dict(): the scheduler's counters as named numbers (write
// them into checkpoint metadata with nn::metadata_number); loading changes no lr (the
// optimiser's own state holds those), as in PyTorch. restore_lrs() then sets every group's
// lr to the schedule's value at last_epoch(): for a schedule made with other settings than
// the saved one (a longer T_max or total_steps when a resumed run trains longer), or an
// optimiser whose lrs were not loaded.
//
// Thread-safety: as the optimiser's. Failure: ValueError for out-of-range arguments
// (messages name the scheduler), for a step past OneCycleLR's total_steps, for groups
// added to the optimiser after the scheduler was made, and for load_state_dict states
// that lack keys or hold another group count (the scheduler is then unchanged).
#ifndef STREAMGRAD_NN_SCHEDULERS_H_
#define STREAMGRAD_NN_SCHEDULERS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nn/optimizer.h"
#include "nn/options.h"

namespace streamgrad {
namespace nn {

using SchedulerState = std::map<std::string, double>;

class LRScheduler {
 public:
  LRScheduler(Optimizer& optimizer, const char* name);
  virtual ~LRScheduler() = default;
  void step();
  double get_last_lr() const { return optimizer_.lr(); }  // group 0's
  std::vector<double> get_last_lrs() const;              // every group's
  int64_t last_epoch() const { return epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }

  // "last_epoch" and "base_lr.<group>".
  SchedulerState state_dict() const;
  void load_state_dict(const SchedulerState& state);
  void restore_lrs() { apply(); }

 protected:
  friend class SequentialLR;
  // Group g's lr at `epoch` (may throw ValueError).
  virtual double lr_at(int64_t epoch, size_t g) const = 0;
  // Sets every group's lr to its value at epoch_; derived constructors call it last.
  void apply();
  Optimizer& optimizer_;
  const char* name_;
  std::vector<double> base_lrs_;
  int64_t epoch_ = 0;

 private:
  std::vector<double> lrs_at(int64_t epoch) const;
};

class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 private:
  double lr_at(int64_t epoch, size_t g) const override;
  int64_t step_size_;
  double gamma_;
};

class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min = 0);

 private:
  double lr_at(int64_t epoch, size_t g) const override;
  int64_t t_max_;
  double eta_min_;
};

// base * (start_factor + (end_factor - start_factor) * min(epoch, total_iters) / total_iters).
class LinearLR : public LRScheduler {
 public:
  explicit LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
                    int64_t total_iters = 5);

 private:
  double lr_at(int64_t epoch, size_t g) const override;
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

// base * fn(epoch); one function for every group, or one per group.
class LambdaLR : public LRScheduler {
 public:
  using Fn = std::function<double(int64_t epoch)>;
  LambdaLR(Optimizer& optimizer, Fn fn);
  LambdaLR(Optimizer& optimizer, std::vector<Fn> fns);

 private:
  double lr_at(int64_t epoch, size_t g) const override;
  std::vector<Fn> fns_;
};

// schedulers[k] from milestones[k-1] on, counting its epochs from 0 there. The
// schedulers must act on the same optimiser; milestones increase, one fewer than schedulers.
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<int64_t> milestones);

 private:
  double lr_at(int64_t epoch, size_t g) const override;
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

// The 1cycle policy, stepped once per batch: from max_lr / div_factor up to max_lr over
// the first pct_start of total_steps, then down to max_lr / div_factor / final_div_factor
// (three_phase: back to the start lr first, over as many steps, then down to the minimum),
// annealing by cosine ("cos") or linearly ("linear"). One max_lr, or one per group.
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, double pct_start = 0.3,
             const std::string& anneal_strategy = "cos", double div_factor = 25,
             double final_div_factor = 1e4, bool three_phase = false);
  OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, int64_t total_steps,
             double pct_start = 0.3, const std::string& anneal_strategy = "cos",
             double div_factor = 25, double final_div_factor = 1e4, bool three_phase = false);

 private:
  struct Phase {
    double end_step;
    int start, end;  // 0: initial lr, 1: max lr, 2: min lr
  };
  double lr_at(int64_t epoch, size_t g) const override;
  std::vector<double> max_lrs_;
  int64_t total_steps_;
  bool cos_;
  double final_div_factor_;
  std::vector<Phase> phases_;
};

struct ReduceLROnPlateauOptions {
  SG_NN_OPTION(std::string, mode) = "min";  // "min": lower metrics are better; or "max"
  SG_NN_OPTION(double, factor) = 0.1;       // new lr = lr * factor, factor < 1
  SG_NN_OPTION(int64_t, patience) = 10;     // bad epochs tolerated before reducing
  SG_NN_OPTION(double, threshold) = 1e-4;   // what counts as better, see threshold_mode
  SG_NN_OPTION(std::string, threshold_mode) = "rel";  // "rel" or "abs"
  SG_NN_OPTION(int64_t, cooldown) = 0;      // epochs after a reduction not counted as bad
  SG_NN_OPTION(double, min_lr) = 0;         // for every group
  SG_NN_OPTION(double, eps) = 1e-8;         // reductions smaller than this are skipped
};

// Reduces every group's lr by `factor` once the metric given to step() has not improved
// for more than `patience` epochs, as torch.optim.lr_scheduler.ReduceLROnPlateau.
class ReduceLROnPlateau {
 public:
  explicit ReduceLROnPlateau(Optimizer& optimizer,
                             const ReduceLROnPlateauOptions& options = ReduceLROnPlateauOptions());
  void step(double metric);
  double get_last_lr() const { return optimizer_.lr(); }
  std::vector<double> get_last_lrs() const;
  int64_t last_epoch() const { return epoch_; }
  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }
  int64_t cooldown_counter() const { return cooldown_counter_; }

  // "last_epoch", "best", "num_bad_epochs", "cooldown_counter".
  SchedulerState state_dict() const;
  void load_state_dict(const SchedulerState& state);

 private:
  bool is_better(double metric) const;
  Optimizer& optimizer_;
  ReduceLROnPlateauOptions options_;
  bool min_mode_, rel_;
  double best_;
  int64_t num_bad_epochs_ = 0, cooldown_counter_ = 0, epoch_ = 0;
};

}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_SCHEDULERS_H_
