// DistributedDataParallel, ported from the behaviours the reference framework's DDP tests
// check (test/distributed/test_c10d_gloo.py, distributed_test.py): parameters after each
// step equal one process's on the global batch; rank 0's state wins at construction;
// buckets in reverse order within the cap; no_sync accumulates locally and the next
// synchronised backward reduces the sum; unused parameters are an error unless
// find_unused_parameters, which averages what some ranks used; models that differ are
// refused; a dead peer is an error. Processes are threads over loopback (world.h).
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "distributed/ddp.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "nn/layers.h"
#include "nlohmann/json.hpp"
#include "nn/optim.h"
#include "ops/ops.h"
#include "runtime/runtime.h"
#include "tests/distributed/world.h"

namespace streamgrad {
namespace {

using distributed::DistributedDataParallel;
using distributed::DistributedDataParallelOptions;
using distributed::ProcessGroup;
using testing::run_world;
using testing::values;

std::shared_ptr<nn::Module> make_mlp() {
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(8, 16), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(16, 4)});
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = values(a), y = values(b);
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

Device rank_device(const std::string& type, int rank) {
  return type == "cpu" ? Device("cpu") : Device(DeviceType::kSim, rank);
}

TEST_CASE("DDP steps equal one process's steps on the global batch", "[ddp]") {
  const int world = GENERATE(2, 4);
  const std::string type = GENERATE(std::string("cpu"), std::string("sim"));
  CAPTURE(world, type);
  constexpr int kSteps = 3, kBatch = 8;
  manual_seed(7);
  const std::shared_ptr<nn::Module> start = make_mlp();
  std::vector<Tensor> xs, ys;
  for (int s = 0; s < kSteps; ++s) {
    xs.push_back(randn({kBatch, 8}));
    ys.push_back(randn({kBatch, 4}));
  }
  // One process on the whole batch: the parameters after each step.
  std::vector<std::vector<Tensor>> expected;
  {
    std::shared_ptr<nn::Module> ref = start->clone();
    nn::SGD opt(ref->parameters(), nn::SGDOptions(0.1).momentum(0.9));
    for (int s = 0; s < kSteps; ++s) {
      opt.zero_grad();
      mse_loss(ref->forward(xs[s]), ys[s]).backward();
      opt.step();
      std::vector<Tensor> now;
      for (const Tensor& p : ref->parameters()) now.push_back(clone(p.detach()));
      expected.push_back(now);
    }
  }
  std::vector<std::shared_ptr<nn::Module>> models;
  for (int r = 0; r < world; ++r) {
    models.push_back(start->clone());
    models.back()->to(rank_device(type, r));
    if (r > 0) {  // construction must replace these with rank 0's
      NoGradGuard g;
      for (Tensor& p : models.back()->parameters()) fill_(p, 100.0 + r);
    }
  }
  run_world(world, [&](int rank, ProcessGroup& pg) {
    const Device d = rank_device(type, rank);
    auto ddp = std::make_shared<DistributedDataParallel>(
        models[static_cast<size_t>(rank)], std::shared_ptr<ProcessGroup>(&pg, [](auto*) {}),
        DistributedDataParallelOptions().bucket_cap_mb(0.0003));  // several buckets
    TCHECK(ddp->bucket_indices().size() > 1);
    nn::SGD opt(ddp->parameters(), nn::SGDOptions(0.1).momentum(0.9));
    const int64_t local = kBatch / world;
    for (int s = 0; s < kSteps; ++s) {
      opt.zero_grad();
      Tensor x = to(narrow(xs[s], 0, rank * local, local), d);
      Tensor y = to(narrow(ys[s], 0, rank * local, local), d);
      mse_loss(ddp->forward(x), y).backward();
      opt.step();
      const std::vector<Tensor> params = ddp->module->parameters();
      for (size_t i = 0; i < params.size(); ++i) {
        TCHECK(max_abs_diff(params[i], expected[static_cast<size_t>(s)][i]) < 1e-5);
      }
    }
  });
}

TEST_CASE("DDP buckets parameters in reverse order within the cap", "[ddp]") {
  run_world(1, [](int, ProcessGroup& pg) {
    std::shared_ptr<ProcessGroup> group(&pg, [](auto*) {});
    // Parameter sizes (floats): 128, 16, 64, 4. A cap of 600 bytes = 150 floats.
    auto one = std::make_shared<DistributedDataParallel>(make_mlp(), group);
    TCHECK_EQ(one->bucket_indices(), (std::vector<std::vector<size_t>>{{3, 2, 1, 0}}));
    auto capped = std::make_shared<DistributedDataParallel>(
        make_mlp(), group, DistributedDataParallelOptions().bucket_cap_mb(600.0 / 1048576));
    TCHECK_EQ(capped->bucket_indices(), (std::vector<std::vector<size_t>>{{3, 2, 1}, {0}}));
    Tensor x = randn({2, 8});
    mse_loss(capped->forward(x), zeros({2, 4})).backward();
    TCHECK_EQ(capped->last_launch_order(), (std::vector<size_t>{0, 1}));
  });
}

TEST_CASE("no_sync accumulates locally; the next synchronised backward reduces the sum",
          "[ddp]") {
  manual_seed(3);
  const std::shared_ptr<nn::Module> start = make_mlp();
  const Tensor a = randn({4, 8}), b = randn({4, 8});
  // Expected .grad: the average over the 2 ranks of (grad on a-part + grad on b-part).
  std::shared_ptr<nn::Module> ref = start->clone();
  for (int r = 0; r < 2; ++r) {
    mse_loss(ref->forward(narrow(a, 0, 2 * r, 2)), zeros({2, 4})).backward();
    mse_loss(ref->forward(narrow(b, 0, 2 * r, 2)), zeros({2, 4})).backward();
  }
  std::vector<std::shared_ptr<nn::Module>> models{start->clone(), start->clone()};
  run_world(2, [&](int rank, ProcessGroup& pg) {
    auto ddp = std::make_shared<DistributedDataParallel>(
        models[static_cast<size_t>(rank)], std::shared_ptr<ProcessGroup>(&pg, [](auto*) {}));
    {
      auto guard = ddp->no_sync();
      mse_loss(ddp->forward(narrow(a, 0, 2 * rank, 2)), zeros({2, 4})).backward();
    }
    TCHECK(ddp->last_launch_order().empty());  // nothing was communicated
    mse_loss(ddp->forward(narrow(b, 0, 2 * rank, 2)), zeros({2, 4})).backward();
    TCHECK_EQ(ddp->last_launch_order(), (std::vector<size_t>{0}));
    const std::vector<Tensor> got = ddp->module->parameters(), want = ref->parameters();
    for (size_t i = 0; i < got.size(); ++i) {
      TCHECK(max_abs_diff(got[i].grad(), mul(want[i].grad(), 0.5)) < 1e-5);
    }
  });
}

// Two heads; `use_b` picks whether the forward also goes through b (per rank).
class TwoHeads : public nn::Module {
 public:
  explicit TwoHeads(bool use_b) : nn::Module("TwoHeads"), use_b_(use_b) {
    a = register_module("a", std::make_shared<nn::Linear>(3, 2));
    b = register_module("b", std::make_shared<nn::Linear>(3, 2));
    never = register_module("never", std::make_shared<nn::Linear>(3, 2));
  }
  Tensor forward(const Tensor& x) override {
    return use_b_ ? add(a->forward(x), b->forward(x)) : a->forward(x);
  }
  std::shared_ptr<nn::Linear> a, b, never;

 private:
  bool use_b_;
};

TEST_CASE("unused parameters: an error naming them, or averaged with find_unused_parameters",
          "[ddp]") {
  SECTION("without find_unused_parameters backward names the parameters") {
    run_world(1, [](int, ProcessGroup& pg) {
      auto ddp = std::make_shared<DistributedDataParallel>(
          std::make_shared<TwoHeads>(false), std::shared_ptr<ProcessGroup>(&pg, [](auto*) {}));
      Tensor loss = sum(ddp->forward(ones({1, 3})));
      std::string message;
      try {
        loss.backward();
      } catch (const Error& e) {
        message = e.what();
      }
      TCHECK(message.find("b.weight") != std::string::npos);
      TCHECK(message.find("find_unused_parameters") != std::string::npos);
    });
  }
  SECTION("with it, what one rank used is averaged; what nobody used keeps no grad") {
    run_world(2, [](int rank, ProcessGroup& pg) {
      auto model = std::make_shared<TwoHeads>(rank == 0);
      auto ddp = std::make_shared<DistributedDataParallel>(
          model, std::shared_ptr<ProcessGroup>(&pg, [](auto*) {}),
          DistributedDataParallelOptions().find_unused_parameters(true));
      sum(ddp->forward(ones({1, 3}))).backward();
      // d sum / d b.weight on rank 0 is all ones; rank 1 contributes nothing: 0.5.
      TCHECK_EQ(values(model->b->weight.grad()), std::vector<double>(6, 0.5));
      TCHECK_EQ(values(model->a->weight.grad()), std::vector<double>(6, 1.0));
      TCHECK(!model->never->weight.grad().defined());
    });
  }
}

TEST_CASE("DDP refuses processes whose models differ, naming the rank", "[ddp][errors]") {
  CHECK_THROWS_WITH(run_world(2,
                              [](int rank, ProcessGroup& pg) {
                                auto m = std::make_shared<nn::Linear>(3, rank == 0 ? 2 : 5);
                                DistributedDataParallel ddp(
                                    m, std::shared_ptr<ProcessGroup>(&pg, [](auto*) {}));
                              }),
                    Catch::Contains("rank 1's model"));
}

TEST_CASE("a peer that leaves before backward makes backward fail, not hang",
          "[ddp][errors]") {
  const std::string type = GENERATE(std::string("cpu"), std::string("sim"));
  CHECK_THROWS_WITH(run_world(2,
                              [&](int rank, ProcessGroup& pg) {
                                const Device d = rank_device(type, rank);
                                auto m = make_mlp();
                                m->to(d);
                                DistributedDataParallel ddp(
                                    m, std::shared_ptr<ProcessGroup>(&pg, [](auto*) {}));
                                pg.barrier();
                                if (rank == 1) return;  // gone
                                Tensor loss =
                                    sum(ddp.forward(ones({2, 8}, TensorOptions().device(d))));
                                loss.backward();
                                values(m->parameters()[0].grad());  // sim: raised here
                              },
                              std::chrono::milliseconds(2000)),
                    Catch::Contains("all_reduce on rank 0 of 2 failed"));
}

}  // namespace
}  // namespace streamgrad

namespace streamgrad {
namespace {

// The trace's spans on one device: name, start and end (us), and the backward node that
// launched it ("" outside backward).
struct TraceSpan {
  std::string name, node;
  double start, end;
};
std::vector<TraceSpan> spans_on(const std::string& json, const std::string& device) {
  const nlohmann::json doc = nlohmann::json::parse(json);
  int pid = -1;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"] == device) {
      pid = e["pid"];
    }
  }
  std::vector<TraceSpan> out;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X" || e["pid"] != pid || e["cat"] == "event") continue;
    const double ts = e["ts"].get<double>(), dur = e["dur"].get<double>();
    out.push_back({e["name"], e["args"].value("node", ""), ts, ts + dur});
  }
  return out;
}

TEST_CASE("bucket all-reduces start on the communication stream while backward still runs",
          "[ddp][sim][trace]") {
  std::vector<std::shared_ptr<nn::Module>> models;
  for (int r = 0; r < 2; ++r) {
    auto seq = std::make_shared<nn::Sequential>();
    for (int l = 0; l < 6; ++l) seq->push_back(std::make_shared<nn::Linear>(256, 256));
    seq->to(Device(DeviceType::kSim, r));
    models.push_back(seq);
  }
  std::string json;
  std::vector<size_t> order;
  run_world(2, [&](int rank, ProcessGroup& pg) {
    const Device d(DeviceType::kSim, rank);
    auto ddp = std::make_shared<DistributedDataParallel>(
        models[static_cast<size_t>(rank)], std::shared_ptr<ProcessGroup>(&pg, [](auto*) {}),
        DistributedDataParallelOptions().bucket_cap_mb(0.3));  // one layer per bucket
    TCHECK_EQ(ddp->bucket_indices().size(), size_t{6});
    Tensor x = randn({64, 256}, TensorOptions().device(d));
    Tensor loss = sum(ddp->forward(x));
    pg.barrier();
    std::unique_ptr<TraceRecorder> trace;
    if (rank == 0) trace = std::make_unique<TraceRecorder>();
    loss.backward();
    synchronize(d);
    pg.barrier();
    if (rank == 0) {
      trace->stop();
      json = trace->chrome_json();
      order = ddp->last_launch_order();
    }
  });
  CHECK(order == std::vector<size_t>{0, 1, 2, 3, 4, 5});
  double first_all_reduce = 1e300, last_node_end = 0;
  int all_reduces = 0;
  for (const TraceSpan& s : spans_on(json, "sim:0")) {
    if (s.name == "all_reduce") {
      ++all_reduces;
      first_all_reduce = std::min(first_all_reduce, s.start);
    } else if (!s.node.empty()) {
      last_node_end = std::max(last_node_end, s.end);
    }
  }
  CHECK(all_reduces == 6);
  INFO("first all_reduce starts at " << first_all_reduce << " us; backward's last node ends at "
                                     << last_node_end << " us");
  CHECK(first_all_reduce < last_node_end);
}

}  // namespace
}  // namespace streamgrad

namespace streamgrad {
namespace {

// A group that, like nccl, serves tensors of one device only (forwarding to gloo).
class OneDeviceGroup final : public ProcessGroup {
 public:
  OneDeviceGroup(ProcessGroup& inner, Device d) : inner_(inner), device_(d) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string backend() const override { return "one-device"; }
  std::shared_ptr<distributed::Work> all_reduce_async(Tensor& t,
                                                      distributed::ReduceOp op) override {
    served(t);
    return inner_.all_reduce_async(t, op);
  }
  void broadcast(Tensor& t, int root) override {
    served(t);
    inner_.broadcast(t, root);
  }
  void all_gather(std::vector<Tensor>& out, const Tensor& in) override {
    served(in);
    inner_.all_gather(out, in);
  }
  void reduce_scatter(Tensor& out, const std::vector<Tensor>& in,
                      distributed::ReduceOp op) override {
    served(out);
    inner_.reduce_scatter(out, in, op);
  }
  void barrier() override { inner_.barrier(); }

 private:
  void served(const Tensor& t) const {
    if (t.device() != device_) throw DistributedError("one-device group got " + t.describe());
  }
  ProcessGroup& inner_;
  const Device device_;
};

TEST_CASE("DDP communicates only tensors on the model's device (as nccl requires)",
          "[ddp][sim]") {
  run_world(2, [](int rank, ProcessGroup& pg) {
    const Device d(DeviceType::kSim, rank);
    auto model = std::make_shared<TwoHeads>(rank == 0);
    model->to(d);
    auto group = std::make_shared<OneDeviceGroup>(pg, d);
    auto ddp = std::make_shared<DistributedDataParallel>(
        model, group, DistributedDataParallelOptions().find_unused_parameters(true));
    sum(ddp->forward(ones({1, 3}, TensorOptions().device(d)))).backward();
    TCHECK_EQ(values(model->b->weight.grad()), std::vector<double>(6, 0.5));
  });
}

}  // namespace
}  // namespace streamgrad
