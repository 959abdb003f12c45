// replicate(module, devices): one copy of `module` per device, as the reference
// framework's torch.nn.parallel.replicate, for DataParallel.
//
//   auto replicas = nn::parallel::replicate(model, {Device("sim:0"), Device("sim:1")});
//
// Each replica is module->blank_copy() (nn/module.h) whose parameters are differentiable
// copies of the module's on its device: not leaves, so backward through a replica
// delivers each parameter's gradient to the module's own parameter (copied back to its
// device, S7) and the replicas' gradients add up there — the module's .grad is the sum
// over replicas, with no reduction step of its own. On the module's own device the
// replica's parameters are views of the module's (no copy). Buffers are copies without
// history, except on the first device when it is the module's: there the replica shares
// the module's buffers, so in-place updates there (BatchNorm's running statistics) are
// the module's, as documented for the reference's DataParallel; updates on the other
// replicas are lost. Replicas take the module's train/eval flags and host state. With
// grad mode off the parameters are plain copies (nothing to differentiate).
//
// Thread-safety: as Module (call from the thread that owns the module). Failure:
// ValueError for an empty device list, a module whose tensors are not all on one device,
// or a module without blank_copy().
#ifndef STREAMGRAD_NN_PARALLEL_REPLICATE_H_
#define STREAMGRAD_NN_PARALLEL_REPLICATE_H_

#include <memory>
#include <vector>

#include "nn/module.h"
#include "runtime/base/device.h"

namespace streamgrad {
namespace nn {
namespace parallel {

std::vector<std::shared_ptr<Module>> replicate(const std::shared_ptr<Module>& module,
                                               const std::vector<Device>& devices);

}  // namespace parallel
}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_PARALLEL_REPLICATE_H_
