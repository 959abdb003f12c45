// The building blocks of data parallelism over the devices of one process, as the
// reference framework's torch.nn.parallel (scatter, gather, parallel_apply):
//
//   std::vector<Device> devices{Device("sim:0"), Device("sim:1")};
//   std::vector<Tensor> parts = nn::parallel::scatter(batch, devices);      // chunks of dim 0
//   std::vector<Tensor> outs = nn::parallel::parallel_apply(replicas, parts); // one thread each
//   Tensor out = nn::parallel::gather(outs, Device("sim:0"));               // cat on sim:0
//
// scatter splits along `dim` as chunk() does (ceil(n / k) per part, so 5 rows over 4
// devices give 3 parts of 2, 2 and 1: fewer parts than devices when n is small) and
// copies part i to devices[i]. gather copies every tensor to `device` and concatenates
// along `dim`; 0-dim tensors (a loss per replica) become a vector, one element each.
// Both are differentiable: scatter's backward gathers the gradients back onto the input's
// device, gather's scatters them back to each tensor's device (S7: copies are ops).
// parallel_apply runs modules[i]->forward(inputs[i]) on a host thread per module with
// inputs[i]'s device current, the caller's current stream of that device current, and
// the caller's grad mode, as the reference does; outputs keep the modules' order.
//
// Thread-safety: each call is independent; parallel_apply's modules must be distinct
// objects (replicas), or forward must be safe to run concurrently on one module.
// Failure: ValueError for an empty device list, a dim out of range, tensors that cannot be
// concatenated, or modules and inputs of different counts; parallel_apply waits for every
// thread, then rethrows the first failure (lowest replica index) with its type kept and
// the replica and device named.
#ifndef STREAMGRAD_NN_PARALLEL_PARALLEL_H_
#define STREAMGRAD_NN_PARALLEL_PARALLEL_H_

#include <memory>
#include <vector>

#include "engine/tensor.h"
#include "nn/module.h"
#include "runtime/base/device.h"

namespace streamgrad {
namespace nn {
namespace parallel {

std::vector<Tensor> scatter(const Tensor& input, const std::vector<Device>& devices,
                            int64_t dim = 0);
Tensor gather(const std::vector<Tensor>& tensors, Device device, int64_t dim = 0);
std::vector<Tensor> parallel_apply(const std::vector<std::shared_ptr<Module>>& modules,
                                   const std::vector<Tensor>& inputs);

}  // namespace parallel
}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_PARALLEL_PARALLEL_H_
