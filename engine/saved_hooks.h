// Saved-tensor hooks: what happens to the tensors a forward op saves for backward (the
// reference framework's torch.autograd.graph.saved_tensors_hooks).
//
//   {
//     SavedTensorsHooks hooks(
//         [](const Tensor& t) -> std::any { return to(t, Device("cpu")); },   // at save
//         [](const std::any& p) { return to(std::any_cast<Tensor>(p), dev); });  // in backward
//     loss = model.forward(x);   // every tensor saved for backward goes through pack
//   }
//   loss.backward();              // ... and comes back through unpack, when a node needs it
//
// While a SavedTensorsHooks guard lives on a thread, every tensor an op saves for backward
// on that thread is handed to its pack hook at once, and the op keeps only what pack
// returned (the tensor's memory goes back to the allocator unless pack kept it). When a
// backward node needs the tensor, the unpack hook gets that value back and returns a
// tensor equal to the one pack saw. Guards nest: the innermost pair applies. Hooks stay
// with the graph: a backward run after the guard is gone still calls the unpack hook of
// the pair in force at save time.
//
// Streams: pack runs on the forward thread inside the op, with the op's stream current
// (SavedTensorInfo::stream); the tensor's value is ready in that stream's order. unpack
// runs inside the backward node, with the node's stream current (S2): work unpack
// enqueues on the current stream is ordered before the node's use of the result; work on
// any other stream must be made to reach the current one with an event.
//
// The tensor pack receives has no history (grad_fn, requires_grad); the unpacked tensor
// gets the saved tensor's history back, so double backward works through hooks. pack runs
// with grad mode off and must not modify its input in place.
//
// Thread-safety: the hook stack is per thread, as grad mode is. Hooks may run on backward
// worker threads (unpack), possibly two at once for different nodes, and must be safe to
// call so. Failure: a pack hook that modifies its input in place, an unpack hook that
// returns an undefined tensor or one of another shape, dtype or device, and pushing hooks
// inside a DisableSavedTensorsHooks scope all throw Error naming what to change; an
// exception from a hook propagates from the op (pack) or from backward (unpack).
#ifndef STREAMGRAD_ENGINE_SAVED_HOOKS_H_
#define STREAMGRAD_ENGINE_SAVED_HOOKS_H_

#include <any>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "engine/tensor.h"

namespace streamgrad {

class Node;

// What a pack hook may want to know of the tensor beyond its value.
struct SavedTensorInfo {
  // The stream of the op that saves the tensor (its device's current stream then): the
  // value is complete in this stream's order.
  Stream stream;
  // The node that produced the tensor (its grad_fn at save), or null for a leaf or a
  // tensor without history. Valid during the call only.
  const Node* producer;
  // The name of the node that saves it is not known yet when pack runs; whether the
  // tensor requires grad is.
  bool requires_grad;
};

using PackHook = std::function<std::any(const Tensor&, const SavedTensorInfo&)>;
using SimplePackHook = std::function<std::any(const Tensor&)>;
using UnpackHook = std::function<Tensor(const std::any&)>;

// The pair a tensor was saved with, shared by every tensor saved under it.
struct SavedTensorsHookPair {
  PackHook pack;
  UnpackHook unpack;
};

// Pushes (pack, unpack) for this thread; pops it when destroyed. Destroy in reverse order
// of creation (scopes do).
class SavedTensorsHooks {
 public:
  SavedTensorsHooks(PackHook pack, UnpackHook unpack);
  SavedTensorsHooks(SimplePackHook pack, UnpackHook unpack);
  ~SavedTensorsHooks();
  SavedTensorsHooks(const SavedTensorsHooks&) = delete;
  SavedTensorsHooks& operator=(const SavedTensorsHooks&) = delete;
};

// Inside its scope, creating a SavedTensorsHooks throws Error(error_message): for code
// whose saved tensors must stay on the device (the reference's
// disable_saved_tensors_hooks). Hooks pushed before it still apply.
class DisableSavedTensorsHooks {
 public:
  explicit DisableSavedTensorsHooks(std::string error_message);
  ~DisableSavedTensorsHooks();
  DisableSavedTensorsHooks(const DisableSavedTensorsHooks&) = delete;
  DisableSavedTensorsHooks& operator=(const DisableSavedTensorsHooks&) = delete;

 private:
  std::optional<std::string> previous_;
};

namespace detail {
// The innermost pair on this thread, or null.
std::shared_ptr<const SavedTensorsHookPair> current_saved_tensors_hooks();
}  // namespace detail

}  // namespace streamgrad

#endif  // STREAMGRAD_ENGINE_SAVED_HOOKS_H_
