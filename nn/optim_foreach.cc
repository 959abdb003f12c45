// The optimisers' foreach path: the parameters of one parameter group split by (device,
// dtype), one multi-tensor launch each (kernels/foreach.h) instead of several kernels per parameter.
//
// State a step creates (momentum buffers, Adam's moments) is allocated uninitialised and
// marked fresh for the kernel, which initialises it; it joins the optimiser's state only
// once its group's launch was accepted, so a kernel that refuses its arguments leaves no
// half-made state behind.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "kernels/foreach.h"
#include "nn/optim.h"
#include "runtime/backend/devices.h"

namespace streamgrad {
namespace nn {
namespace {

// The parameters of one device and dtype: one launch.
template <typename Entry>
struct Group {
  Device device;
  DType dtype;
  std::vector<Entry> entries;
  std::vector<Tensor> held;     // every tensor the entries view, alive until the launch
  std::vector<Tensor> written;  // their versions are bumped after the launch
  std::vector<std::pair<Tensor*, Tensor>> created;  // state slot, its new tensor
};

// The group of p's device and dtype; a new group reserves room for `count` parameters.
template <typename Entry>
Group<Entry>& group_for(std::vector<Group<Entry>>& groups, const Tensor& p, size_t count) {
  for (Group<Entry>& g : groups) {
    if (g.device == p.device() && g.dtype == p.dtype()) return g;
  }
  groups.push_back(Group<Entry>{p.device(), p.dtype(), {}, {}, {}, {}});
  Group<Entry>& g = groups.back();
  g.entries.reserve(count);
  g.held.reserve(count);
  g.written.reserve(3 * count);
  return g;
}

// The state tensor in `slot`, or a new uninitialised one noted in `group` (the kernel fills
// it); sets `fresh` accordingly.
template <typename Entry>
kernels::View state_view(Group<Entry>& group, Tensor& slot, const Tensor& like, bool* fresh) {
  if (slot.defined()) {
    group.written.push_back(slot);
    return slot.view();
  }
  Tensor made = empty_like(like);
  const kernels::View v = made.view();
  group.created.emplace_back(&slot, std::move(made));
  *fresh = true;
  return v;
}

template <typename Entry>
void finish(Group<Entry>& group) {
  for (const Tensor& t : group.written) t.bump_version();
  for (auto& [slot, t] : group.created) *slot = std::move(t);
}

}  // namespace

void SGD::step_foreach(size_t param_group, const SGDOptions& options) {
  NoGradGuard no_grad;
  const bool momentum = options.momentum() != 0;
  const size_t begin = group_begin(param_group);
  const size_t end = begin + param_groups()[param_group].params().size();
  std::vector<Group<kernels::SgdParam>> groups;
  for (size_t i = begin; i < end; ++i) {
    const Tensor& p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    Group<kernels::SgdParam>& group = group_for(groups, p, end - i);
    kernels::SgdParam e;
    e.param = p.view();
    e.grad = g.view();
    if (momentum) {
      e.momentum_buffer = state_view(group, state(i, "momentum_buffer"), p, &e.fresh_buffer);
    }
    group.entries.push_back(std::move(e));
    group.held.push_back(std::move(g));
    group.written.push_back(p);
  }
  kernels::SgdHyper h;
  h.lr = options.lr();
  h.momentum = options.momentum();
  h.dampening = options.dampening();
  h.weight_decay = options.weight_decay();
  h.nesterov = options.nesterov();
  for (Group<kernels::SgdParam>& group : groups) {
    kernels::sgd_update(current_stream(group.device), h, group.entries);
    finish(group);
  }
}

void Adam::step_foreach(size_t param_group, const AdamOptions& options) {
  NoGradGuard no_grad;
  const size_t begin = group_begin(param_group);
  const size_t end = begin + param_groups()[param_group].params().size();
  std::vector<Group<kernels::AdamParam>> groups;
  for (size_t i = begin; i < end; ++i) {
    const Tensor& p = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    Group<kernels::AdamParam>& group = group_for(groups, p, end - i);
    kernels::AdamParam e;
    e.param = p.view();
    e.grad = g.view();
    bool fresh_m = false, fresh_v = false;
    e.exp_avg = state_view(group, state(i, "exp_avg"), p, &fresh_m);
    e.exp_avg_sq = state_view(group, state(i, "exp_avg_sq"), p, &fresh_v);
    // Both moments are made together (and loaded together from a state dict); should
    // only one exist, the kernel must not read the other, so both start from 0.
    e.fresh_state = fresh_m || fresh_v;
    e.step = ++scalars_[absl::StrCat(i, ".step")];
    group.entries.push_back(std::move(e));
    group.held.push_back(std::move(g));
    group.written.push_back(p);
  }
  kernels::AdamHyper h;
  h.lr = options.lr();
  h.beta1 = options.beta1();
  h.beta2 = options.beta2();
  h.eps = options.eps();
  h.weight_decay = options.weight_decay();
  h.decoupled = decoupled_;
  for (Group<kernels::AdamParam>& group : groups) {
    kernels::adam_update(current_stream(group.device), h, group.entries);
    finish(group);
  }
}

}  // namespace nn
}  // namespace streamgrad
