// backward() and grad(): run the autograd graph from some outputs back to the leaves.
//
//   loss.backward();                                   // .grad of every leaf
//   backward({y1, y2}, {g1, g2});                      // several roots, explicit seeds
//   TensorList dx = grad({loss}, {x}, {}, /*retain_graph=*/false, /*create_graph=*/true);
//
// Note [Backward stream semantics] (ARCHITECTURE.md §5; tests are tagged [S1]..[S9]):
//   S1 every op stamps its outputs with the current stream; a node's canonical stream is
//      the stamp of its first non-cpu output.
//   S2 a node's backward runs on its device's worker with that stream current; cpu nodes
//      run on the thread that called backward().
//   S3 each seed's producer stream is the caller's current stream on the seed's device when
//      backward()/grad() is called; implicit `ones` seeds are made on that stream.
//   S4 gradients crossing streams are ordered by ready events (input_buffer.h).
//   S5 AccumulateGrad writes .grad on its canonical stream (the stream of the leaf's first
//      use in the graph, where its accumulator is made).
//   S6 at the end, the caller's current stream of every device involved waits (device-side,
//      one event per distinct stream) for every stream where backward left a user-visible
//      result: .grad, returned gradients, hook side effects. The host is not synchronised.
//   S7 copies between devices are ops; their backward copies the gradient back.
//   S8 a gradient used on a stream other than its allocation stream is record_stream()ed.
//   S9 EngineOptions (grad_mode.h) can turn S3 and S6 off for the race reproducer.
//
// retain_graph defaults to false: saved tensors are freed as nodes run, and a second
// backward through the same graph throws. create_graph records the backward pass itself so
// that it can be differentiated again (and implies retain_graph).
// Thread-safety: several threads may run backward concurrently, on separate or shared
// graphs; accumulation into a shared leaf's .grad is exact. A backward may be started from
// inside a node's backward or a hook (reentrant backward).
// Failure: ValueError / Error for bad arguments (non-scalar output without a gradient,
// gradient of the wrong shape, dtype or device, outputs that do not require grad, unused
// inputs without allow_unused); the first exception raised by any node is rethrown here as
// streamgrad::Error naming the node, and the engine stays usable.
#ifndef STREAMGRAD_ENGINE_BACKWARD_H_
#define STREAMGRAD_ENGINE_BACKWARD_H_

#include <functional>

#include "engine/node.h"

namespace streamgrad {

void backward(const TensorList& tensors, const TensorList& grad_tensors = {},
              bool retain_graph = false, bool create_graph = false,
              const TensorList& inputs = {});

TensorList grad(const TensorList& outputs, const TensorList& inputs,
                const TensorList& grad_outputs = {}, bool retain_graph = false,
                bool create_graph = false, bool allow_unused = false);

// Runs `callback` once the current backward has finished (on the thread that called it,
// after S6, so with the caller's streams current). Only valid during a backward.
void queue_callback(std::function<void()> callback);

// The node that feeds the seeds into the graph; one producer stream per seed (S3).
class GraphRoot final : public Node {
 public:
  GraphRoot(std::vector<Edge> roots, TensorList seeds, std::vector<std::optional<Stream>> streams);
  std::string name() const override { return "GraphRoot"; }
  TensorList apply(TensorList&& grads) override;
  std::optional<Stream> output_stream(size_t i) const override { return streams_[i]; }

 private:
  TensorList seeds_;
  std::vector<std::optional<Stream>> streams_;
};

}  // namespace streamgrad

#endif  // STREAMGRAD_ENGINE_BACKWARD_H_
