// tools/train's checkpoints: what --save writes beside the tensors, and how --resume reads
// it back.
//
//   run_metadata(run, epoch, scaler, schedule)   the __metadata__ strings: model, epoch,
//                                      random state, optimiser and schedule names, the loss
//                                      scaler's state (--amp=fp16) and the schedule's state
//   save(path, run, epoch, model, opt, scaler, schedule)   writes --save's checkpoint
//                                      (tensors, the optimiser's parameter groups and state,
//                                      and run_metadata)
//   resume(path, run, model, opt, scaler, schedule, batches)   checks that the file is a
//                                      checkpoint of this run (same model; same optimiser
//                                      and schedule unless only evaluating, opt == nullptr),
//                                      loads model, optimiser, scaler and schedule (see
//                                      tools/train_schedule.h for older checkpoints),
//                                      restores the random state and returns the epochs
//                                      the checkpoint had completed
//
// Thread-safety: call from the training thread. Failure: save and resume throw UsageError
// (tools/cli_flags.h: one message, exit code 2) naming the flag, the file and the problem
// (nn/checkpoint.h's exception, or the mismatch); after a failed resume the model and
// optimiser are as they were.
#ifndef STREAMGRAD_TOOLS_TRAIN_CHECKPOINT_H_
#define STREAMGRAD_TOOLS_TRAIN_CHECKPOINT_H_

#include <cstdint>
#include <string>

#include "nn/checkpoint.h"
#include "nn/grad_scaler.h"
#include "nn/module.h"
#include "nn/optim.h"
#include "tools/train_schedule.h"

namespace streamgrad {

// The flags a checkpoint must agree with to be resumed.
struct RunIdentity {
  std::string model, optimizer, schedule;
};

nn::Metadata run_metadata(const RunIdentity& run, int64_t epoch, const nn::GradScaler* scaler,
                          const TrainSchedule* schedule);
void save(const std::string& path, const RunIdentity& run, int64_t epoch, const nn::Module& model,
          const nn::Optimizer* opt, const nn::GradScaler* scaler, const TrainSchedule* schedule);
int64_t resume(const std::string& path, const RunIdentity& run, nn::Module& model,
               nn::Optimizer* opt, nn::GradScaler* scaler, TrainSchedule* schedule,
               int64_t batches);

}  // namespace streamgrad

#endif  // STREAMGRAD_TOOLS_TRAIN_CHECKPOINT_H_
