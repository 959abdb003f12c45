// tools/train: trains a model on Fashion-MNIST (the README's main job).
//
//   train                                   cnn, 5 epochs, Adam, on sim:0 (or cuda)
//   train --model=mlp --device=cpu --json   ends with {"test_accuracy":...,"epochs":...}
//   train --model=twobranch --streams=2 --metrics=m.jsonl --plot=curves.svg
//
// Per epoch: a progress line (a redrawn bar on a terminal), then train loss, test loss,
// test accuracy, examples/s and peak device memory. The loss is summed on the device and
// read at progress updates only, so the host runs ahead of the device as it would on a GPU.
// Exit code 0, 2 for bad flags or unreadable data, 1 for other errors.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "nlohmann/json.hpp"
#include "nn/data/loader.h"
#include "nn/optim.h"
#include "runtime/runtime.h"
#include "runtime/trace.h"
#include "ops/ops.h"
#include "tools/cli_flags.h"
#include "tools/train_models.h"
#include "tools/train_report.h"

ABSL_FLAG(std::string, model, "cnn", "mlp, cnn or twobranch");
ABSL_FLAG(std::string, device, "auto", "auto (cuda if usable, else sim:0), cpu, sim:N or cuda:N");
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
ABSL_FLAG(int64_t, streams, 2, "twobranch: run the branches on 1 or 2 streams");
ABSL_FLAG(int64_t, workers, 1, "data loader threads");
ABSL_FLAG(int64_t, prefetch, 2, "batches the data loader prepares ahead");
ABSL_FLAG(std::string, trace, "", "write a Chrome trace of the first epoch's first 20 steps here");
ABSL_FLAG(std::string, metrics, "", "append one JSON line per epoch to this file");
ABSL_FLAG(std::string, plot, "", "write loss and accuracy curves to this SVG file");
ABSL_FLAG(bool, json, false, "end with one JSON line of the results");

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

Device pick_device(const std::string& flag) {
  if (flag != "auto") return resolve_device(Device(flag), "train");
  if (device_count(DeviceType::kCuda) > 0) {
    // TODO(issue 12): cuda kernels. Until they land, a GPU cannot run the ops.
    std::cerr << "train: a cuda device is present, but streamgrad has no cuda kernels yet "
                 "(issue 12); training on sim:0\n";
  }
  return Device("sim:0");
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
  throw UsageError{absl::StrCat("train: unknown --optimizer=", name, "; expected sgd, adam or adamw")};
}

struct Evaluation {
  double loss = 0, accuracy = 0;
};

Evaluation evaluate(nn::Module& model, nn::DataLoader& loader) {
  NoGradGuard no_grad;
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

int train() {
  const Device device = pick_device(absl::GetFlag(FLAGS_device));
  const std::string data_dir = user_path(absl::GetFlag(FLAGS_data));
  auto train_set = nn::load_fashion_mnist(data_dir, /*train=*/true);
  auto test_set = nn::load_fashion_mnist(data_dir, /*train=*/false);
  if (!train_set.ok()) throw UsageError{absl::StrCat("train: ", train_set.status().message())};
  if (!test_set.ok()) throw UsageError{absl::StrCat("train: ", test_set.status().message())};
  std::shared_ptr<const nn::Dataset> train_data = *train_set;
  const int64_t limit = absl::GetFlag(FLAGS_limit);
  if (limit > 0 && limit < train_data->size()) train_data = std::make_shared<Prefix>(train_data, limit);

  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  manual_seed(seed);
  const std::string model_name = absl::GetFlag(FLAGS_model);
  std::shared_ptr<nn::Module> model = make_model(model_name);
  model->to(device);
  if (auto* two = dynamic_cast<TwoBranch*>(model.get())) {
    two->use_streams(device, absl::GetFlag(FLAGS_streams) == 2);
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
    throw UsageError{absl::StrCat("train: unknown --schedule=", schedule_name,
                                  "; expected cosine, step or none")};
  }
  const nn::DataLoaderOptions common = nn::DataLoaderOptions()
                                           .device(device)
                                           .seed(seed)
                                           .workers(static_cast<int>(absl::GetFlag(FLAGS_workers)))
                                           .prefetch(static_cast<int>(absl::GetFlag(FLAGS_prefetch)));
  nn::DataLoader train_loader(train_data,
                              nn::DataLoaderOptions(common).batch_size(absl::GetFlag(FLAGS_batch_size)));
  nn::DataLoader test_loader(*test_set, nn::DataLoaderOptions(common).batch_size(1000).shuffle(false));

  const bool terminal = isatty(STDERR_FILENO) == 1;
  const int64_t epochs = absl::GetFlag(FLAGS_epochs);
  std::fprintf(stderr, "train: %s on %s, %lld training examples, %lld epochs, %s\n",
               model_name.c_str(), device.str().c_str(), static_cast<long long>(train_data->size()),
               static_cast<long long>(epochs), absl::GetFlag(FLAGS_optimizer).c_str());
  std::unique_ptr<TraceRecorder> trace;
  if (!absl::GetFlag(FLAGS_trace).empty()) trace = std::make_unique<TraceRecorder>();
  std::ofstream metrics;
  if (!absl::GetFlag(FLAGS_metrics).empty()) {
    metrics.open(user_path(absl::GetFlag(FLAGS_metrics)), std::ios::app);
    if (!metrics) throw UsageError{absl::StrCat("train: cannot write --metrics=", absl::GetFlag(FLAGS_metrics))};
  }

  std::vector<EpochRecord> records;
  std::vector<double> step_losses;  // the mean loss of each progress interval
  double train_seconds = 0;
  int64_t train_examples = 0;
  constexpr int64_t kReadEvery = 50;  // steps between host reads of the running loss
  for (int64_t epoch = 1; epoch <= epochs; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    reset_peak_stats(device);
    train_loader.start_epoch(epoch);
    Progress bar(stderr, terminal, train_loader.batches_per_epoch(), static_cast<int>(epoch),
                 static_cast<int>(epochs), /*plain_every=*/200);
    Tensor interval_sum, epoch_sum;
    double epoch_loss = 0, running = 0;
    int64_t step = 0, examples = 0, interval = 0;
    for (nn::Batch b; train_loader.next(&b);) {
      const Tensor l = train_step(*model, *opt, b);
      interval_sum = interval_sum.defined() ? add(interval_sum, l) : l;
      ++step;
      ++interval;
      examples += b.target.size(0);
      if (trace != nullptr && epoch == 1 && step == 20) trace->stop();
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
    synchronize(device);
    const double train_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    train_seconds += train_s;
    train_examples += examples;
    const Evaluation ev = evaluate(*model, test_loader);
    EpochRecord r;
    r.epoch = static_cast<int>(epoch);
    r.train_loss = epoch_loss / std::max<int64_t>(step, 1);
    r.test_loss = ev.loss;
    r.test_accuracy = ev.accuracy;
    r.examples_per_s = examples / train_s;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.peak_memory_bytes = memory_stats(device).allocated_bytes.peak;
    records.push_back(r);
    std::fprintf(stderr,
                 "epoch %lld: train loss %.4f, test loss %.4f, test accuracy %.2f%%, %.0f "
                 "examples/s, peak memory %s, %.1f s\n",
                 static_cast<long long>(epoch), r.train_loss, r.test_loss, 100 * r.test_accuracy,
                 r.examples_per_s, format_bytes(r.peak_memory_bytes).c_str(), r.seconds);
    if (metrics.is_open()) metrics << epoch_json(r) << "\n" << std::flush;
  }
  if (trace != nullptr) trace->save(user_path(absl::GetFlag(FLAGS_trace)));
  if (!absl::GetFlag(FLAGS_plot).empty()) {
    const absl::Status s = write_plot_svg(user_path(absl::GetFlag(FLAGS_plot)), records, step_losses);
    if (!s.ok()) throw UsageError{std::string(s.message())};
  }
  if (absl::GetFlag(FLAGS_json)) {
    nlohmann::ordered_json j;
    j["test_accuracy"] = records.empty() ? 0.0 : records.back().test_accuracy;
    j["epochs"] = epochs;
    j["examples_per_s"] = train_seconds > 0 ? train_examples / train_seconds : 0.0;
    j["device"] = device.str();
    j["model"] = model_name;
    std::cout << j.dump() << std::endl;
  }
  return 0;
}

}  // namespace
}  // namespace streamgrad

int main(int argc, char** argv) {
  const streamgrad::ToolSpec spec{
      "train",
      "Trains a model on Fashion-MNIST and reports loss and accuracy per epoch.\n"
      "Usage: train [--model=mlp|cnn|twobranch] [--device=auto|cpu|sim:N|cuda:N] [--epochs=N]",
      __FILE__,
      {{"epochs", 1, 1000},
       {"batch_size", 1, 65536},
       {"lr", 0, 10},
       {"seed", 0, 1e18},
       {"limit", 0, 1e9},
       {"streams", 1, 2},
       {"workers", 1, 64},
       {"prefetch", 1, 1024}},
      {}};
  return streamgrad::run_tool(spec, argc, argv, [] { return streamgrad::train(); });
}
