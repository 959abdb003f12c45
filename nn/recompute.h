// Activation checkpointing: run part of forward without keeping what it saves for
// backward, and recompute it when backward needs it (the reference framework's
// torch.utils.checkpoint.checkpoint and checkpoint_sequential).
//
//   Tensor h = nn::checkpoint([&](const TensorList& in) { return TensorList{block->forward(in[0])}; },
//                             {x})[0];
//   Tensor y = nn::checkpoint_sequential(*seq, /*segments=*/2, x);
//
// `fn` is kept (a copy) and called again in backward, after checkpoint() returned: what it
// captures must still be there then (capture by value, or objects that outlive backward).
//
// Non-reentrant (the default, use_reentrant = false): forward runs `fn` recording the graph
// as usual, but every tensor saved inside it is dropped (saved-tensor hooks keep only its
// place); the first backward node that needs one of them runs `fn` again on the same
// inputs, keeps the tensors it saves, and stops as soon as it has them all (early_stop).
// Reentrant (use_reentrant = true): forward runs `fn` without recording a graph; backward
// runs it again with the graph and differentiates through it (a backward inside a node).
//
// Streams: the recomputation runs with the current streams the forward had (one per
// device of the inputs), so each op runs on the stream it ran on in forward (an fn that
// switches streams itself does so again); it is checked, and a difference is an Error.
// Each recomputed tensor reaches the node that needs it through an event of the stream
// that made it, and is handed to that node's stream (record_stream): never a host
// synchronisation. Two device workers unpacking at once share one recomputation.
// The random generator's state (preserve_rng_state) and autocast's state are those of the
// forward during the recomputation, so dropout masks and dtypes are the same.
//
// Thread-safety: as the modules fn runs; the recomputation itself is serialised per call.
// Failure: Error when an input was modified in place since the forward, when the
// recomputation saves tensors of other shapes, or fewer, than the forward did (fn must do
// the same work each time), and when a recomputed op runs on another stream than in the
// forward; whatever fn throws.
//
// Nesting: fn may call checkpoint again, of either kind. A tensor saved inside the inner
// call belongs to the inner checkpoint alone; the inner call's inputs are saved to the
// outer one (non-reentrant in non-reentrant: the outer's graph keeps neither). So the
// first tensor backward needs from the inner part has the outer checkpoint recompute up
// to the inner call (or all of fn, without early stop), then the inner one recompute its
// part: each level runs again once per backward, on its forward's streams.
//
// Modules that keep running statistics do not update them again while their forward is
// recomputed (recomputing() says when): BatchNorm2d's running mean, variance and batch
// count move once per training forward, checkpointed or not. (The reference framework
// updates them twice, a known pitfall of checkpointing batch-normalised networks; the
// recomputation's outputs are the same either way, since training-mode batch norm
// normalises with the batch's own statistics.)
#ifndef STREAMGRAD_NN_RECOMPUTE_H_
#define STREAMGRAD_NN_RECOMPUTE_H_

#include <functional>

#include "engine/function.h"
#include "nn/layers.h"

namespace streamgrad {
namespace nn {

using CheckpointFn = std::function<TensorList(const TensorList&)>;

struct CheckpointOptions {
  bool use_reentrant = false;
  bool preserve_rng_state = true;
  // Non-reentrant: stop the recomputation once every tensor backward needs is back.
  bool early_stop = true;
};

TensorList checkpoint(const CheckpointFn& fn, const TensorList& inputs,
                      const CheckpointOptions& options = {});

// True while this thread runs a checkpointed function again for backward.
bool recomputing();

// Runs `seq` in `segments` parts of size(seq) / segments modules, each but the last under
// checkpoint; the last part also takes the modules left over.
Tensor checkpoint_sequential(const Sequential& seq, int segments, const Tensor& input,
                             const CheckpointOptions& options = {});

}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_RECOMPUTE_H_
