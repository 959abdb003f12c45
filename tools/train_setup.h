// tools/train's setup: from its flags (TrainOptions, filled by tools/train.cc) to everything
// a run trains with (TrainRun): devices and process group, data sets and loaders, the model
// and what runs it (itself, DataParallel or DistributedDataParallel), optimiser, schedule,
// mixed precision and loss scaler, and the epochs an earlier run completed (--resume).
// Also the evaluation on the test set, which both the epochs and --eval-only run.
//
// Thread-safety: call from the training thread. Failure: UsageError (tools/cli_flags.h: one
// message, exit code 2) for flags that contradict each other or name what does not exist
// (a device, the data folder, a checkpoint of another run); streamgrad errors propagate.
#ifndef STREAMGRAD_TOOLS_TRAIN_SETUP_H_
#define STREAMGRAD_TOOLS_TRAIN_SETUP_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distributed/process_group.h"
#include "nn/data/loader.h"
#include "nn/data/text.h"
#include "nn/grad_scaler.h"
#include "nn/optim.h"
#include "nn/offload.h"
#include "nn/train_step.h"
#include "tools/train_checkpoint.h"
#include "tools/train_models_gpt.h"
#include "tools/train_schedule.h"

namespace streamgrad {

constexpr const char* kDefaultImageData = "/usr/share/datasets/fashion-mnist";
constexpr const char* kDefaultTextData = "/usr/share/games/fortunes";

// tools/train's flags, as values (tools/train.cc documents each). An empty `data` is the
// model's default: kDefaultTextData for gpt, kDefaultImageData for the others.
struct TrainOptions {
  std::string model = "cnn", device = "auto", data_parallel, optimizer = "adam";
  std::string schedule = "cosine", data, save, resume, trace, metrics, plot, amp = "off";
  std::string memory_snapshot;
  bool distributed = false, eval_only = false, json = false;
  double dist_timeout = 60, bucket_cap_mb = 25, lr = 0, amp_init_scale = 65536;
  int64_t epochs = 5, batch_size = 64, limit = 0, test_limit = 0, streams = 2;
  int64_t workers = 1, prefetch = 2;
  bool offload = false;  // saved activations to pinned host memory (nn/offload.h)
  bool checkpoint = false;  // recomputation in backward (make_model's `checkpoint`)
  int64_t offload_prefetch = 2;
  uint64_t seed = 0;
  GptConfig gpt;  // --model=gpt's sizes (its vocab comes from the data)
  int64_t sample_chars = 300, top_k = 40;
  double temperature = 0.8;
};

struct TrainRun {
  std::vector<Device> parallel_devices;              // --data-parallel's, else empty
  std::shared_ptr<distributed::ProcessGroup> group;  // --distributed's, else null
  int rank = 0, world = 1;
  Device device = Device("cpu");
  std::string where;  // the devices in words, for the report
  FILE* out = stderr;  // rank 0 reports; the others write to /dev/null
  std::shared_ptr<FILE> sink;
  std::shared_ptr<const nn::Dataset> train_data, test_data;  // gpt: validation as test
  std::shared_ptr<const nn::CharVocab> vocab;                // gpt only
  RunIdentity identity;
  std::shared_ptr<nn::Module> model;   // what checkpoints hold
  std::shared_ptr<nn::Module> runner;  // what forward runs: the model or a parallel wrapper
  nn::AmpConfig amp;
  std::optional<nn::OffloadOptions> offload;  // --offload's, else none
  std::string memory_snapshot;  // where --memory-snapshot's record goes, when recording
  std::unique_ptr<nn::GradScaler> scaler;  // --amp=fp16 only
  std::unique_ptr<nn::Optimizer> optimizer;
  std::unique_ptr<TrainSchedule> schedule;  // null for --schedule=none
  int64_t done = 0;  // epochs completed before this run (--resume)
  std::unique_ptr<nn::DataLoader> train_loader, test_loader;
};

TrainRun setup(const TrainOptions& o);

struct Evaluation {
  double loss = 0, accuracy = 0;
};
// The mean cross-entropy and the accuracy of `run.runner` over the test set, in eval mode
// and under the run's autocast.
Evaluation evaluate(TrainRun& run);

}  // namespace streamgrad

#endif  // STREAMGRAD_TOOLS_TRAIN_SETUP_H_
