#include "tools/train_checkpoint.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/factories.h"
#include "runtime/base/error.h"
#include "tools/cli_flags.h"

namespace streamgrad {

nn::Metadata run_metadata(const RunIdentity& run, int64_t epoch, const nn::GradScaler* scaler,
                          const TrainSchedule* schedule) {
  const RngState rng = rng_state();
  nn::Metadata md = {{"model", run.model},
                     {"epoch", std::to_string(epoch)},
                     {"rng_seed", std::to_string(rng.seed)},
                     {"rng_offset", std::to_string(rng.offset)},
                     {"optimizer", run.optimizer},
                     {"schedule", run.schedule}};
  if (scaler != nullptr) {  // --amp=fp16: the loss scale continues on --resume
    for (const auto& [key, value] : scaler->state_dict()) md[key] = value;
  }
  if (schedule != nullptr) schedule->save(md);
  return md;
}

void save(const std::string& path, const RunIdentity& run, int64_t epoch, const nn::Module& model,
          const nn::Optimizer* opt, const nn::GradScaler* scaler, const TrainSchedule* schedule) {
  try {
    nn::save_checkpoint(path, model, opt, run_metadata(run, epoch, scaler, schedule));
  } catch (const Error& e) {
    throw UsageError{absl::StrCat("--save: ", e.what())};
  }
}

int64_t resume(const std::string& path, const RunIdentity& run, nn::Module& model,
               nn::Optimizer* opt, nn::GradScaler* scaler, TrainSchedule* schedule,
               int64_t batches) {
  const std::string& model_name = run.model;
  // What the file holds is checked first, so that a mismatch reads as one.
  nn::Metadata md;
  try {
    md = nn::load_safetensors_metadata(path);
  } catch (const Error& e) {
    throw UsageError{absl::StrCat("--resume: ", e.what())};
  }
  auto field = [&](const std::string& key) {
    const auto it = md.find(key);
    if (it == md.end()) {
      throw UsageError{absl::StrCat("--resume=", path, " has no '", key,
                                    "' in its metadata: not a checkpoint of tools/train")};
    }
    return it->second;
  };
  if (field("model") != model_name) {
    throw UsageError{absl::StrCat("--resume=", path, " holds a ", field("model"),
                                  " model, not --model=", model_name)};
  }
  const std::pair<const char*, std::string> same_as_flags[] = {
      {"optimizer", run.optimizer}, {"schedule", run.schedule}};
  for (const auto& [key, flag] : same_as_flags) {
    if (opt != nullptr && field(key) != flag) {
      throw UsageError{absl::StrCat("--resume=", path, " was trained with --", key, "=",
                                    field(key), ", not ", flag, "; resume with the same flags")};
    }
  }
  nn::Metadata loaded;
  try {
    loaded = nn::load_checkpoint(path, model, opt);
  } catch (const Error& e) {
    throw UsageError{absl::StrCat("--resume: ", e.what())};
  }
  int64_t epoch = 0;
  RngState rng;
  if (!absl::SimpleAtoi(field("epoch"), &epoch) || epoch < 0 ||
      !absl::SimpleAtoi(field("rng_seed"), &rng.seed) ||
      !absl::SimpleAtoi(field("rng_offset"), &rng.offset)) {
    throw UsageError{absl::StrCat("--resume=", path, ": malformed epoch or random state")};
  }
  // A checkpoint of a scaled run restores the scale; one without it starts from
  // --amp-init-scale.
  if (scaler != nullptr && loaded.count("scaler.scale") == 1) {
    try {
      scaler->load_state_dict(loaded);
    } catch (const ValueError& e) {
      throw UsageError{absl::StrCat("--resume=", path, ": ", e.what())};
    }
  }
  // The schedule continues where it was: from its stored state, or (a checkpoint written
  // before schedules stored one) by replaying the steps of the epochs done.
  if (schedule != nullptr && !schedule->load(loaded, path) && !schedule->replay(epoch, batches)) {
    throw UsageError{absl::StrCat("--resume=", path, " holds no state of --schedule=",
                                  run.schedule, "; resume it with --schedule=none")};
  }
  set_rng_state(rng);
  return epoch;
}

}  // namespace streamgrad
