#include "tools/missing_waits_programs.h"

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "distributed/ddp.h"
#include "distributed/store.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "nn/data/loader.h"
#include "nn/layers.h"
#include "nn/optim.h"
#include "nn/parallel/data_parallel.h"
#include "ops/ops.h"
#include "runtime/runtime.h"
#include "tools/stream_race_scenarios.h"
#include "nn/train_step.h"
#include "tools/train_models.h"

namespace streamgrad {
namespace {

using Layers = std::vector<std::shared_ptr<nn::Module>>;

const Device kSim0("sim:0");
const Device kSim1("sim:1");

void append(std::vector<float>& out, const Tensor& t) {
  const std::vector<float> v = t.to_vector<float>();
  out.insert(out.end(), v.begin(), v.end());
}

// A model's parameters as they were after setup, restored in place (on the current
// stream) at the start of every run, so that every run computes the same values.
struct Snapshot {
  std::vector<Tensor> params, initial;
  explicit Snapshot(const nn::Module& m) : params(m.parameters()) {
    NoGradGuard no_grad;
    for (const Tensor& p : params) initial.push_back(clone(p.detach()));
  }
  void restore() {
    NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) {
      Tensor p = params[i].detach();
      copy_(p, initial[i]);
      params[i].set_grad(Tensor());
    }
  }
};

}  // namespace

// The programs have names the linker exports (no anonymous namespace): the ids of their
// synchronisation calls name them.
namespace missing_waits_programs {

// ---- tools/train's twobranch: two steps with Adam, branches on their side streams.
struct TwoBranchState {
  std::shared_ptr<TwoBranch> model;
  std::unique_ptr<Snapshot> start;
  Tensor images[2], targets[2];  // the two steps' batches, copied afresh on the stream
};
TwoBranchState& twobranch_state() {
  static auto* s = new TwoBranchState();
  return *s;
}

void twobranch_setup() {
  TwoBranchState& s = twobranch_state();
  if (s.model != nullptr) return;
  manual_seed(11);
  s.model = std::make_shared<TwoBranch>();
  s.model->to(kSim0);
  s.model->use_streams(kSim0, /*two_streams=*/true);
  s.start = std::make_unique<Snapshot>(*s.model);
  for (int step = 0; step < 2; ++step) {
    s.images[step] = randn({4, 1, 28, 28}, TensorOptions().device(kSim0));
    s.targets[step] = to(from_vector<int64_t>({1, 3, 5, 7}), kSim0);
  }
  synchronize(kSim0);
}

// No host synchronisation until the results are read: as in training, where the loader
// hands batches over device-side, every stream's order comes from the waits alone.
ProgramRun twobranch_steps() {
  twobranch_setup();
  TwoBranchState& s = twobranch_state();
  s.start->restore();
  nn::Adam opt(s.model->parameters(), nn::AdamOptions(1e-3));
  std::vector<Tensor> losses;
  for (int step = 0; step < 2; ++step) {
    nn::Batch b;
    b.data = clone(s.images[step]);  // written on the caller's stream, as a loaded batch
    b.target = clone(s.targets[step]);
    losses.push_back(nn::train_step(*s.model, opt, b).loss);
  }
  ProgramRun r;
  for (const Tensor& l : losses) append(r.values, l);
  for (const Tensor& p : s.model->parameters()) {
    append(r.values, p.grad());
    append(r.values, p);
  }
  return r;
}

// ---- The DataLoader: batches copied on its copy stream, used on a compute stream.
class RampDataset final : public nn::Dataset {
 public:
  int64_t size() const override { return 24; }
  Shape example_shape() const override { return {1, 4, 4}; }
  void get(int64_t i, float* data, int64_t* target) const override {
    for (int j = 0; j < 16; ++j) data[j] = static_cast<float>(i) + 0.0625f * static_cast<float>(j);
    *target = i % 10;
  }
};

struct LoaderState {
  std::unique_ptr<nn::DataLoader> loader;
  Stream compute = Stream::default_for(Device("cpu"));
};
LoaderState& loader_state() {
  static auto* s = new LoaderState();
  return *s;
}

void loader_setup() {
  LoaderState& s = loader_state();
  if (s.loader != nullptr) return;
  s.loader = std::make_unique<nn::DataLoader>(
      std::make_shared<RampDataset>(),
      nn::DataLoaderOptions().batch_size(8).shuffle(false).workers(1).prefetch(2).device(kSim0));
  s.compute = Stream::create(kSim0);
}

ProgramRun loader_epoch() {
  loader_setup();
  LoaderState& s = loader_state();
  StreamGuard on_compute(s.compute);
  std::vector<Tensor> outs;
  s.loader->start_epoch(0);
  for (nn::Batch b; s.loader->next(&b);) {
    outs.push_back(mul(b.data, 2.0));
    outs.push_back(to(b.target, DType::kFloat32));
  }
  ProgramRun r;
  for (const Tensor& t : outs) append(r.values, t);
  return r;
}

// ---- DataParallel over sim:0 and sim:1: an MLP, one forward and backward.
struct DataParallelState {
  std::shared_ptr<nn::Module> net;
  std::shared_ptr<nn::parallel::DataParallel> dp;
  std::unique_ptr<Snapshot> start;
  Tensor x, labels;  // on sim:0, copied afresh every run
};
DataParallelState& dp_state() {
  static auto* s = new DataParallelState();
  return *s;
}

void data_parallel_setup() {
  DataParallelState& s = dp_state();
  if (s.dp != nullptr) return;
  manual_seed(13);
  s.net = std::make_shared<nn::Sequential>(Layers{std::make_shared<nn::Linear>(6, 8),
                                                  std::make_shared<nn::ReLU>(),
                                                  std::make_shared<nn::Linear>(8, 3)});
  s.net->to(kSim0);
  s.dp = std::make_shared<nn::parallel::DataParallel>(s.net, std::vector<Device>{kSim0, kSim1});
  s.start = std::make_unique<Snapshot>(*s.net);
  s.x = randn({6, 6}, TensorOptions().device(kSim0));
  s.labels = to(from_vector<int64_t>({0, 1, 2, 0, 1, 2}), kSim0);
  synchronize(kSim0);
}

// The input on sim:0, written there without a host synchronisation (a host tensor would
// be copied with one, which orders everything before it).
ProgramRun data_parallel_step() {
  data_parallel_setup();
  DataParallelState& s = dp_state();
  s.start->restore();
  const Tensor out = s.dp->forward(clone(s.x));
  cross_entropy(out, clone(s.labels)).backward();
  ProgramRun r;
  append(r.values, out);
  for (const Tensor& p : s.net->parameters()) append(r.values, p.grad());
  return r;
}

// ---- DistributedDataParallel: two ranks as threads of this process (gloo over
// loopback), rank r on sim:r, small buckets so that all-reduces overlap backward.
// The ranks' threads live for the process and run one step per request.
class DdpWorld {
 public:
  static constexpr int kRanks = 2;
  DdpWorld() {
    // The random generator is the process's: models and inputs are drawn here, in order.
    for (int r = 0; r < kRanks; ++r) {
      const Device d(DeviceType::kSim, r);
      manual_seed(15);  // the same model on both ranks
      models_[r] = std::make_shared<nn::Sequential>(Layers{
          std::make_shared<nn::Linear>(16, 32), std::make_shared<nn::ReLU>(),
          std::make_shared<nn::Linear>(32, 32), std::make_shared<nn::ReLU>(),
          std::make_shared<nn::Linear>(32, 4)});
      models_[r]->to(d);
      manual_seed(16 + static_cast<uint64_t>(r));
      inputs_[r] = randn({4, 16}, TensorOptions().device(d));
      synchronize(d);
    }
    auto master = std::make_shared<distributed::TCPStore>("127.0.0.1", 0, kRanks, true,
                                                          std::chrono::milliseconds(20000), false);
    for (int r = 0; r < kRanks; ++r) {
      std::thread([this, master, r] { rank_main(r, master); }).detach();
    }
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return ready_ == kRanks || error_ != nullptr; });
    if (error_ != nullptr) std::rethrow_exception(error_);
  }
  // One step on every rank; the ranks' values, rank 0's first.
  std::vector<float> step() {
    std::unique_lock<std::mutex> lk(mu_);
    ++requested_;
    done_ = 0;
    error_ = nullptr;
    cv_.notify_all();
    cv_.wait(lk, [&] { return done_ == kRanks; });
    if (error_ != nullptr) std::rethrow_exception(error_);
    std::vector<float> out = values_[0];
    out.insert(out.end(), values_[1].begin(), values_[1].end());
    return out;
  }

 private:
  void rank_main(int rank, std::shared_ptr<distributed::TCPStore> master) {
    const Device d(DeviceType::kSim, rank);
    std::shared_ptr<distributed::DistributedDataParallel> ddp;
    std::unique_ptr<Snapshot> start;
    try {
      std::shared_ptr<distributed::Store> store =
          rank == 0 ? std::static_pointer_cast<distributed::Store>(master)
                    : std::make_shared<distributed::TCPStore>("127.0.0.1", master->port(), kRanks,
                                                              false);
      auto group = distributed::init_process_group("gloo", rank, kRanks, store);
      ddp = std::make_shared<distributed::DistributedDataParallel>(
          models_[rank], group,
          distributed::DistributedDataParallelOptions().bucket_cap_mb(0.002));
      start = std::make_unique<Snapshot>(*models_[rank]);
      synchronize(d);
    } catch (...) {
      finish(rank, {}, std::current_exception(), /*setup=*/true);
      return;
    }
    finish(rank, {}, nullptr, /*setup=*/true);
    for (uint64_t seen = 0;;) {
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return requested_ > seen; });
        seen = requested_;
      }
      std::vector<float> v;
      std::exception_ptr error;
      try {
        start->restore();
        sum(ddp->forward(inputs_[rank])).backward();
        for (const Tensor& p : ddp->parameters()) append(v, p.grad());
        synchronize(d);
      } catch (...) {
        error = std::current_exception();
      }
      finish(rank, std::move(v), error, /*setup=*/false);
    }
  }
  void finish(int rank, std::vector<float> v, std::exception_ptr error, bool setup) {
    std::lock_guard<std::mutex> lk(mu_);
    values_[rank] = std::move(v);
    if (error != nullptr && error_ == nullptr) error_ = error;
    ++(setup ? ready_ : done_);
    cv_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  int ready_ = 0, done_ = 0;
  uint64_t requested_ = 0;
  std::exception_ptr error_;
  std::vector<float> values_[kRanks];
  std::shared_ptr<nn::Module> models_[kRanks];
  Tensor inputs_[kRanks];
};

DdpWorld& ddp_world() {
  // Never destroyed: its threads wait for requests until the process ends.
  static auto* w = new DdpWorld();
  return *w;
}

ProgramRun ddp_step() {
  ProgramRun r;
  r.values = ddp_world().step();
  return r;
}

}  // namespace missing_waits_programs

namespace {

std::vector<SyncProgram> make_programs() {
  using namespace missing_waits_programs;  // NOLINT: the table lists them all
  std::vector<SyncProgram> out;
  const EngineOptions defaults;
  for (const RaceScenario& sc : race_scenarios()) {
    if (sc.unsafe(defaults)) continue;  // already races with every call in place
    const RaceScenario* scenario = &sc;
    out.push_back({sc.name, sc.summary, nullptr,
                   [scenario] {
                     const RaceOutcome o = scenario->run();
                     return ProgramRun{{}, o.right ? "" : o.detail};
                   },
                   sc.devices});
  }
  out.push_back({"twobranch",
                 "tools/train's twobranch model, branches on two side streams of sim:0: two "
                 "Adam steps on random batches (losses, gradients, parameters)",
                 twobranch_setup, twobranch_steps});
  out.push_back({"data_loader",
                 "DataLoader on sim:0 (copy stream, one worker, prefetch 2): three batches "
                 "used on a compute stream",
                 loader_setup, loader_epoch});
  out.push_back({"data_parallel",
                 "nn::parallel::DataParallel of an MLP over sim:0 and sim:1: forward, "
                 "cross-entropy backward (output, gradients)",
                 data_parallel_setup, data_parallel_step, 2});
  out.push_back({"ddp",
                 "DistributedDataParallel, 2 ranks as threads (gloo, loopback) on sim:0 and "
                 "sim:1, buckets of 0.002 MiB: forward, backward (both ranks' gradients)",
                 [] { ddp_world(); }, ddp_step, 2, /*deterministic=*/false});
  return out;
}

}  // namespace

const std::vector<SyncProgram>& sync_programs() {
  static const std::vector<SyncProgram> programs = make_programs();
  return programs;
}

const SyncProgram* find_sync_program(const std::string& name) {
  for (const SyncProgram& p : sync_programs()) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

}  // namespace streamgrad
