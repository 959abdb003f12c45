// tools/train's --schedule: the learning-rate schedule of a run, whichever kind it is, behind
// one interface the epoch loop and the checkpoints use.
//
//   cosine    CosineAnnealingLR to 0 over the epochs, stepped per epoch (the default)
//   step      StepLR: halved every 2 epochs
//   warmup    per batch: LinearLR from 0.1x to the full lr over the first epoch's batches,
//             then CosineAnnealingLR to 0 over the remaining batches (SequentialLR)
//   onecycle  OneCycleLR per batch over the whole run, peaking at --lr
//   plateau   ReduceLROnPlateau on the validation loss: halved after an epoch that did not
//             improve it (patience 0)
//   none      a constant lr
//
// A checkpoint stores the schedule's state_dict() as "schedule.<key>" metadata numbers,
// and --resume loads it, so every schedule (plateau's best loss and counters included)
// continues exactly. A checkpoint without those keys (written before they were stored)
// resumes a per-epoch closed-form schedule by replaying its steps.
//
// Thread-safety: call from the training thread. Failure: make_schedule throws UsageError
// for an unknown name; load() throws UsageError for a state that does not fit (the
// schedule is then unchanged).
#ifndef STREAMGRAD_TOOLS_TRAIN_SCHEDULE_H_
#define STREAMGRAD_TOOLS_TRAIN_SCHEDULE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "nn/checkpoint.h"
#include "nn/optimizer.h"
#include "nn/schedulers.h"

namespace streamgrad {

class TrainSchedule {
 public:
  TrainSchedule(std::unique_ptr<nn::LRScheduler> closed_form, bool per_batch);
  explicit TrainSchedule(std::unique_ptr<nn::ReduceLROnPlateau> plateau);

  void after_batch();                          // steps the per-batch schedules
  void after_epoch(double validation_loss);    // steps the others
  // Writes the state into `md` as "schedule.<key>"; reads it back from checkpoint metadata
  // (false when `md` has none: an older checkpoint).
  void save(nn::Metadata& md) const;
  bool load(const nn::Metadata& md, const std::string& path);
  // For an older checkpoint: the steps of `epochs` epochs of `batches` batches, where the
  // schedule is a closed form of its step count (false for plateau).
  bool replay(int64_t epochs, int64_t batches);

 private:
  std::unique_ptr<nn::LRScheduler> closed_form_;
  std::unique_ptr<nn::ReduceLROnPlateau> plateau_;
  bool per_batch_ = false;
};

// Null for --schedule=none. `batches` is the training loader's batches per epoch.
std::unique_ptr<TrainSchedule> make_schedule(const std::string& name, nn::Optimizer& opt,
                                             int64_t epochs, int64_t batches);

}  // namespace streamgrad

#endif  // STREAMGRAD_TOOLS_TRAIN_SCHEDULE_H_
