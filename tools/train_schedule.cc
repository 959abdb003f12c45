#include "tools/train_schedule.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/error.h"
#include "tools/cli_flags.h"

namespace streamgrad {
namespace {

constexpr const char* kPrefix = "schedule.";

}  // namespace

TrainSchedule::TrainSchedule(std::unique_ptr<nn::LRScheduler> closed_form, bool per_batch)
    : closed_form_(std::move(closed_form)), per_batch_(per_batch) {}

TrainSchedule::TrainSchedule(std::unique_ptr<nn::ReduceLROnPlateau> plateau)
    : plateau_(std::move(plateau)) {}

void TrainSchedule::after_batch() {
  if (per_batch_) closed_form_->step();
}

void TrainSchedule::after_epoch(double validation_loss) {
  if (plateau_ != nullptr) {
    plateau_->step(validation_loss);
  } else if (!per_batch_) {
    closed_form_->step();
  }
}

void TrainSchedule::save(nn::Metadata& md) const {
  const nn::SchedulerState s =
      plateau_ != nullptr ? plateau_->state_dict() : closed_form_->state_dict();
  for (const auto& [key, value] : s) md[kPrefix + key] = nn::metadata_number(value);
}

bool TrainSchedule::load(const nn::Metadata& md, const std::string& path) {
  nn::SchedulerState s;
  for (const auto& [key, text] : md) {
    if (!absl::StartsWith(key, kPrefix)) continue;
    double value = 0;
    if (!nn::parse_metadata_number(text, &value)) {
      throw UsageError{absl::StrCat("--resume=", path, ": '", key, "' is not a number: ", text)};
    }
    s[key.substr(std::char_traits<char>::length(kPrefix))] = value;
  }
  if (s.empty()) return false;
  try {
    if (plateau_ != nullptr) {
      plateau_->load_state_dict(s);
    } else {
      // The lr follows from the step count and this run's settings (a run resumed with a
      // larger --epochs anneals over the longer run, as the uninterrupted one does).
      closed_form_->load_state_dict(s);
      closed_form_->restore_lrs();
    }
  } catch (const ValueError& e) {
    throw UsageError{absl::StrCat("--resume=", path, ": ", e.what())};
  }
  return true;
}

bool TrainSchedule::replay(int64_t epochs, int64_t batches) {
  if (plateau_ != nullptr) return false;
  const int64_t steps = per_batch_ ? epochs * batches : epochs;
  for (int64_t i = 0; i < steps; ++i) closed_form_->step();
  return true;
}

std::unique_ptr<TrainSchedule> make_schedule(const std::string& name, nn::Optimizer& opt,
                                             int64_t epochs, int64_t batches) {
  const int64_t steps = std::max<int64_t>(epochs * batches, 1);
  if (name == "cosine") {
    return std::make_unique<TrainSchedule>(std::make_unique<nn::CosineAnnealingLR>(opt, epochs),
                                           false);
  }
  if (name == "step") {
    return std::make_unique<TrainSchedule>(std::make_unique<nn::StepLR>(opt, 2, 0.5), false);
  }
  if (name == "warmup") {
    const int64_t warm = std::max<int64_t>(batches, 1);
    std::vector<std::shared_ptr<nn::LRScheduler>> parts = {
        std::make_shared<nn::LinearLR>(opt, 0.1, 1.0, warm),
        std::make_shared<nn::CosineAnnealingLR>(opt, std::max<int64_t>(steps - warm, 1))};
    return std::make_unique<TrainSchedule>(
        std::make_unique<nn::SequentialLR>(opt, std::move(parts), std::vector<int64_t>{warm}),
        true);
  }
  if (name == "onecycle") {
    // One step more than the run takes: OneCycleLR refuses a step past total_steps, and
    // the last batch's step() is taken after the last update.
    return std::make_unique<TrainSchedule>(
        std::make_unique<nn::OneCycleLR>(opt, opt.lr(), steps + 1), true);
  }
  if (name == "plateau") {
    return std::make_unique<TrainSchedule>(std::make_unique<nn::ReduceLROnPlateau>(
        opt, nn::ReduceLROnPlateauOptions().factor(0.5).patience(0)));
  }
  if (name == "none") return nullptr;
  throw UsageError{absl::StrCat("unknown --schedule=", name,
                                "; expected cosine, step, warmup, onecycle, plateau or none")};
}

}  // namespace streamgrad
