// check_stream_consistency: see gradcheck/gradcheck.h.
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "engine/accumulate_grad.h"
#include "engine/backward.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "engine/stream_placement.h"
#include "gradcheck/gradcheck.h"
#include "runtime/backend/devices.h"
#include "runtime/memory/copy.h"
#include "runtime/sim/sim.h"

namespace streamgrad {
namespace {

// Raw bytes: "bit for bit" means exactly that.
std::vector<unsigned char> bytes_of(const Tensor& t) {
  if (!t.defined()) return {};
  Tensor dense = t.is_contiguous() ? t : clone_detached(t);
  std::vector<unsigned char> out(static_cast<size_t>(t.numel()) * element_size(t.dtype()));
  copy_bytes(out.data(), Device("cpu"), dense.data_ptr(), dense.device(), out.size());
  return out;
}

// A fresh leaf on `device` with `t`'s values (and requires_grad).
Tensor fresh_leaf(const Tensor& t, Device device) {
  Tensor out = empty(t.sizes(), TensorOptions().dtype(t.dtype()).device(device));
  const std::vector<unsigned char> b = bytes_of(t);
  copy_bytes(out.data_ptr(), device, b.data(), Device("cpu"), b.size());
  if (t.requires_grad()) out.requires_grad_();
  return out;
}

struct Run {
  std::vector<std::vector<unsigned char>> input_grads;
  std::vector<std::vector<unsigned char>> op_grads;
  std::vector<std::string> op_names;
};

// Runs fn and backward with seeds `weights` (bytes per output), every op on the next of
// `rotation` (or all on the current stream when it is empty).
Run run_once(const GradcheckFn& fn, const TensorList& inputs, Device device,
             const std::vector<std::vector<unsigned char>>& weights,
             const std::vector<Stream>& rotation) {
  TensorList leaves;
  for (const Tensor& t : inputs) leaves.push_back(fresh_leaf(t, device));
  const std::vector<Stream> streams =
      rotation.empty() ? std::vector<Stream>{current_stream(device)} : rotation;
  Run run;
  TensorList outs, ops;
  {
    StreamPlacementScope scope(streams);
    outs = fn(leaves);
    ops = scope.outputs();
  }
  for (const Tensor& t : ops) {
    if (t.requires_grad() && !t.is_leaf()) t.retain_grad();
  }
  TensorList roots, seeds;
  for (size_t o = 0; o < outs.size(); ++o) {
    if (!outs[o].requires_grad()) continue;
    // Each seed lives on its output's device (an op may move data to another device).
    const Device od = outs[o].device();
    Tensor w = empty(outs[o].sizes(), TensorOptions().dtype(outs[o].dtype()).device(od));
    copy_bytes(w.data_ptr(), od, weights[o].data(), Device("cpu"), weights[o].size());
    roots.push_back(outs[o]);
    seeds.push_back(w);
  }
  SG_CHECK(!roots.empty(), ValueError, "check_stream_consistency: no output requires grad");
  backward(roots, seeds);
  for (const Tensor& t : leaves) run.input_grads.push_back(bytes_of(t.grad()));
  for (const Tensor& o : outs) synchronize(o.device());
  for (const Tensor& t : ops) {
    run.op_grads.push_back(bytes_of(t.retains_grad() ? t.grad() : Tensor()));
    run.op_names.push_back(t.grad_fn() ? t.grad_fn()->name() : "leaf");
  }
  synchronize(device);
  return run;
}

// The first difference between `ref` and `got`, described; empty when equal.
std::string compare(const Run& ref, const Run& got) {
  for (size_t k = 0; k < ref.op_grads.size() && k < got.op_grads.size(); ++k) {
    if (ref.op_grads[k] != got.op_grads[k]) {
      std::string op = ref.op_names[k];
      const size_t pos = op.rfind("Backward");
      if (pos != std::string::npos) op = op.substr(0, pos);
      return absl::StrCat("the gradient of op #", k, " (", op,
                          ") differs from the single-stream run");
    }
  }
  for (size_t i = 0; i < ref.input_grads.size(); ++i) {
    if (ref.input_grads[i] != got.input_grads[i]) {
      return absl::StrCat("the gradient of input ", i, " differs from the single-stream run");
    }
  }
  return "";
}

}  // namespace

GradcheckResult check_stream_consistency(const GradcheckFn& fn, const TensorList& inputs,
                                         const GradcheckOptions& options,
                                         const StreamCheckOptions& so) {
  SG_CHECK(!inputs.empty(), ValueError, "check_stream_consistency: no inputs");
  const Device home = inputs[0].device();
  SG_CHECK(home.type() == DeviceType::kSim, ValueError,
           "check_stream_consistency: inputs must live on a sim device (got ", home.str(),
           "); the check relies on the simulator's schedulers");
  GradModeGuard grad_on(true);
  // Fixed output seeds, as bytes in each output's dtype.
  std::vector<std::vector<unsigned char>> weights;
  {
    std::mt19937_64 rng(options.seed + 7);
    std::normal_distribution<double> normal;
    TensorList outs;
    {
      NoGradGuard no_grad;
      outs = fn(inputs);
    }
    for (const Tensor& o : outs) {
      std::vector<double> w(o.numel());
      for (double& x : w) x = normal(rng);
      weights.push_back(bytes_of(
          from_vector<double>(w, o.sizes(), TensorOptions().dtype(o.dtype()).device(home))));
    }
  }
  auto rotation = [&](Device d) {
    std::vector<Stream> r;
    for (int k = 0; k < so.streams; ++k) r.push_back(Stream::from_pool(d));
    return r;
  };
  SimSchedulerOptions round_robin;
  round_robin.kind = SimSchedulerKind::kDeterministic;
  Run reference;
  {
    SimSchedulerScope scope(round_robin);
    reference = run_once(fn, inputs, home, weights, {});
  }
  GradcheckResult result;
  auto check = [&](const std::string& variant, const Run& got) {
    if (!result.passed) return;
    const std::string diff = compare(reference, got);
    if (diff.empty()) return;
    result.passed = false;
    result.message = absl::StrCat("stream consistency check failed with ", variant, ": ", diff,
                                  "; its backward (or an op after it) is not ordered correctly "
                                  "against the streams its inputs come from");
  };
  for (int seed = 0; seed < so.adversarial_seeds && result.passed; ++seed) {
    SimSchedulerOptions adv;
    adv.kind = SimSchedulerKind::kDeterministic;
    adv.policy = SimPolicy::kAdversarial;
    adv.seed = options.seed + seed;
    SimSchedulerScope scope(adv);
    check(absl::StrCat(so.streams, " streams on ", home.str(),
                       " under the adversarial scheduler (seed ", adv.seed, ")"),
          run_once(fn, inputs, home, weights, rotation(home)));
  }
  for (int r = 0; r < so.threaded_runs && result.passed; ++r) {
    SimSchedulerOptions threaded;
    threaded.jitter_us = 20;
    threaded.seed = options.seed + r;
    SimSchedulerScope scope(threaded);
    check(absl::StrCat(so.streams, " streams on ", home.str(),
                       " under the threaded scheduler with jitter (run ", r, ")"),
          run_once(fn, inputs, home, weights, rotation(home)));
  }
  if (so.across_devices) {
    for (const Device& d : all_devices(DeviceType::kSim)) {
      if (d == home || d.is_cpu() || !result.passed) continue;
      SimSchedulerOptions adv;
      adv.kind = SimSchedulerKind::kDeterministic;
      adv.policy = SimPolicy::kAdversarial;
      adv.seed = options.seed;
      SimSchedulerScope scope(adv);
      check(absl::StrCat(so.streams, " streams on ", d.str(), " (inputs copied from ",
                         home.str(), ")"),
            run_once(fn, inputs, d, weights, rotation(d)));
    }
  }
  if (!result.passed && options.raise_exception) throw GradcheckError(result);
  return result;
}

}  // namespace streamgrad
