#include "tools/train_setup.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "distributed/ddp.h"
#include "distributed/sampler.h"
#include "engine/autocast.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "nn/data/dataset.h"
#include "nn/data/text.h"
#include "nn/parallel/data_parallel.h"
#include "ops/ops.h"
#include "runtime/memory/memory_history.h"
#include "runtime/runtime.h"
#include "tools/cli_flags.h"
#include "tools/train_models.h"

namespace streamgrad {
namespace {

// A Dataset view of the first `n` examples: --limit and --test-limit of the text data
// (image files are read only that far instead: load_data).
class Prefix : public nn::Dataset {
 public:
  Prefix(std::shared_ptr<const nn::Dataset> base, int64_t n) : base_(std::move(base)), n_(n) {}
  int64_t size() const override { return n_; }
  Shape example_shape() const override { return base_->example_shape(); }
  DType data_dtype() const override { return base_->data_dtype(); }
  Shape target_shape() const override { return base_->target_shape(); }
  void get_example(int64_t i, void* d, int64_t* t) const override { base_->get_example(i, d, t); }

 private:
  std::shared_ptr<const nn::Dataset> base_;
  int64_t n_;
};

std::shared_ptr<const nn::Dataset> first(std::shared_ptr<const nn::Dataset> data, int64_t n) {
  if (n > 0 && n < data->size()) return std::make_shared<Prefix>(std::move(data), n);
  return data;
}

// --device=auto is the first GPU where one is usable, else sim:0. A device that does not
// exist is an error that says why (no driver, no GPU, a build without CUDA) and what to
// pass instead.
Device pick_device(const std::string& flag) {
  if (flag == "auto") {
    return device_count(DeviceType::kCuda) > 0 ? Device(DeviceType::kCuda, 0) : Device("sim:0");
  }
  try {
    return resolve_device(Device(flag), "--device");
  } catch (const DeviceError& e) {
    throw DeviceError(absl::StrCat(e.what(), ". Train on --device=cpu or --device=sim:0 ",
                                   "instead; tools/devices lists this machine's devices"));
  }
}

std::unique_ptr<nn::Optimizer> make_optimizer(const std::string& name,
                                              const std::vector<Tensor>& params, double lr) {
  if (name == "sgd") {
    return std::make_unique<nn::SGD>(params, nn::SGDOptions(lr > 0 ? lr : 0.05).momentum(0.9));
  }
  if (name == "adam") {
    return std::make_unique<nn::Adam>(params, nn::AdamOptions(lr > 0 ? lr : 1e-3));
  }
  if (name == "adamw") {
    // Two parameter groups, as transformer recipes split them: decay on the matrices and
    // kernels (dim >= 2), none on biases and norm weights.
    std::vector<Tensor> decay, no_decay;
    for (const Tensor& p : params) (p.dim() >= 2 ? decay : no_decay).push_back(p);
    const nn::AdamOptions options = nn::AdamOptions(lr > 0 ? lr : 1e-3).weight_decay(0.01);
    std::vector<nn::OptimizerParamGroup> groups;
    if (!decay.empty()) groups.emplace_back(decay);
    if (!no_decay.empty()) groups.emplace_back(no_decay, nn::AdamOptions(options).weight_decay(0));
    return std::make_unique<nn::AdamW>(groups, options);
  }
  throw UsageError{absl::StrCat("unknown --optimizer=", name, "; expected sgd, adam or adamw")};
}

// --distributed: the process group from tools/launch's variables, or null without it.
std::shared_ptr<distributed::ProcessGroup> process_group(const TrainOptions& o) {
  if (!o.distributed) return nullptr;
  if (!o.data_parallel.empty()) {
    throw UsageError{"--distributed and --data-parallel exclude each other: DDP runs one "
                     "process per device"};
  }
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(o.dist_timeout * 1000));
  return distributed::init_process_group_from_env("gloo", timeout);
}

// --data-parallel's devices (empty without it), each checked to exist.
std::vector<Device> data_parallel_devices(const std::string& flag) {
  std::vector<Device> out;
  for (absl::string_view name : absl::StrSplit(flag, ',', absl::SkipEmpty())) {
    try {
      out.push_back(resolve_device(Device(std::string(name)), "--data-parallel"));
    } catch (const Error& e) {
      throw UsageError{e.what()};
    }
  }
  if (!flag.empty() && out.size() < 2) {
    throw UsageError{absl::StrCat("--data-parallel=", flag,
                                  ": name at least two devices (sim:0,sim:1)")};
  }
  return out;
}

// The devices (and processes) of the run in words.
std::string where_of(const TrainRun& r) {
  if (r.group != nullptr) {
    return absl::StrCat(r.device.str(), " x ", r.world, " processes (DDP, gloo)");
  }
  if (r.parallel_devices.empty()) return r.device.str();
  return absl::StrCat(absl::StrJoin(r.parallel_devices, "+",
                                    [](std::string* out, const Device& d) {
                                      out->append(d.str());
                                    }),
                      " (DataParallel)");
}

// --model=gpt's text: a corpus split by documents (10 % for validation, seeded), its
// characters as the vocabulary, and windows of --context tokens side by side.
void load_text(const TrainOptions& o, TrainRun& r) {
  const std::string path = user_path(o.data.empty() ? kDefaultTextData : o.data);
  nn::TextCorpus corpus;
  try {
    corpus = nn::load_text_corpus(path, 0.1, o.seed);
  } catch (const IOError& e) {
    throw UsageError{absl::StrCat("--data=", path, ": ", e.what(),
                                  o.data.empty() ? " (tools/bootstrap.sh installs Debian's "
                                                   "fortunes package there)"
                                                 : "")};
  }
  r.vocab =
      std::make_shared<nn::CharVocab>(nn::CharVocab::from_text(corpus.train + corpus.validation));
  const int64_t t = o.gpt.context;
  auto windows = [&](const std::string& text) {
    return std::make_shared<nn::TextDataset>(
        std::make_shared<nn::TextWindows>(r.vocab->encode(text), t), /*stride=*/t);
  };
  r.train_data = first(windows(corpus.train), o.limit);
  r.test_data = first(windows(corpus.validation), o.test_limit);
}

void load_data(const TrainOptions& o, TrainRun& r) {
  if (o.model == "gpt") return load_text(o, r);
  const std::string dir = user_path(o.data.empty() ? kDefaultImageData : o.data);
  try {
    // Read no more than the limits keep: each start decompressed all 60,000 images.
    r.train_data = nn::load_fashion_mnist(dir, /*train=*/true, /*normalize=*/true, o.limit);
    r.test_data = nn::load_fashion_mnist(dir, /*train=*/false, /*normalize=*/true, o.test_limit);
  } catch (const IOError& e) {
    // Missing or damaged files: the flag that named them is what to change.
    throw UsageError{absl::StrCat("--data=", o.data, ": ", e.what())};
  }
}

// --checkpoint and --offload, refused before any data is read where they cannot apply.
void set_memory_options(const TrainOptions& o, TrainRun& r) {
  if (o.checkpoint && o.model == "twobranch") {
    throw UsageError{"--checkpoint: --model=twobranch has no checkpointed form (its branches "
                     "run on their own streams); use mlp, cnn, resnet or gpt"};
  }
  if (!o.offload) return;
  if (r.device.is_cpu()) {
    throw UsageError{"--offload moves saved activations from a device to pinned host memory; "
                     "on cpu there is nothing to move: use --device=sim:N or cuda:N"};
  }
  nn::OffloadOptions off;
  off.prefetch = static_cast<int>(o.offload_prefetch);
  r.offload = off;
}

// The model, what runs it, and the loss scaler of its mixed precision.
void make_model_and_runner(const TrainOptions& o, TrainRun& r) {
  GptConfig gpt = o.gpt;
  if (r.vocab != nullptr) gpt.vocab = r.vocab->size();
  {
    const MemoryCategoryScope category("parameter");  // for --memory-snapshot
    r.model = make_model(o.model, gpt, o.checkpoint);
    r.model->to(r.device);
  }
  if (r.amp.enabled && r.amp.dtype == DType::kFloat16) {
    r.scaler = std::make_unique<nn::GradScaler>(
        nn::GradScalerOptions().init_scale(o.amp_init_scale));
    r.amp.scaler = r.scaler.get();
  }
  if (auto* two = dynamic_cast<TwoBranch*>(r.model.get())) {
    two->use_streams(r.device, o.streams == 2);
  }
  r.runner = r.model;
  if (!r.parallel_devices.empty()) {
    r.runner = std::make_shared<nn::parallel::DataParallel>(r.model, r.parallel_devices);
  }
  if (r.group != nullptr) {
    const auto options =
        distributed::DistributedDataParallelOptions().bucket_cap_mb(o.bucket_cap_mb);
    r.runner = std::make_shared<distributed::DistributedDataParallel>(r.model, r.group, options);
  }
}

void make_loaders(const TrainOptions& o, TrainRun& r) {
  const nn::DataLoaderOptions common = nn::DataLoaderOptions()
                                           .device(r.device)
                                           .seed(o.seed)
                                           .workers(static_cast<int>(o.workers))
                                           .prefetch(static_cast<int>(o.prefetch));
  nn::DataLoaderOptions train = nn::DataLoaderOptions(common).batch_size(o.batch_size);
  if (r.group != nullptr) {
    train.sampler(std::make_shared<distributed::DistributedSampler>(
        r.train_data->size(), r.world, r.rank,
        distributed::DistributedSamplerOptions().seed(o.seed)));
  }
  r.train_loader = std::make_unique<nn::DataLoader>(r.train_data, train);
  // Images are evaluated 1000 at a time. A GPT window's activations are a training
  // step's per example, so 1000 windows at once reserved 7.5 times the training peak
  // (623 against 83 MiB with the defaults): the GPT evaluates in training batches.
  const int64_t test_batch = o.model == "gpt" ? o.batch_size : 1000;
  r.test_loader = std::make_unique<nn::DataLoader>(
      r.test_data, nn::DataLoaderOptions(common).batch_size(test_batch).shuffle(false));
}

}  // namespace

TrainRun setup(const TrainOptions& o) {
  TrainRun r;
  r.parallel_devices = data_parallel_devices(o.data_parallel);
  r.group = process_group(o);
  r.rank = r.group != nullptr ? r.group->rank() : 0;
  r.world = r.group != nullptr ? r.group->size() : 1;
  r.device = r.parallel_devices.empty() ? pick_device(o.device) : r.parallel_devices.front();
  if (r.group != nullptr && r.device.type() == DeviceType::kCuda) {
    const char* local = std::getenv("LOCAL_RANK");  // one GPU per process of a host
    r.device = pick_device(absl::StrCat("cuda:", local != nullptr ? local : "0"));
  }
  set_memory_options(o, r);
  r.amp = nn::amp_config(o.amp, r.device);  // a bad --amp is refused before any data is read
  r.where = where_of(r);
  if (r.rank != 0) {
    r.sink = std::shared_ptr<FILE>(std::fopen("/dev/null", "w"), &std::fclose);
    if (r.sink != nullptr) r.out = r.sink.get();
  }
  load_data(o, r);
  manual_seed(o.seed);
  r.identity = RunIdentity{o.model, o.optimizer, o.schedule};
  make_model_and_runner(o, r);
  r.optimizer = make_optimizer(o.optimizer, r.model->parameters(), o.lr);
  make_loaders(o, r);
  r.schedule =
      make_schedule(o.schedule, *r.optimizer, o.epochs, r.train_loader->batches_per_epoch());
  if (!o.resume.empty()) {
    r.done = resume(user_path(o.resume), r.identity, *r.model,
                    o.eval_only ? nullptr : r.optimizer.get(), r.scaler.get(),
                    o.eval_only ? nullptr : r.schedule.get(), r.train_loader->batches_per_epoch());
  }
  return r;
}

Evaluation evaluate(TrainRun& run) {
  NoGradGuard no_grad;
  AutocastGuard autocast(run.amp.device_type, run.amp.dtype, run.amp.enabled);
  nn::Module& model = *run.runner;
  model.eval();
  run.test_loader->start_epoch(0);
  int64_t correct = 0, seen = 0;
  Tensor loss_sum;
  CrossEntropyOptions sum_loss;
  sum_loss.reduction = Reduction::kSum;
  for (nn::Batch b; run.test_loader->next(&b);) {
    const Tensor logits = model.forward(b.data);
    const Tensor l = nn::training_loss(logits, b.target, sum_loss);
    loss_sum = loss_sum.defined() ? add(loss_sum, l) : l;
    // The class of each example, or of each position of a sequence.
    const std::vector<int64_t> predicted = argmax(logits, -1).to_vector<int64_t>();
    const std::vector<int64_t> truth = b.target.to_vector<int64_t>();
    for (size_t i = 0; i < truth.size(); ++i) correct += predicted[i] == truth[i];
    seen += static_cast<int64_t>(truth.size());
  }
  model.train();
  return {loss_sum.item<float>() / seen, static_cast<double>(correct) / seen};
}

}  // namespace streamgrad
