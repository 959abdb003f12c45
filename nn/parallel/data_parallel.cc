#include "nn/parallel/data_parallel.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nn/parallel/parallel.h"
#include "nn/parallel/replicate.h"
#include "ops/op_utils.h"
#include "ops/ops.h"
#include "runtime/base/error.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace nn {
namespace parallel {
namespace {

std::vector<Device> default_devices(const Module& module) {
  const NamedTensors state = module.state_dict();
  const Device home = state.empty() ? Device("cpu") : state.front().second.device();
  if (home.is_cpu()) return {home};
  return all_devices(home.type());
}

std::string device_list(const std::vector<Device>& devices) {
  return absl::StrJoin(devices, ", ", [](std::string* out, const Device& d) {
    out->append(d.str());
  });
}

}  // namespace

DataParallel::DataParallel(std::shared_ptr<Module> m, std::vector<Device> device_ids,
                           const Device* output_device, int64_t dim)
    : Module("DataParallel"),
      device_ids_(device_ids.empty() && m != nullptr ? default_devices(*m) : std::move(device_ids)),
      output_device_(Device("cpu")),
      dim_(dim) {
  SG_CHECK(m != nullptr, ValueError, "DataParallel: the module is null");
  SG_CHECK(!device_ids_.empty(), ValueError, "DataParallel: no devices");
  for (Device& d : device_ids_) {
    d = resolve_device(d, "DataParallel");
    SG_CHECK(d.type() == device_ids_.front().type(), ValueError, "DataParallel: devices [",
             device_list(device_ids_), "] are of different types; use devices of one type");
  }
  output_device_ = output_device != nullptr ? resolve_device(*output_device, "DataParallel")
                                            : device_ids_.front();
  module = register_module("module", std::move(m));
  check_module_placement();
}

void DataParallel::check_module_placement() const {
  for (const auto& [name, t] : module->state_dict()) {
    SG_CHECK(t.device() == device_ids_.front(), ValueError, "DataParallel: the module must have "
             "its parameters and buffers on device_ids[0] = ", device_ids_.front().str(),
             ", but '", name, "' is on ", t.device().str(), "; call module->to(",
             device_ids_.front().str(), ") first");
  }
}

Tensor DataParallel::forward(const Tensor& input) {
  check_module_placement();  // the module may have moved since construction
  if (device_ids_.size() == 1) {
    return streamgrad::to(module->forward(streamgrad::to(input, device_ids_.front())),
                          output_device_);
  }
  SG_CHECK(input.defined() && input.dim() > 0, ValueError,
           "DataParallel: expected a batched input to split, got ",
           input.defined() ? input.describe() : std::string("an undefined tensor"));
  const int64_t d = ops_internal::wrap_dim(dim_, input.dim(), "DataParallel");
  const int64_t batch = input.size(d), n = static_cast<int64_t>(device_ids_.size());
  SG_CHECK(batch >= n, ValueError, "DataParallel: a batch of ", batch, " along dim ", d,
           " cannot be split over the ", n, " devices [", device_list(device_ids_),
           "]; the batch must be at least the number of devices");
  const std::vector<Tensor> inputs = scatter(input, device_ids_, d);
  const std::vector<Device> used(device_ids_.begin(),
                                 device_ids_.begin() + static_cast<int64_t>(inputs.size()));
  const std::vector<std::shared_ptr<Module>> replicas = replicate(module, used);
  const std::vector<Tensor> outputs = parallel_apply(replicas, inputs);
  // The first replica shares the module's buffers; its host state (batch counts) is the
  // module's from now on too.
  for (const auto& [from, to] : matching_modules(*replicas.front(), *module)) {
    to->copy_host_state(*from);
  }
  return gather(outputs, output_device_, d);
}

std::shared_ptr<Module> DataParallel::blank_copy() const {
  // A clone, not a blank copy of the module: the constructor checks that the module's
  // tensors are on device_ids[0], which a blank copy's (made on cpu) are not.
  return std::make_shared<DataParallel>(module->clone(), device_ids_, &output_device_, dim_);
}

}  // namespace parallel
}  // namespace nn
}  // namespace streamgrad
