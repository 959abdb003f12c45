#include "nn/parallel/replicate.h"

#include "absl/strings/str_cat.h"
#include "engine/grad_mode.h"
#include "ops/ops.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace nn {
namespace parallel {
namespace {

// The one device every tensor of `module` is on.
Device device_of(const Module& module) {
  const NamedTensors state = module.state_dict();
  SG_CHECK(!state.empty(), ValueError, "replicate: ", module.type_name(),
           " has no parameters or buffers to place");
  const Device d = state.front().second.device();
  for (const auto& [name, t] : state) {
    SG_CHECK(t.device() == d, ValueError, "replicate: ", module.type_name(), "'s '", name,
             "' is on ", t.device().str(), " but '", state.front().first, "' is on ", d.str(),
             "; move the whole module to one device first (module->to(device))");
  }
  return d;
}

// Makes `replica` (a leaf of the copy) stand for `value`: its data, and its history when
// `value` has one, so that gradients reaching the replica flow on through `value`'s node.
void stand_in(Tensor replica, const Tensor& value) {
  replica.requires_grad_(false);
  replica.set_data(value);
  if (value.grad_fn() != nullptr) replica.set_history(value.grad_fn(), value.output_nr());
}

}  // namespace

std::vector<std::shared_ptr<Module>> replicate(const std::shared_ptr<Module>& module,
                                               const std::vector<Device>& devices) {
  SG_CHECK(module != nullptr, ValueError, "replicate: the module is null");
  SG_CHECK(!devices.empty(), ValueError, "replicate: no devices to replicate ",
           module->type_name(), " onto; pass at least one");
  const Device home = device_of(*module);
  const bool differentiable = grad_mode_enabled();
  std::vector<std::shared_ptr<Module>> replicas;
  for (size_t i = 0; i < devices.size(); ++i) {
    const Device d = devices[i];
    std::shared_ptr<Module> r = module->blank_copy();
    for (const TensorMatch& m : matching_tensors(*module, *r)) {
      if (!m.is_parameter) {
        NoGradGuard no_grad;
        const bool share = i == 0 && d == home;
        stand_in(m.to, share ? m.from : d == home ? clone(m.from) : to(m.from, d));
        continue;
      }
      Tensor value;
      if (differentiable && m.from.requires_grad()) {
        // A view on the module's own device, a copy elsewhere: both carry a node whose
        // backward hands the gradient to the module's parameter.
        value = d == home ? view(m.from, m.from.sizes()) : to(m.from, d);
      } else {
        NoGradGuard no_grad;
        value = d == home ? m.from.detach() : to(m.from.detach(), d);
      }
      stand_in(m.to, value);
    }
    // Pre-order, parents first: each module's train() is the last to set its own flag.
    for (const auto& [from, to] : matching_modules(*module, *r)) {
      to->train(from->is_training());
      to->copy_host_state(*from);
    }
    replicas.push_back(std::move(r));
  }
  return replicas;
}

}  // namespace parallel
}  // namespace nn
}  // namespace streamgrad
