// Evaluation of one node of a graph task (internal to engine/): what the executor
// (engine.cc) does with each task it takes from a ready queue. Three steps:
//
//   prepare  skip nodes the task does not need (grad() / inputs= pruning); wait on the
//            ready events of the node's input gradients (S4); make the node's stream
//            current (S2), grad mode as create_graph asks, autocast suspended
//   call     the node's pre hooks (tensor hooks of non-leaf tensors), capturing the
//            gradients grad() asked for, then apply() with the node held (a node never
//            runs concurrently with itself, nor re-entered on its own chain)
//   route    validate the results against the next nodes' input metadata, anomaly
//            checks, free saved tensors (no retain_graph), then hand each result to the
//            next node's input buffer and queue every node whose dependencies are met
//
// Thread-safety: called by the thread that runs the node (a device worker, or the thread
// that called backward for cpu nodes); the graph task's shared state is taken under its
// mutex. Failure: throws what the node, its hooks or the checks throw; the executor
// records it in the graph task.
#ifndef STREAMGRAD_ENGINE_EVALUATE_H_
#define STREAMGRAD_ENGINE_EVALUATE_H_

#include <memory>

#include "engine/graph_task.h"

namespace streamgrad {

void evaluate_function(GraphTask& gt, const std::shared_ptr<Node>& fn, InputBuffer&& inputs);

// Provided by the executor (engine.cc): the queue `node` runs from (its device's worker,
// or the task's owner for cpu nodes), and the reentrant chain this thread serves.
ReadyQueue& queue_for(GraphTask& gt, const Node& node);
const void* current_chain();

}  // namespace streamgrad

#endif  // STREAMGRAD_ENGINE_EVALUATE_H_
