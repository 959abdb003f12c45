// DataParallel: one module run over several devices of one process, as the reference
// framework's nn.DataParallel (torch::nn::parallel::data_parallel in libtorch).
//
//   auto model = std::make_shared<Net>();
//   model->to(Device("sim:0"));                                 // on device_ids[0]
//   auto dp = std::make_shared<nn::parallel::DataParallel>(
//       model, std::vector<Device>{Device("sim:0"), Device("sim:1")});
//   nn::SGD opt(dp->parameters(), 0.1);                         // the model's parameters
//   Tensor loss = cross_entropy(dp->forward(images), labels);   // output on sim:0
//   loss.backward();                                            // grads summed on sim:0
//
// forward splits the batch along `dim` (scatter), replicates the module onto the devices
// (replicate: every call, since the parameters change between steps), runs the replicas
// on a host thread each (parallel_apply) and concatenates their outputs on output_device
// (gather; a 0-d output per replica becomes a vector). The module's parameter gradients
// are the sums of the replicas' (a mean loss over the gathered output gives the gradient
// of the whole batch's mean). Buffers updated in place by the first replica (BatchNorm's
// running statistics) are the module's; BatchNorm's batch statistics are per replica, as
// in the reference (no synchronised batch norm). The module is registered as "module",
// so parameter names read "module.fc1.weight" as in the reference. With one device,
// forward is the module's forward on that device.
//
// Thread-safety: as Module. Failure: ValueError when the module's tensors are not all on
// device_ids[0] (naming the tensor and its device), for a batch smaller than the number of
// devices, for devices of different types; errors of a replica as parallel_apply reports
// them (type kept, replica and device named).
#ifndef STREAMGRAD_NN_PARALLEL_DATA_PARALLEL_H_
#define STREAMGRAD_NN_PARALLEL_DATA_PARALLEL_H_

#include <memory>
#include <vector>

#include "nn/module.h"
#include "runtime/base/device.h"

namespace streamgrad {
namespace nn {
namespace parallel {

class DataParallel : public Module {
 public:
  // device_ids empty: every device of the type the module is on (one device on cpu).
  // output_device: device_ids[0] unless given.
  DataParallel(std::shared_ptr<Module> module, std::vector<Device> device_ids = {},
               const Device* output_device = nullptr, int64_t dim = 0);
  Tensor forward(const Tensor& input) override;
  std::shared_ptr<Module> blank_copy() const override;

  const std::vector<Device>& device_ids() const { return device_ids_; }
  Device output_device() const { return output_device_; }
  std::shared_ptr<Module> module;

 private:
  void check_module_placement() const;

  std::vector<Device> device_ids_;
  Device output_device_;
  int64_t dim_;
};

}  // namespace parallel
}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_PARALLEL_DATA_PARALLEL_H_
