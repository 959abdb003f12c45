// The nccl process group on real GPUs (a GPU-only target: tag gpu; left out where nvcc is
// missing or CUDA is interpreted, which has no NCCL). nccl_gpu_test: every collective on
// cuda:0 in a group of one, the refusal of cpu tensors, and DistributedDataParallel on
// cuda:0 whose gradients equal the module's own; and, hidden unless asked for (a lent
// machine has one GPU), two ranks (threads) reducing across two GPUs:
//   bazel test //tests/distributed:nccl_gpu_test --test_tag_filters= --test_arg='[two_gpus]'
// Each case fails, never skips, without its GPUs.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "distributed/ddp.h"
#include "distributed/process_group.h"
#include "distributed/store.h"
#include "engine/factories.h"
#include "nn/layers.h"
#include "ops/ops.h"
#include "runtime/runtime.h"
#include "tests/distributed/world.h"

namespace streamgrad {
namespace {

using distributed::ProcessGroup;
using distributed::TCPStore;
using testing::values;

std::shared_ptr<ProcessGroup> nccl_of_one() {
  return distributed::init_process_group("nccl", 0, 1,
                                         std::make_shared<TCPStore>("127.0.0.1", 0, 1, true));
}

TEST_CASE("nccl collectives on cuda:0 in a group of one", "[nccl][gpu]") {
  INFO("cuda unavailable: " << cuda_unavailable_reason());
  REQUIRE(device_count(DeviceType::kCuda) >= 1);
  auto pg = nccl_of_one();
  CHECK(pg->backend() == "nccl");
  const TensorOptions on = TensorOptions().device(Device("cuda:0"));
  Tensor t = full({5}, 3, on);
  pg->all_reduce(t);
  CHECK(values(t) == std::vector<double>(5, 3));
  Tensor b = full({2, 2}, 7, on);
  pg->broadcast(b, 0);
  CHECK(values(b) == std::vector<double>(4, 7));
  std::vector<Tensor> all{zeros({3}, on)};
  pg->all_gather(all, full({3}, 4, on));
  CHECK(values(all[0]) == std::vector<double>(3, 4));
  Tensor out = zeros({2}, on);
  pg->reduce_scatter(out, {full({2}, 6, on)});
  CHECK(values(out) == std::vector<double>(2, 6));
  pg->barrier();
  Tensor host = zeros({2});
  CHECK_THROWS_WITH(pg->all_reduce(host), Catch::Contains("serves cuda tensors"));

  auto model = std::make_shared<nn::Linear>(4, 3);
  model->to(Device("cuda:0"));
  auto reference = model->clone();
  distributed::DistributedDataParallel ddp(model, pg);
  const Tensor x = randn({8, 4}, on);
  sum(ddp.forward(x)).backward();
  sum(reference->forward(x)).backward();
  CHECK(values(model->weight.grad()) == values(reference->parameters()[0].grad()));
}

TEST_CASE("nccl all_reduce across two GPUs", "[nccl][gpu][.two_gpus]") {
  REQUIRE(device_count(DeviceType::kCuda) >= 2);
  std::vector<std::vector<double>> got(2);
  testing::run_world(
      2,
      [&](int r, ProcessGroup& pg) {
        Tensor t = full({4}, r + 1, TensorOptions().device(Device(DeviceType::kCuda, r)));
        pg.all_reduce(t);
        got[static_cast<size_t>(r)] = values(t);
      },
      std::chrono::milliseconds(10000), "nccl");
  CHECK(got[0] == std::vector<double>(4, 3));
  CHECK(got[1] == std::vector<double>(4, 3));
}


}  // namespace
}  // namespace streamgrad
