#include "nn/recompute.h"

#include <algorithm>
#include <any>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/autocast.h"
#include "engine/backward.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "engine/saved_hooks.h"
#include "runtime/base/error.h"
#include "runtime/base/warning.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace nn {
namespace {

thread_local bool t_recomputing = false;
// The saved-tensor hooks this thread's innermost checkpoint pushed (its forward's, which
// drop, or its recomputation's, which keep), while they are the innermost hooks' owner.
thread_local const SavedTensorsHookPair* t_checkpoint_hooks = nullptr;

// Pushes a checkpoint's hooks and marks them as a checkpoint's, so that a checkpoint
// called inside can save its inputs to this one.
class FrameHooks {
 public:
  FrameHooks(PackHook pack, UnpackHook unpack)
      : hooks_(std::move(pack), std::move(unpack)), previous_(t_checkpoint_hooks) {
    t_checkpoint_hooks = detail::current_saved_tensors_hooks().get();
  }
  ~FrameHooks() { t_checkpoint_hooks = previous_; }

 private:
  SavedTensorsHooks hooks_;
  const SavedTensorsHookPair* previous_;
};

std::string describe_shape(const Shape& s) { return absl::StrCat("[", absl::StrJoin(s, ", "), "]"); }

// What the forward ran under, restored for the recomputation.
struct ForwardState {
  RngState rng;
  std::vector<std::pair<Device, Stream>> streams;  // each input device's current stream
  struct Amp {
    DeviceType type;
    bool enabled;
    DType dtype;
  };
  std::vector<Amp> amp;

  static ForwardState capture(const TensorList& inputs, bool rng) {
    ForwardState s;
    if (rng) s.rng = rng_state();
    for (const Tensor& t : inputs) {
      if (!t.defined()) continue;
      const Device d = t.device();
      bool seen = false;
      for (const auto& [dev, st] : s.streams) seen = seen || dev == d;
      if (!seen) s.streams.emplace_back(d, current_stream(d));
    }
    for (DeviceType type : {DeviceType::kCpu, DeviceType::kSim, DeviceType::kCuda}) {
      s.amp.push_back({type, is_autocast_enabled(type), autocast_dtype(type)});
    }
    return s;
  }
};

// Runs fn as the forward ran it: its streams current, its autocast state, its random state
// (the caller's is put back afterwards), grad mode on.
class Replay {
 public:
  Replay(const ForwardState& f, bool rng)
      : rng_(rng), caller_rng_(rng_state()), was_recomputing_(t_recomputing) {
    t_recomputing = true;
    for (const auto& [d, s] : f.streams) streams_.emplace_back(std::make_unique<StreamGuard>(s));
    for (const ForwardState::Amp& a : f.amp) {
      amp_.emplace_back(std::make_unique<AutocastGuard>(a.type, a.dtype, a.enabled));
    }
    if (rng_) set_rng_state(f.rng);
  }
  ~Replay() {
    if (rng_) set_rng_state(caller_rng_);
    t_recomputing = was_recomputing_;
  }

 private:
  bool rng_;
  RngState caller_rng_;
  bool was_recomputing_;
  GradModeGuard grad_{true};
  std::vector<std::unique_ptr<StreamGuard>> streams_;
  std::vector<std::unique_ptr<AutocastGuard>> amp_;
};

TensorList detached_inputs(const TensorList& inputs) {
  TensorList in;
  for (const Tensor& t : inputs) {
    if (!t.defined()) {
      in.push_back(t);
      continue;
    }
    Tensor d = t.detach();
    if (t.requires_grad()) d.requires_grad_();
    in.push_back(d);
  }
  return in;
}

void check_versions(const TensorList& inputs, const std::vector<uint32_t>& versions) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    SG_CHECK(inputs[i].version() == versions[i], Error, "checkpoint: input ", i, " (",
             inputs[i].describe(), ") was modified in place after the forward (version ",
             versions[i], ", now ", inputs[i].version(), "), so recomputing would give other "
             "values; clone it before changing it, or change it after backward");
  }
}

struct StopRecompute {};

// One non-reentrant checkpoint call: what forward saved (only its place), what the
// recomputation brought back.
struct Frame {
  CheckpointFn fn;
  // Its inputs: held, or, when it runs inside another checkpoint, saved to that one (its
  // hooks pack them), so that the outer checkpoint's memory stays free of them and the
  // recomputation here first has the outer one recompute them.
  TensorList inputs;  // held
  std::vector<uint32_t> versions;
  std::shared_ptr<const SavedTensorsHookPair> outer;  // set when saved to the outer one
  std::vector<std::optional<std::any>> parked;        // what outer->pack returned
  std::vector<bool> requires_grad;
  ForwardState state;
  CheckpointOptions options;

  struct Saved {
    Shape sizes;
    DType dtype = DType::kFloat32;
    std::optional<Stream> stream;  // the saving op's, in forward
    Tensor value;                  // recomputed, until its node takes it
    Event ready;                   // recorded on the stream that made `value`
    bool recomputed = false;
  };
  std::mutex mu;
  std::vector<Saved> saved;  // in save order

  Tensor unpack(size_t index);
  void recompute();
  TensorList inputs_again();
};

TensorList Frame::inputs_again() {
  if (!outer) {
    check_versions(inputs, versions);
    return detached_inputs(inputs);
  }
  TensorList in(parked.size());
  for (size_t i = 0; i < parked.size(); ++i) {
    if (!parked[i]) continue;  // undefined
    in[i] = outer->unpack(*parked[i]).detach();
    if (requires_grad[i]) in[i].requires_grad_();
  }
  return in;
}

void Frame::recompute() {
  for (Saved& s : saved) s.recomputed = false;
  size_t seen = 0;
  {
    Replay replay(state, options.preserve_rng_state);
    // Before this recomputation's hooks: an outer checkpoint may have to recompute them,
    // and it does so on the streams this one runs on.
    const TensorList in = inputs_again();
    FrameHooks keep(
        [this, &seen](const Tensor& t, const SavedTensorInfo& info) -> std::any {
          const size_t i = seen++;
          if (i < saved.size()) {
            Saved& s = saved[i];
            SG_CHECK(t.sizes() == s.sizes && t.dtype() == s.dtype, Error,
                     "checkpoint: the recomputation saved ", t.describe(), " as tensor ", i,
                     " where the forward saved ", dtype_name(s.dtype), describe_shape(s.sizes),
                     "; the checkpointed function must do the same work each time");
            SG_CHECK(!s.stream || *s.stream == info.stream, Error, "checkpoint: tensor ", i,
                     " was saved on ", s.stream->str(), " in the forward but on ",
                     info.stream.str(), " in the recomputation; the function must choose its "
                     "streams the same way each time");
            s.value = t;
            if (!t.device().is_cpu()) s.ready.record(info.stream);
            s.recomputed = true;
          }
          if (options.early_stop && seen == saved.size()) throw StopRecompute{};
          return std::any();
        },
        [](const std::any&) -> Tensor {
          throw Error("checkpoint: a tensor saved during the recomputation was unpacked; "
                      "the recomputation's own graph is never differentiated");
        });
    try {
      fn(in);
    } catch (const StopRecompute&) {
    }
  }
  SG_CHECK(seen >= saved.size(), Error, "checkpoint: the recomputation saved ", seen,
           " tensors for backward where the forward saved ", saved.size(),
           "; the checkpointed function must do the same work each time");
}

Tensor Frame::unpack(size_t index) {
  std::lock_guard<std::mutex> lk(mu);  // two device workers: one recomputation
  if (!saved[index].recomputed) recompute();
  Saved& s = saved[index];
  Tensor out = std::move(s.value);
  s.value = Tensor();
  s.recomputed = false;  // taken: a second backward (retain_graph) recomputes
  if (!out.device().is_cpu()) {
    const Stream node = current_stream(out.device());  // the unpacking node's (S2)
    s.ready.block(node);
    out.storage().record_stream(node);
  }
  return out;
}

TensorList non_reentrant(const CheckpointFn& fn, const TensorList& inputs,
                         const CheckpointOptions& options) {
  auto frame = std::make_shared<Frame>();
  frame->fn = fn;
  frame->state = ForwardState::capture(inputs, options.preserve_rng_state);
  frame->options = options;
  std::shared_ptr<const SavedTensorsHookPair> outer = detail::current_saved_tensors_hooks();
  if (grad_mode_enabled() && outer != nullptr && outer.get() == t_checkpoint_hooks) {
    // Inside another checkpoint's forward or recomputation: the inputs are saved to it, as
    // the ops before this call save theirs (the same count each time it runs).
    NoGradGuard no_grad;
    for (const Tensor& t : inputs) {
      frame->requires_grad.push_back(t.defined() && t.requires_grad());
      if (!t.defined()) {
        frame->parked.emplace_back();
        continue;
      }
      const std::shared_ptr<Node> producer = t.grad_fn();
      const SavedTensorInfo info{current_stream(t.device()), producer.get(), t.requires_grad()};
      frame->parked.push_back(outer->pack(t.detach(), info));
    }
    frame->outer = std::move(outer);
  } else {
    frame->inputs = inputs;
    for (const Tensor& t : inputs) frame->versions.push_back(t.defined() ? t.version() : 0);
  }
  FrameHooks drop(
      [frame](const Tensor& t, const SavedTensorInfo& info) -> std::any {
        Frame::Saved s;
        s.sizes = t.sizes();
        s.dtype = t.dtype();
        if (!t.device().is_cpu()) s.stream = info.stream;
        frame->saved.push_back(std::move(s));
        return std::make_pair(frame, frame->saved.size() - 1);
      },
      [](const std::any& packed) {
        const auto& [f, i] = std::any_cast<const std::pair<std::shared_ptr<Frame>, size_t>&>(packed);
        return f->unpack(i);
      });
  return fn(inputs);
}

TensorList reentrant(const CheckpointFn& fn, const TensorList& inputs,
                     const CheckpointOptions& options) {
  bool any = false;
  for (const Tensor& t : inputs) any = any || (t.defined() && t.requires_grad());
  if (!any && grad_mode_enabled()) {
    SG_WARN("checkpoint(use_reentrant=true): no input requires grad, so the output has no "
            "history and nothing inside the function (its parameters included) gets a "
            "gradient; pass an input that requires grad, or use_reentrant=false");
  }
  auto state = std::make_shared<ForwardState>(
      ForwardState::capture(inputs, options.preserve_rng_state));
  auto versions = std::make_shared<std::vector<uint32_t>>();
  for (const Tensor& t : inputs) versions->push_back(t.defined() ? t.version() : 0);
  const bool rng = options.preserve_rng_state;
  return apply_function(
      "CheckpointFunction", inputs,
      [fn](FunctionCtx& ctx, const TensorList& in) {
        ctx.save_for_backward(in);
        TensorList out = fn(in);  // runs under no_grad (apply_function's forward)
        for (Tensor& o : out) o = o.detach();
        return out;
      },
      [fn, state, versions, rng](FunctionCtx& ctx, const TensorList& grads) {
        const TensorList saved = ctx.saved_tensors();
        check_versions(saved, *versions);
        TensorList in = detached_inputs(saved);
        TensorList out;
        {
          Replay replay(*state, rng);
          out = fn(in);
        }
        TensorList roots, seeds;
        for (size_t i = 0; i < out.size() && i < grads.size(); ++i) {
          if (out[i].requires_grad() && grads[i].defined()) {
            roots.push_back(out[i]);
            seeds.push_back(grads[i]);
          }
        }
        // A backward, not grad(): the parameters fn uses get their .grad, as in the forward
        // that was not checkpointed; the inputs' gradients are read off their copies.
        if (!roots.empty()) backward(roots, seeds);
        TensorList result(in.size());
        for (size_t i = 0; i < in.size(); ++i) {
          if (in[i].defined() && in[i].requires_grad()) result[i] = in[i].grad();
        }
        return result;
      });
}

}  // namespace

bool recomputing() { return t_recomputing; }

TensorList checkpoint(const CheckpointFn& fn, const TensorList& inputs,
                      const CheckpointOptions& options) {
  SG_CHECK(fn != nullptr, ValueError, "checkpoint: no function to run");
  return options.use_reentrant ? reentrant(fn, inputs, options)
                               : non_reentrant(fn, inputs, options);
}

Tensor checkpoint_sequential(const Sequential& seq, int segments, const Tensor& input,
                             const CheckpointOptions& options) {
  const int n = static_cast<int>(seq.size());
  SG_CHECK(segments >= 1 && segments <= std::max(n, 1), ValueError,
           "checkpoint_sequential: segments must be from 1 to the number of modules (", n,
           "), got ", segments);
  // As the reference: segments - 1 parts of n / segments modules each are checkpointed,
  // the rest runs as usual (its saved tensors are needed first in backward anyway).
  const int per = n / segments;
  Tensor x = input;
  int start = 0;
  for (int part = 0; part + 1 < segments; ++part, start += per) {
    const int end = start + per;
    x = checkpoint(
        [&seq, start, end](const TensorList& in) {
          Tensor h = in[0];
          for (int i = start; i < end; ++i) h = seq[static_cast<size_t>(i)]->forward(h);
          return TensorList{h};
        },
        {x}, options)[0];
  }
  for (int i = start; i < n; ++i) x = seq[static_cast<size_t>(i)]->forward(x);
  return x;
}

}  // namespace nn
}  // namespace streamgrad
