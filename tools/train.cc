// tools/train: trains a model on Fashion-MNIST (the README's main job).
//
//   train                                   cnn, 5 epochs, Adam, on sim:0 (or cuda)
//   train --model=mlp --device=cpu --json   ends with {"test_accuracy":...,"epochs":...}
//   train --model=twobranch --streams=2 --metrics=m.jsonl --plot=curves.svg
//   launch --nproc=2 -- train --distributed --device=cpu   DistributedDataParallel over gloo
//   train --amp=bf16 --device=cpu            mixed precision (autocast; fp16 adds loss scaling)
//
// Per epoch: a progress line (a redrawn bar on a terminal), then train loss, test loss,
// test accuracy, examples/s and peak device memory of the training steps; with --amp=fp16 also the loss scale
// and how many steps were skipped for Inf/NaN gradients. The opening lines state the
// mixed-precision policy in use. The loss is summed on the device and
// read at progress updates only, so the host runs ahead of the device as it would on a GPU.
// Under --distributed (a process of tools/launch) each process trains on its
// DistributedSampler shard, --batch-size examples per process per step, and every process
// evaluates the whole test set; only rank 0 prints, writes files and the --json line.
// Exit code 0, or 2 after one message (bad flags, unreadable data, any error). Under
// --distributed a dead peer is an error naming the collective and this rank, within
// --dist-timeout.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <fstream>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "distributed/ddp.h"
#include "distributed/process_group.h"
#include "distributed/sampler.h"
#include "engine/autocast.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "nlohmann/json.hpp"
#include "nn/checkpoint.h"
#include "nn/data/loader.h"
#include "nn/grad_scaler.h"
#include "nn/optim.h"
#include "nn/parallel/data_parallel.h"
#include "runtime/runtime.h"
#include "runtime/trace.h"
#include "ops/ops.h"
#include "tools/cli_flags.h"
#include "tools/train_checkpoint.h"
#include "tools/train_models.h"
#include "tools/train_report.h"

ABSL_FLAG(std::string, model, "cnn", "mlp, cnn or twobranch");
ABSL_FLAG(std::string, device, "auto", "auto (cuda if usable, else sim:0), cpu, sim:N or cuda:N");
ABSL_FLAG(std::string, data_parallel, "",
          "comma-separated devices of one type (sim:0,sim:1): train with DataParallel over them "
          "(the model lives on the first; overrides --device)");
ABSL_FLAG(bool, distributed, false,
          "train with DistributedDataParallel (gloo) in a process started by tools/launch, "
          "which sets MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE and LOCAL_RANK");
ABSL_FLAG(double, dist_timeout, 60,
          "--distributed: seconds a collective or the rendezvous waits for a peer");
ABSL_FLAG(double, bucket_cap_mb, 25,
          "--distributed: MiB of gradients per all-reduce bucket (DDP's bucket_cap_mb)");
ABSL_FLAG(int64_t, epochs, 5, "passes over the training set");
ABSL_FLAG(int64_t, batch_size, 64, "examples per training batch");
ABSL_FLAG(double, lr, 0, "learning rate (0: 1e-3 for adam/adamw, 0.05 for sgd)");
ABSL_FLAG(std::string, optimizer, "adam", "sgd (momentum 0.9), adam or adamw");
ABSL_FLAG(std::string, schedule, "cosine",
          "learning-rate schedule over the epochs: cosine (to 0), step (halved every 2 epochs) "
          "or none");
ABSL_FLAG(uint64_t, seed, 0, "seed of initialisation, shuffling and dropout");
ABSL_FLAG(std::string, data, "/usr/share/datasets/fashion-mnist", "folder of the IDX files");
ABSL_FLAG(int64_t, limit, 0, "train on the first N examples only (0: all)");
ABSL_FLAG(int64_t, test_limit, 0, "evaluate on the first N test examples only (0: all)");
ABSL_FLAG(int64_t, streams, 2, "twobranch: run the branches on 1 or 2 streams");
ABSL_FLAG(int64_t, workers, 1, "data loader threads");
ABSL_FLAG(int64_t, prefetch, 2, "batches the data loader prepares ahead");
ABSL_FLAG(std::string, save, "",
          "write a checkpoint (safetensors: model, optimiser, epoch, random state) here after "
          "every epoch");
ABSL_FLAG(std::string, resume, "",
          "continue from this checkpoint (written by --save with the same --model): training "
          "goes on after its epoch, as the uninterrupted run would");
ABSL_FLAG(bool, eval_only, false, "only evaluate the model (from --resume, else freshly made)");
ABSL_FLAG(std::string, trace, "", "write a Chrome trace of this run's first 20 steps here");
ABSL_FLAG(std::string, metrics, "", "append one JSON line per epoch to this file");
ABSL_FLAG(std::string, plot, "", "write loss and accuracy curves to this SVG file");
ABSL_FLAG(bool, json, false, "end with one JSON line of the results");
ABSL_FLAG(std::string, amp, "off",
          "mixed precision: off, bf16 (autocast to bfloat16; cpu, sim, cuda) or fp16 (autocast "
          "to float16 with dynamic loss scaling; sim and cuda)");
ABSL_FLAG(double, amp_init_scale, 65536, "--amp=fp16: the loss scale to start from");

namespace streamgrad {
namespace {

// A Dataset view of the first `n` examples.
class Prefix : public nn::Dataset {
 public:
  Prefix(std::shared_ptr<const nn::Dataset> base, int64_t n) : base_(std::move(base)), n_(n) {}
  int64_t size() const override { return n_; }
  Shape example_shape() const override { return base_->example_shape(); }
  void get(int64_t i, float* d, int64_t* t) const override { base_->get(i, d, t); }

 private:
  std::shared_ptr<const nn::Dataset> base_;
  int64_t n_;
};

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

std::unique_ptr<nn::Optimizer> make_optimizer(const std::string& name, const std::vector<Tensor>& params,
                                              double lr) {
  if (name == "sgd") {
    return std::make_unique<nn::SGD>(params, nn::SGDOptions(lr > 0 ? lr : 0.05).momentum(0.9));
  }
  if (name == "adam") return std::make_unique<nn::Adam>(params, nn::AdamOptions(lr > 0 ? lr : 1e-3));
  if (name == "adamw") {
    return std::make_unique<nn::AdamW>(params, nn::AdamOptions(lr > 0 ? lr : 1e-3).weight_decay(0.01));
  }
  throw UsageError{absl::StrCat("unknown --optimizer=", name, "; expected sgd, adam or adamw")};
}

struct Evaluation {
  double loss = 0, accuracy = 0;
};

Evaluation evaluate(nn::Module& model, nn::DataLoader& loader, const AmpConfig& amp) {
  NoGradGuard no_grad;
  AutocastGuard autocast(amp.device_type, amp.dtype, amp.enabled);
  model.eval();
  loader.start_epoch(0);
  int64_t correct = 0, seen = 0;
  Tensor loss_sum;
  CrossEntropyOptions sum_loss;
  sum_loss.reduction = Reduction::kSum;
  for (nn::Batch b; loader.next(&b);) {
    const Tensor logits = model.forward(b.data);
    const Tensor l = cross_entropy(logits, b.target, sum_loss);
    loss_sum = loss_sum.defined() ? add(loss_sum, l) : l;
    const std::vector<int64_t> predicted = argmax(logits, 1).to_vector<int64_t>();
    const std::vector<int64_t> truth = b.target.to_vector<int64_t>();
    for (size_t i = 0; i < truth.size(); ++i) correct += predicted[i] == truth[i];
    seen += static_cast<int64_t>(truth.size());
  }
  model.train();
  return {loss_sum.item<float>() / seen, static_cast<double>(correct) / seen};
}

// The closing line of --json; examples_per_s counts every process's examples.
void print_result(double accuracy, int64_t epochs, double examples_per_s, Device device,
                  const std::string& model, int world_size, const std::string& amp) {
  nlohmann::ordered_json j;
  j["test_accuracy"] = accuracy;
  j["epochs"] = epochs;
  j["examples_per_s"] = examples_per_s;
  j["device"] = device.str();
  j["model"] = model;
  j["world_size"] = world_size;
  j["amp"] = amp;
  print_json_line(j);
}

// --distributed: the process group from tools/launch's variables, or null without it.
std::shared_ptr<distributed::ProcessGroup> process_group() {
  if (!absl::GetFlag(FLAGS_distributed)) return nullptr;
  if (!absl::GetFlag(FLAGS_data_parallel).empty()) {
    throw UsageError{"--distributed and --data-parallel exclude each other: DDP runs one "
                     "process per device"};
  }
  const auto timeout = std::chrono::milliseconds(
      static_cast<int64_t>(absl::GetFlag(FLAGS_dist_timeout) * 1000));
  return distributed::init_process_group_from_env("gloo", timeout);
}

// --data-parallel's devices (empty without it), each checked to exist.
std::vector<Device> data_parallel_devices() {
  std::vector<Device> out;
  for (absl::string_view name : absl::StrSplit(absl::GetFlag(FLAGS_data_parallel), ',',
                                               absl::SkipEmpty())) {
    try {
      out.push_back(resolve_device(Device(std::string(name)), "--data-parallel"));
    } catch (const Error& e) {
      throw UsageError{e.what()};
    }
  }
  if (!absl::GetFlag(FLAGS_data_parallel).empty() && out.size() < 2) {
    throw UsageError{absl::StrCat("--data-parallel=", absl::GetFlag(FLAGS_data_parallel),
                                  ": name at least two devices (sim:0,sim:1)")};
  }
  return out;
}

int train() {
  const std::vector<Device> parallel_devices = data_parallel_devices();
  const std::shared_ptr<distributed::ProcessGroup> group = process_group();
  const int rank = group != nullptr ? group->rank() : 0;
  const int world = group != nullptr ? group->size() : 1;
  Device device = parallel_devices.empty() ? pick_device(absl::GetFlag(FLAGS_device))
                                           : parallel_devices.front();
  if (group != nullptr && device.type() == DeviceType::kCuda) {
    const char* local = std::getenv("LOCAL_RANK");  // one GPU per process of a host
    device = pick_device(absl::StrCat("cuda:", local != nullptr ? local : "0"));
  }
  // Only rank 0 reports; the others write their progress nowhere.
  std::unique_ptr<FILE, int (*)(FILE*)> sink(rank == 0 ? nullptr : std::fopen("/dev/null", "w"),
                                             &std::fclose);
  FILE* out = sink != nullptr ? sink.get() : stderr;
  const std::string data_dir = user_path(absl::GetFlag(FLAGS_data));
  auto train_set = nn::load_fashion_mnist(data_dir, /*train=*/true);
  auto test_set = nn::load_fashion_mnist(data_dir, /*train=*/false);
  if (!train_set.ok()) throw UsageError{std::string(train_set.status().message())};
  if (!test_set.ok()) throw UsageError{std::string(test_set.status().message())};
  std::shared_ptr<const nn::Dataset> train_data = *train_set;
  std::shared_ptr<const nn::Dataset> test_data = *test_set;
  const int64_t limit = absl::GetFlag(FLAGS_limit), test_limit = absl::GetFlag(FLAGS_test_limit);
  if (limit > 0 && limit < train_data->size()) train_data = std::make_shared<Prefix>(train_data, limit);
  if (test_limit > 0 && test_limit < test_data->size()) {
    test_data = std::make_shared<Prefix>(test_data, test_limit);
  }

  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  manual_seed(seed);
  const std::string model_name = absl::GetFlag(FLAGS_model);
  const RunIdentity run{model_name, absl::GetFlag(FLAGS_optimizer), absl::GetFlag(FLAGS_schedule)};
  std::shared_ptr<nn::Module> model = make_model(model_name);
  model->to(device);
  AmpConfig amp = amp_config(absl::GetFlag(FLAGS_amp), device);  // exit 2 when refused
  std::unique_ptr<nn::GradScaler> scaler;
  if (amp.enabled && amp.dtype == DType::kFloat16) {
    scaler = std::make_unique<nn::GradScaler>(
        nn::GradScalerOptions().init_scale(absl::GetFlag(FLAGS_amp_init_scale)));
    amp.scaler = scaler.get();
  }
  if (auto* two = dynamic_cast<TwoBranch*>(model.get())) {
    two->use_streams(device, absl::GetFlag(FLAGS_streams) == 2);
  }
  // What forward runs: the model, or DataParallel over it. Checkpoints hold the model.
  std::shared_ptr<nn::Module> runner = model;
  if (!parallel_devices.empty()) {
    runner = std::make_shared<nn::parallel::DataParallel>(model, parallel_devices);
  }
  if (group != nullptr) {
    const auto options = distributed::DistributedDataParallelOptions().bucket_cap_mb(
        absl::GetFlag(FLAGS_bucket_cap_mb));
    runner = std::make_shared<distributed::DistributedDataParallel>(model, group, options);
  }
  std::unique_ptr<nn::Optimizer> opt =
      make_optimizer(absl::GetFlag(FLAGS_optimizer), model->parameters(), absl::GetFlag(FLAGS_lr));
  std::unique_ptr<nn::LRScheduler> schedule;
  const std::string schedule_name = absl::GetFlag(FLAGS_schedule);
  if (schedule_name == "cosine") {
    schedule = std::make_unique<nn::CosineAnnealingLR>(*opt, absl::GetFlag(FLAGS_epochs));
  } else if (schedule_name == "step") {
    schedule = std::make_unique<nn::StepLR>(*opt, 2, 0.5);
  } else if (schedule_name != "none") {
    throw UsageError{absl::StrCat("unknown --schedule=", schedule_name,
                                  "; expected cosine, step or none")};
  }
  int64_t done = 0;  // epochs completed before this run
  if (!absl::GetFlag(FLAGS_resume).empty()) {
    const bool eval_only = absl::GetFlag(FLAGS_eval_only);
    done = resume(user_path(absl::GetFlag(FLAGS_resume)), run, *model,
                  eval_only ? nullptr : opt.get(), scaler.get());
    // The schedule continues where it was: lr as after `done` epochs.
    for (int64_t e = 0; schedule != nullptr && e < done; ++e) schedule->step();
  }
  const nn::DataLoaderOptions common = nn::DataLoaderOptions()
                                           .device(device)
                                           .seed(seed)
                                           .workers(static_cast<int>(absl::GetFlag(FLAGS_workers)))
                                           .prefetch(static_cast<int>(absl::GetFlag(FLAGS_prefetch)));
  nn::DataLoaderOptions train_options =
      nn::DataLoaderOptions(common).batch_size(absl::GetFlag(FLAGS_batch_size));
  if (group != nullptr) {
    train_options.sampler(std::make_shared<distributed::DistributedSampler>(
        train_data->size(), world, rank, distributed::DistributedSamplerOptions().seed(seed)));
  }
  nn::DataLoader train_loader(train_data, train_options);
  nn::DataLoader test_loader(test_data, nn::DataLoaderOptions(common).batch_size(1000).shuffle(false));

  const int64_t epochs = absl::GetFlag(FLAGS_epochs);
  if (absl::GetFlag(FLAGS_eval_only)) {
    const Evaluation ev = evaluate(*runner, test_loader, amp);
    if (rank != 0) return 0;
    std::fprintf(out, "train: %s on %s after %lld epochs: test loss %.4f, test accuracy %.2f%%\n",
                 model_name.c_str(), device.str().c_str(), static_cast<long long>(done), ev.loss,
                 100 * ev.accuracy);
    if (absl::GetFlag(FLAGS_json)) print_result(ev.accuracy, done, 0, device, model_name, world, absl::GetFlag(FLAGS_amp));
    return 0;
  }
  const bool terminal = isatty(STDERR_FILENO) == 1 && group == nullptr;
  std::string where = device.str();
  if (!parallel_devices.empty()) {
    where = absl::StrCat(absl::StrJoin(parallel_devices, "+", [](std::string* out, const Device& d) {
                           out->append(d.str());
                         }),
                         " (DataParallel)");
  }
  if (group != nullptr) where = absl::StrCat(device.str(), " x ", world, " processes (DDP, gloo)");
  std::fprintf(out, "train: %s on %s, %lld training examples, %lld epochs, %s\n",
               model_name.c_str(), where.c_str(), static_cast<long long>(train_data->size()),
               static_cast<long long>(epochs), absl::GetFlag(FLAGS_optimizer).c_str());
  std::fprintf(out, "train: %s\n", amp_policy(amp).c_str());
  std::unique_ptr<TraceRecorder> trace;
  if (!absl::GetFlag(FLAGS_trace).empty() && rank == 0) trace = std::make_unique<TraceRecorder>();
  std::ofstream metrics;
  if (!absl::GetFlag(FLAGS_metrics).empty() && rank == 0) {
    metrics.open(user_path(absl::GetFlag(FLAGS_metrics)), std::ios::app);
    if (!metrics) throw UsageError{absl::StrCat("cannot write --metrics=", absl::GetFlag(FLAGS_metrics))};
  }

  std::vector<EpochRecord> records;
  std::vector<double> step_losses;  // the mean loss of each progress interval
  double train_seconds = 0;
  int64_t train_examples = 0;
  constexpr int64_t kReadEvery = 50;  // steps between host reads of the running loss
  for (int64_t epoch = done + 1; epoch <= epochs; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    reset_peak_stats(device);
    train_loader.start_epoch(epoch);
    Progress bar(out, terminal, train_loader.batches_per_epoch(), static_cast<int>(epoch),
                 static_cast<int>(epochs), /*plain_every=*/200);
    Tensor interval_sum;
    double epoch_loss = 0, running = 0;
    int64_t step = 0, examples = 0, interval = 0, skipped = 0;
    for (nn::Batch b; train_loader.next(&b);) {
      const double scale_before = scaler != nullptr ? scaler->get_scale() : 0;
      const Tensor l = train_step(*runner, *opt, b, amp);
      // The scale backs off exactly when the step found Inf/NaN gradients and was skipped.
      if (scaler != nullptr && scaler->get_scale() < scale_before) ++skipped;
      interval_sum = interval_sum.defined() ? add(interval_sum, l) : l;
      ++step;
      ++interval;
      examples += b.target.size(0);
      if (trace != nullptr && epoch == done + 1 && step == 20) trace->stop();
      if (interval == kReadEvery || step == train_loader.batches_per_epoch()) {
        running = interval_sum.item<float>() / interval;  // one host read per interval
        step_losses.push_back(running);
        epoch_loss += running * interval;
        interval_sum = Tensor();
        interval = 0;
      }
      bar.update(step, examples, running);
    }
    bar.finish();
    if (schedule != nullptr) schedule->step();
    if (parallel_devices.empty()) synchronize(device);
    for (const Device& d : parallel_devices) synchronize(d);
    const double train_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    train_seconds += train_s;
    train_examples += examples;
    // The training steps' peak, before evaluation's larger batches allocate theirs.
    const int64_t train_peak = memory_stats(device).allocated_bytes.peak;
    const Evaluation ev = evaluate(*runner, test_loader, amp);
    EpochRecord r;
    r.epoch = static_cast<int>(epoch);
    r.train_loss = epoch_loss / std::max<int64_t>(step, 1);
    r.test_loss = ev.loss;
    r.test_accuracy = ev.accuracy;
    r.examples_per_s = static_cast<double>(examples) * world / train_s;  // all processes
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.peak_memory_bytes = train_peak;
    records.push_back(r);
    std::fprintf(out,
                 "epoch %lld: train loss %.4f, test loss %.4f, test accuracy %.2f%%, %.0f "
                 "examples/s, peak training memory %s, %.1f s\n",
                 static_cast<long long>(epoch), r.train_loss, r.test_loss, 100 * r.test_accuracy,
                 r.examples_per_s, format_bytes(r.peak_memory_bytes).c_str(), r.seconds);
    if (scaler != nullptr) {
      std::fprintf(out, "epoch %lld: loss scale %g, %lld of %lld steps skipped (Inf/NaN gradients)\n",
                   static_cast<long long>(epoch), scaler->get_scale(),
                   static_cast<long long>(skipped), static_cast<long long>(step));
    }
    if (metrics.is_open()) metrics << epoch_json(r) << "\n" << std::flush;
    if (!absl::GetFlag(FLAGS_save).empty() && rank == 0) {
      save(user_path(absl::GetFlag(FLAGS_save)), run, epoch, *model, opt.get(), scaler.get());
    }
  }
  if (trace != nullptr) trace->save(user_path(absl::GetFlag(FLAGS_trace)));
  if (!absl::GetFlag(FLAGS_plot).empty() && rank == 0) {
    const absl::Status s = write_plot_svg(user_path(absl::GetFlag(FLAGS_plot)), records, step_losses);
    if (!s.ok()) throw UsageError{std::string(s.message())};
  }
  if (absl::GetFlag(FLAGS_json) && rank == 0) {
    // A resumed run that had nothing left to train reports the checkpoint's accuracy.
    const double accuracy =
        records.empty() ? evaluate(*runner, test_loader, amp).accuracy : records.back().test_accuracy;
    print_result(accuracy, std::max(epochs, done),
                 train_seconds > 0 ? static_cast<double>(train_examples) * world / train_seconds
                                   : 0.0,
                 device, model_name, world, absl::GetFlag(FLAGS_amp));
  }
  return 0;
}

}  // namespace
}  // namespace streamgrad

int main(int argc, char** argv) {
  const streamgrad::ToolSpec spec{
      "train",
      "Trains a model on Fashion-MNIST and reports loss and accuracy per epoch.\n"
      "Usage: train [--model=mlp|cnn|twobranch] [--device=auto|cpu|sim:N|cuda:N] "
      "[--data-parallel=sim:0,sim:1] [--distributed (under tools/launch)] [--amp=off|bf16|fp16] "
      "[--epochs=N]",
      __FILE__,
      {{"epochs", 1, 1000},
       {"batch_size", 1, 65536},
       {"lr", 0, 10},
       {"seed", 0, 1e18},
       {"limit", 0, 1e9},
       {"test_limit", 0, 1e9},
       {"streams", 1, 2},
       {"workers", 1, 64},
       {"prefetch", 1, 1024},
       {"dist_timeout", 0.1, 86400},
       {"bucket_cap_mb", 1e-6, 1e6},
       {"amp_init_scale", 1e-30, 3e38}},
      {}};
  return streamgrad::run_tool(spec, argc, argv, [] { return streamgrad::train(); });
}
