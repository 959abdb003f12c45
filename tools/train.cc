// tools/train: trains a model on Fashion-MNIST (the README's main job), or a character-level
// language model on text.
//
//   train                                   cnn, 5 epochs, Adam, on sim:0 (or cuda)
//   train --model=resnet --device=cpu       a small ResNet (tools/train_models_gpt.h)
//   train --model=gpt --device=cpu          a GPT on Debian's fortunes: validation loss and
//                                           bits per character per epoch, then a sample
//   train --model=mlp --device=cpu --json   ends with {"test_accuracy":...,"epochs":...}
//   train --model=twobranch --streams=2 --metrics=m.jsonl --plot=curves.svg
//   launch --nproc=2 -- train --distributed --device=cpu   DistributedDataParallel over gloo
//   train --amp=bf16 --device=cpu            mixed precision (autocast; fp16 adds loss scaling)
//   train --model=gpt --device=sim:0 --offload   saved activations wait in pinned host memory
//   train --model=gpt --checkpoint           blocks recomputed in backward instead of kept
//                                            (resnet's blocks, the mlp's and cnn's segments)
//   train --memory-snapshot=m.json           every allocation of the first epoch's steps,
//                                            for tools/memviz
//
// A run is setup (tools/train_setup.h: devices, data, model, optimiser from the flags),
// then one epoch after another, then the closing report. Per epoch: a progress line (a
// redrawn bar on a terminal), then train loss, test loss, test accuracy, examples/s and
// peak device memory of the training steps; with --amp=fp16 also the loss scale and how
// many steps the scaler skipped for Inf/NaN gradients. The opening lines state the
// mixed-precision policy in use. The loss is summed on the device and read at progress
// updates only, so the host runs ahead of the device as it would on a GPU.
// Under --distributed (a process of tools/launch) each process trains on its
// DistributedSampler shard, --batch-size examples per process per step, and every process
// evaluates the whole test set; only rank 0 prints, writes files and the --json line.
// Exit code 0, or 2 after one message (bad flags, unreadable data, any error). Under
// --distributed a dead peer is an error naming the collective and this rank, within
// --dist-timeout.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "nn/offload.h"
#include "nn/train_step.h"
#include "ops/ops.h"
#include "runtime/memory/memory_history.h"
#include "runtime/observe/trace.h"
#include "runtime/runtime.h"
#include "tools/cli_flags.h"
#include "tools/train_checkpoint.h"
#include "tools/train_generate.h"
#include "tools/train_report.h"
#include "tools/train_setup.h"

ABSL_FLAG(std::string, model, "cnn",
          "mlp, cnn, twobranch or resnet (Fashion-MNIST), or gpt (a character-level "
          "transformer on text)");
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
ABSL_FLAG(int64_t, epochs, 0, "passes over the training set (0: 5; gpt: 4)");
ABSL_FLAG(int64_t, batch_size, 0, "examples per training batch (0: 64; gpt: 32 windows)");
ABSL_FLAG(double, lr, 0,
          "learning rate (0: 1e-3 for adam/adamw, 3e-3 for them with resnet, 0.05 for sgd)");
ABSL_FLAG(std::string, optimizer, "adam",
          "sgd (momentum 0.9), adam or adamw (weight decay 0.01 on weights of dim >= 2, none "
          "on biases and norm weights: two parameter groups)");
ABSL_FLAG(std::string, schedule, "cosine",
          "learning-rate schedule: cosine (to 0 over the epochs), step (halved every 2 epochs), "
          "warmup (linear warm-up over the first epoch's batches, then cosine per batch), "
          "onecycle (per batch), plateau (halved after an epoch without a better validation "
          "loss) or none; checkpoints store its state");
ABSL_FLAG(uint64_t, seed, 0, "seed of initialisation, shuffling and dropout");
ABSL_FLAG(std::string, data, "",
          "folder of the IDX files (default /usr/share/datasets/fashion-mnist); gpt: a text "
          "file or folder of text files (default /usr/share/games/fortunes)");
ABSL_FLAG(int64_t, layers, 4, "gpt: transformer blocks");
ABSL_FLAG(int64_t, dim, 128, "gpt: embedding width (a multiple of --heads)");
ABSL_FLAG(int64_t, heads, 4, "gpt: attention heads");
ABSL_FLAG(int64_t, context, 64, "gpt: tokens (characters) per window");
ABSL_FLAG(double, dropout, 0.0, "gpt: dropout in the blocks");
ABSL_FLAG(int64_t, sample_chars, 300, "gpt: characters generated at the end (0: none)");
ABSL_FLAG(double, temperature, 0.8, "gpt: sampling temperature");
ABSL_FLAG(int64_t, top_k, 40, "gpt: sample among the k likeliest characters (0: all)");
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
ABSL_FLAG(bool, offload, false,
          "copy the activations forward saves for backward to pinned host memory on a copy "
          "stream, and back ahead of the nodes that need them (sim, cuda; nn/offload.h)");
ABSL_FLAG(bool, checkpoint, false,
          "keep less of what forward saves and recompute the rest in backward, on the "
          "streams it ran on (nn/recompute.h): gpt's transformer blocks and resnet's basic "
          "blocks one by one, the mlp and cnn in segments (mlp, cnn, resnet, gpt)");
ABSL_FLAG(std::string, memory_snapshot, "",
          "record every allocation from start-up to the end of the first epoch's training "
          "steps (category, op, stream, size) and write the record here as JSON "
          "(runtime/memory/memory_history.h); tools/memviz draws it");
ABSL_FLAG(int64_t, offload_prefetch, 2,
          "--offload: saved tensors brought back ahead of the one a node asks for");

namespace streamgrad {
namespace {

TrainOptions options_from_flags() {
  TrainOptions o;
  o.model = absl::GetFlag(FLAGS_model);
  o.device = absl::GetFlag(FLAGS_device);
  o.data_parallel = absl::GetFlag(FLAGS_data_parallel);
  o.distributed = absl::GetFlag(FLAGS_distributed);
  o.dist_timeout = absl::GetFlag(FLAGS_dist_timeout);
  o.bucket_cap_mb = absl::GetFlag(FLAGS_bucket_cap_mb);
  const bool gpt = o.model == "gpt";
  o.epochs = absl::GetFlag(FLAGS_epochs);
  if (o.epochs == 0) o.epochs = gpt ? 4 : 5;
  o.batch_size = absl::GetFlag(FLAGS_batch_size);
  if (o.batch_size == 0) o.batch_size = gpt ? 32 : 64;
  o.lr = absl::GetFlag(FLAGS_lr);
  o.optimizer = absl::GetFlag(FLAGS_optimizer);
  // The ResNet takes a larger step: with one block per stage 92.5 % after 5 epochs at 3e-3
  // where 1e-3 gave 90.9 % (bench/RESULTS.md).
  if (o.lr == 0 && o.model == "resnet" && o.optimizer != "sgd") o.lr = 3e-3;
  o.schedule = absl::GetFlag(FLAGS_schedule);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.data = absl::GetFlag(FLAGS_data);
  o.limit = absl::GetFlag(FLAGS_limit);
  o.test_limit = absl::GetFlag(FLAGS_test_limit);
  o.streams = absl::GetFlag(FLAGS_streams);
  o.workers = absl::GetFlag(FLAGS_workers);
  o.prefetch = absl::GetFlag(FLAGS_prefetch);
  o.save = absl::GetFlag(FLAGS_save);
  o.resume = absl::GetFlag(FLAGS_resume);
  o.eval_only = absl::GetFlag(FLAGS_eval_only);
  o.trace = absl::GetFlag(FLAGS_trace);
  o.metrics = absl::GetFlag(FLAGS_metrics);
  o.plot = absl::GetFlag(FLAGS_plot);
  o.json = absl::GetFlag(FLAGS_json);
  o.amp = absl::GetFlag(FLAGS_amp);
  o.offload = absl::GetFlag(FLAGS_offload);
  o.checkpoint = absl::GetFlag(FLAGS_checkpoint);
  o.offload_prefetch = absl::GetFlag(FLAGS_offload_prefetch);
  o.memory_snapshot = absl::GetFlag(FLAGS_memory_snapshot);
  o.amp_init_scale = absl::GetFlag(FLAGS_amp_init_scale);
  o.gpt.layers = absl::GetFlag(FLAGS_layers);
  o.gpt.dim = absl::GetFlag(FLAGS_dim);
  o.gpt.heads = absl::GetFlag(FLAGS_heads);
  o.gpt.context = absl::GetFlag(FLAGS_context);
  o.gpt.dropout = absl::GetFlag(FLAGS_dropout);
  o.sample_chars = absl::GetFlag(FLAGS_sample_chars);
  o.temperature = absl::GetFlag(FLAGS_temperature);
  o.top_k = absl::GetFlag(FLAGS_top_k);
  return o;
}

// What a run reports beyond its text lines (rank 0 only): the trace of the first steps,
// per-epoch JSON lines, and the records the plot and the closing line are made from.
struct Reports {
  std::unique_ptr<TraceRecorder> trace;
  std::ofstream metrics;
  std::vector<EpochRecord> records;
  std::vector<double> step_losses;  // the mean loss of each progress interval
  double train_seconds = 0;
  int64_t train_examples = 0;
};

// One epoch: its training steps, then the evaluation on the test set.
struct EpochOutcome {
  EpochRecord record;
  int64_t steps = 0, skipped = 0;
};

EpochOutcome run_epoch(TrainRun& run, int64_t epoch, int64_t epochs, bool terminal,
                       Reports& reports) {
  constexpr int64_t kReadEvery = 50;  // steps between host reads of the running loss
  const auto start = std::chrono::steady_clock::now();
  reset_peak_stats(run.device);
  reset_peak_host_memory_stats();
  nn::DataLoader& loader = *run.train_loader;
  loader.start_epoch(epoch);
  Progress bar(run.out, terminal, loader.batches_per_epoch(), static_cast<int>(epoch),
               static_cast<int>(epochs), /*plain_every=*/200);
  EpochOutcome e;
  Tensor interval_sum;
  double epoch_loss = 0, running = 0;
  int64_t examples = 0, interval = 0;
  for (nn::Batch b; loader.next(&b);) {
    std::optional<nn::OffloadGuard> offload;  // one per step: its graph's saved tensors
    if (run.offload) offload.emplace(*run.offload);
    const nn::StepResult step = nn::train_step(*run.runner, *run.optimizer, b, run.amp);
    offload.reset();
    if (run.schedule != nullptr) run.schedule->after_batch();
    e.skipped += step.skipped ? 1 : 0;
    interval_sum = interval_sum.defined() ? add(interval_sum, step.loss) : step.loss;
    ++e.steps;
    ++interval;
    examples += b.target.size(0);
    if (reports.trace != nullptr && epoch == run.done + 1 && e.steps == 20) reports.trace->stop();
    if (interval == kReadEvery || e.steps == loader.batches_per_epoch()) {
      running = interval_sum.item<float>() / interval;  // one host read per interval
      reports.step_losses.push_back(running);
      epoch_loss += running * interval;
      interval_sum = Tensor();
      interval = 0;
    }
    bar.update(e.steps, examples, running);
  }
  bar.finish();
  if (run.parallel_devices.empty()) synchronize(run.device);
  for (const Device& d : run.parallel_devices) synchronize(d);
  const double train_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  reports.train_seconds += train_s;
  reports.train_examples += examples;
  // The training steps' peak, before evaluation's larger batches allocate theirs.
  const MemoryStats train_memory = memory_stats(run.device);
  if (memory_history_enabled()) {
    record_memory_history(false);
    if (!run.memory_snapshot.empty()) dump_memory_snapshot(run.memory_snapshot);
  }
  const Evaluation ev = evaluate(run);
  if (run.schedule != nullptr) run.schedule->after_epoch(ev.loss);
  EpochRecord& r = e.record;
  r.epoch = static_cast<int>(epoch);
  r.train_loss = epoch_loss / std::max<int64_t>(e.steps, 1);
  r.test_loss = ev.loss;
  r.test_accuracy = ev.accuracy;
  r.examples_per_s = static_cast<double>(examples) * run.world / train_s;  // all processes
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.peak_memory_bytes = train_memory.allocated_bytes.peak;
  r.peak_reserved_bytes = train_memory.reserved_bytes.peak;
  r.peak_pinned_bytes = host_memory_stats().reserved_bytes.peak;
  r.lr = run.optimizer->lr();
  return e;
}

// "reserved R" and, where pinned host memory was used, ", pinned host P".
std::string reserved_text(const EpochRecord& r) {
  std::string s = "reserved " + format_bytes(r.peak_reserved_bytes);
  if (r.peak_pinned_bytes > 0) s += ", pinned host " + format_bytes(r.peak_pinned_bytes);
  return s;
}

void report_epoch(const TrainRun& run, const EpochOutcome& e) {
  const EpochRecord& r = e.record;
  if (run.vocab != nullptr) {  // gpt: per character, and tokens rather than examples
    const double tokens_per_s = r.examples_per_s * static_cast<double>(
                                                       run.train_data->example_shape()[0]);
    std::fprintf(run.out,
                 "epoch %d: train loss %.4f, validation loss %.4f nats/char (%.3f bits/char), "
                 "next-char accuracy %.2f%%, %.0f tokens/s, peak training memory %s, "
                 "%s, %.1f s\n",
                 r.epoch, r.train_loss, r.test_loss, r.test_loss / std::log(2.0),
                 100 * r.test_accuracy, tokens_per_s, format_bytes(r.peak_memory_bytes).c_str(),
                 reserved_text(r).c_str(), r.seconds);
    return;
  }
  std::fprintf(run.out,
               "epoch %d: train loss %.4f, test loss %.4f, test accuracy %.2f%%, %.0f "
               "examples/s, peak training memory %s, %s, %.1f s\n",
               r.epoch, r.train_loss, r.test_loss, 100 * r.test_accuracy, r.examples_per_s,
               format_bytes(r.peak_memory_bytes).c_str(), reserved_text(r).c_str(), r.seconds);
  if (run.scaler != nullptr) {
    std::fprintf(run.out,
                 "epoch %d: loss scale %g, %lld of %lld steps skipped (Inf/NaN gradients)\n",
                 r.epoch, run.scaler->get_scale(), static_cast<long long>(e.skipped),
                 static_cast<long long>(e.steps));
  }
}

// The closing line of --json; examples_per_s counts every process's examples.
// test_loss is the mean cross-entropy per example (per character for gpt).
void print_result(const TrainOptions& o, const TrainRun& run, const Evaluation& ev,
                  int64_t epochs, double examples_per_s) {
  nlohmann::ordered_json j;
  j["test_accuracy"] = ev.accuracy;
  j["test_loss"] = ev.loss;
  j["epochs"] = epochs;
  j["examples_per_s"] = examples_per_s;
  j["device"] = run.device.str();
  j["model"] = o.model;
  j["world_size"] = run.world;
  j["amp"] = o.amp;
  print_json_line(j);
}

int eval_only(const TrainOptions& o, TrainRun& run) {
  const Evaluation ev = evaluate(run);
  if (run.rank != 0) return 0;
  std::fprintf(run.out,
               "train: %s on %s after %lld epochs: test loss %.4f, test accuracy %.2f%%\n",
               o.model.c_str(), run.device.str().c_str(), static_cast<long long>(run.done),
               ev.loss, 100 * ev.accuracy);
  if (o.json) print_result(o, run, ev, run.done, 0);
  return 0;
}

int train(const TrainOptions& o) {
  // Before setup, so that the parameters' allocations are in the record; by rank 0 only
  // (tools/launch sets RANK).
  const char* rank = std::getenv("RANK");
  const bool record = !o.memory_snapshot.empty() && !o.eval_only &&
                      (rank == nullptr || std::string(rank) == "0");
  if (record) {
    // A path that cannot be written fails now, not after the epoch.
    if (!std::ofstream(user_path(o.memory_snapshot))) {
      throw UsageError{absl::StrCat("cannot write --memory-snapshot=", o.memory_snapshot)};
    }
    record_memory_history(true);
  }
  TrainRun run = setup(o);
  if (record) run.memory_snapshot = user_path(o.memory_snapshot);
  if (o.eval_only) return eval_only(o, run);
  std::fprintf(run.out, "train: %s on %s, %lld training examples, %lld epochs, %s\n",
               o.model.c_str(), run.where.c_str(),
               static_cast<long long>(run.train_data->size()), static_cast<long long>(o.epochs),
               o.optimizer.c_str());
  std::fprintf(run.out, "train: %s\n", nn::amp_policy(run.amp).c_str());
  Reports reports;
  const bool rank0 = run.rank == 0;
  if (!o.trace.empty() && rank0) reports.trace = std::make_unique<TraceRecorder>();
  if (!o.metrics.empty() && rank0) {
    reports.metrics.open(user_path(o.metrics), std::ios::app);
    if (!reports.metrics) throw UsageError{absl::StrCat("cannot write --metrics=", o.metrics)};
  }
  const bool terminal = isatty(STDERR_FILENO) == 1 && run.group == nullptr;
  for (int64_t epoch = run.done + 1; epoch <= o.epochs; ++epoch) {
    const EpochOutcome e = run_epoch(run, epoch, o.epochs, terminal, reports);
    reports.records.push_back(e.record);
    report_epoch(run, e);
    if (reports.metrics.is_open()) reports.metrics << epoch_json(e.record) << "\n" << std::flush;
    if (!o.save.empty() && rank0) {
      save(user_path(o.save), run.identity, epoch, *run.model, run.optimizer.get(),
           run.scaler.get(), run.schedule.get());
    }
  }
  if (reports.trace != nullptr) reports.trace->save(user_path(o.trace));
  if (run.vocab != nullptr && o.sample_chars > 0 && rank0) {
    const SampleOptions so{o.sample_chars, o.top_k, o.temperature, o.seed};
    std::fprintf(run.out, "sample (temperature %g, top-k %lld):\n%s\n", o.temperature,
                 static_cast<long long>(o.top_k),
                 generate(static_cast<Gpt&>(*run.model), *run.vocab, "", so, run.device).c_str());
  }
  if (!o.plot.empty() && rank0) {
    const absl::Status s = write_plot_svg(user_path(o.plot), reports.records, reports.step_losses);
    if (!s.ok()) throw UsageError{std::string(s.message())};
  }
  if (o.json && rank0) {
    // A resumed run that had nothing left to train reports the checkpoint's accuracy.
    const Evaluation ev =
        reports.records.empty()
            ? evaluate(run)
            : Evaluation{reports.records.back().test_loss, reports.records.back().test_accuracy};
    const double per_s =
        reports.train_seconds > 0
            ? static_cast<double>(reports.train_examples) * run.world / reports.train_seconds
            : 0.0;
    print_result(o, run, ev, std::max(o.epochs, run.done), per_s);
  }
  return 0;
}

}  // namespace
}  // namespace streamgrad

int main(int argc, char** argv) {
  const streamgrad::ToolSpec spec{
      "train",
      "Trains a model on Fashion-MNIST (or, --model=gpt, on text) and reports loss and "
      "accuracy per epoch.\n"
      "Usage: train [--model=mlp|cnn|twobranch|resnet|gpt] [--device=auto|cpu|sim:N|cuda:N] "
      "[--data-parallel=sim:0,sim:1] [--distributed (under tools/launch)] [--amp=off|bf16|fp16] "
      "[--offload] [--checkpoint] [--memory-snapshot=FILE] [--epochs=N]",
      __FILE__,
      {{"epochs", 0, 1000},
       {"batch_size", 0, 65536},
       {"lr", 0, 10},
       {"seed", 0, 1e18},
       {"limit", 0, 1e9},
       {"test_limit", 0, 1e9},
       {"streams", 1, 2},
       {"workers", 1, 64},
       {"prefetch", 1, 1024},
       {"dist_timeout", 0.1, 86400},
       {"bucket_cap_mb", 1e-6, 1e6},
       {"amp_init_scale", 1e-30, 3e38},
       {"layers", 0, 1000},
       {"dim", 1, 65536},
       {"heads", 1, 4096},
       {"context", 1, 1 << 20},
       {"dropout", 0, 0.999},
       {"sample_chars", 0, 1e6},
       {"temperature", 1e-6, 1e6},
       {"top_k", 0, 1e9},
       {"offload_prefetch", 0, 1e6}},
      {}};
  return streamgrad::run_tool(spec, argc, argv, [] {
    return streamgrad::train(streamgrad::options_from_flags());
  });
}
