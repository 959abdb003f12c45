#include "distributed/ddp.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "distributed/reducer.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "ops/ops.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace distributed {

namespace {
// One number for the names, shapes and dtypes of a module's tensors (FNV-1a), so that
// processes can compare models with a two-element all_gather.
int64_t fingerprint(const nn::NamedTensors& tensors) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  for (const auto& [name, t] : tensors) {
    for (char c : name) mix(static_cast<unsigned char>(c));
    mix(static_cast<uint64_t>(t.dtype()));
    for (int64_t s : t.sizes()) mix(static_cast<uint64_t>(s));
  }
  return static_cast<int64_t>(h >> 1);
}
}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> m,
                                                 std::shared_ptr<ProcessGroup> group,
                                                 DistributedDataParallelOptions options)
    : nn::Module("DistributedDataParallel"), group_(std::move(group)), options_(options) {
  SG_CHECK(m != nullptr, ValueError, "DistributedDataParallel: the module is null");
  SG_CHECK(group_ != nullptr, ValueError,
           "DistributedDataParallel: the process group is null; make one with "
           "init_process_group or init_process_group_from_env");
  SG_CHECK(options_.bucket_cap_mb() > 0, ValueError, "DistributedDataParallel: bucket_cap_mb ",
           options_.bucket_cap_mb(), " must be positive");
  module = register_module("module", std::move(m));

  // Every process must hold the same model, else the collectives would pair unrelated
  // tensors (or hang on different counts).
  // On the model's device: a backend may serve no other (nccl: cuda tensors only).
  const nn::NamedTensors state = module->state_dict();
  const Device where = state.empty() ? Device("cpu") : state.front().second.device();
  const TensorOptions i64 = TensorOptions().dtype(DType::kInt64).device(where);
  const std::vector<int64_t> summary{static_cast<int64_t>(state.size()), fingerprint(state)};
  Tensor mine = streamgrad::to(from_vector<int64_t>(summary), where);  // Module::to hides it
  std::vector<Tensor> all;
  for (int r = 0; r < group_->size(); ++r) all.push_back(empty({2}, i64));
  group_->all_gather(all, mine);
  const std::vector<int64_t> first = all[0].to_vector<int64_t>();
  for (int r = 1; r < group_->size(); ++r) {
    const std::vector<int64_t> theirs = all[static_cast<size_t>(r)].to_vector<int64_t>();
    SG_CHECK(theirs == first, DistributedError, "DistributedDataParallel: rank ", r,
             "'s model (", theirs[0], " parameters and buffers) differs from rank 0's (",
             first[0], ") in names, shapes or dtypes; every process must build the same model");
  }
  broadcast_state(false);

  std::vector<std::pair<std::string, Tensor>> grad_params;
  const nn::NamedTensors params = module->named_parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].second.requires_grad()) continue;
    grad_params_.push_back(i);
    grad_params.push_back(params[i]);
  }
  const auto cap = static_cast<int64_t>(options_.bucket_cap_mb() * 1024.0 * 1024.0);
  reducer_ = std::make_shared<ddp_internal::Reducer>(std::move(grad_params), group_, cap,
                                                     options_.find_unused_parameters());
  reducer_->install_hooks();
}

DistributedDataParallel::~DistributedDataParallel() = default;

void DistributedDataParallel::broadcast_state(bool buffers_only) {
  NoGradGuard no_grad;
  const nn::NamedTensors tensors = buffers_only ? module->named_buffers() : module->state_dict();
  for (const auto& [name, t] : tensors) {
    Tensor target = t;
    group_->broadcast(target, 0);
  }
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  if (options_.broadcast_buffers() && group_->size() > 1) broadcast_state(true);
  Tensor out = module->forward(input);
  reducer_->clear_launch_log();
  reducer_->prepare(sync_ && grad_mode_enabled(), {out});
  return out;
}

std::vector<std::vector<size_t>> DistributedDataParallel::bucket_indices() const {
  std::vector<std::vector<size_t>> out = reducer_->bucket_indices();
  for (auto& bucket : out) {
    for (size_t& i : bucket) i = grad_params_[i];
  }
  return out;
}

std::vector<size_t> DistributedDataParallel::last_launch_order() const {
  return reducer_->launch_log();
}

}  // namespace distributed
}  // namespace streamgrad
