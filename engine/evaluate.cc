#include "engine/evaluate.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "engine/autocast.h"
#include "engine/grad_mode.h"
#include "engine/output_checks.h"
#include "runtime/backend/guard.h"
#include "runtime/backend/launch.h"
#include "runtime/base/error.h"
#include "runtime/base/warning.h"

namespace streamgrad {
namespace {

// Marks a node as running on this chain. A nested backward on the same chain that reaches
// the node again would wait for the node's own lock forever: it is an error instead.
class HeldNode {
 public:
  explicit HeldNode(Node& fn) : fn_(fn) {
    SG_CHECK(fn.running_on().load() != current_chain(), Error, fn.name(),
             ": a backward started inside this node's backward (or one of its hooks) reached "
             "the node again; a graph cannot be differentiated through a node while that "
             "node's backward is running. Differentiate a separate graph (detach() the "
             "tensors you start from) instead");
    lock_ = std::unique_lock<std::mutex>(fn.mutex());  // never concurrently with itself
    fn.running_on().store(current_chain());
  }
  ~HeldNode() { fn_.running_on().store(nullptr); }
  HeldNode(const HeldNode&) = delete;
  HeldNode& operator=(const HeldNode&) = delete;

 private:
  Node& fn_;
  std::unique_lock<std::mutex> lock_;
};

// What a node runs under, for the length of its evaluation (prepare's guards).
struct NodeScope {
  NodeScope(const std::optional<Stream>& stream, bool create_graph) : grad_mode(create_graph) {
    if (stream) on_stream.emplace(*stream);  // S2
  }
  std::optional<StreamGuard> on_stream;
  GradModeGuard grad_mode;
  // Backward never autocasts: nodes compute in the dtypes their forward chose, also when
  // backward() is called inside an AutocastGuard on a thread that runs nodes itself.
  autocast_internal::Suspend no_autocast;
};

// The task's plan for `fn`: null for "run it" (no pruning), else its ExecInfo; `skip`
// when the task needs nothing from it.
const GraphTask::ExecInfo* exec_info_of(const GraphTask& gt, const Node& fn, bool* skip) {
  *skip = false;
  if (gt.exec_info.empty()) return nullptr;
  auto it = gt.exec_info.find(const_cast<Node*>(&fn));
  if (it == gt.exec_info.end() || (!it->second.needed && it->second.captures.empty())) {
    *skip = true;
    return nullptr;
  }
  return &it->second;
}

// S5: a leaf whose gradient comes from another stream than its accumulator's pays a wait
// on every backward; say so, with what to do.
void warn_cross_stream_leaf(const Node& fn, const InputBuffer& inputs) {
  const Tensor* leaf = fn.accumulated_leaf();
  const std::optional<Stream>& stream = fn.stream();
  if (leaf == nullptr || !stream || inputs.size() != 1) return;
  const std::optional<Stream>& producer = inputs.value_stream(0);
  if (producer && *producer != *stream && producer->device() == stream->device()) {
    SG_WARN("the gradient of leaf ", leaf->describe(), " was produced on ", producer->str(),
            " but accumulates into .grad on ", stream->str(),
            ", the stream of its first use in this graph (S5): every backward pays a "
            "cross-stream wait for it. Use the leaf first on the stream that produces its "
            "gradient");
  }
}

// A captured gradient (grad(), or backward(inputs=) of a non-leaf) leaves the engine here,
// after the hooks the tensor would see: its grad_fn's pre hooks, or a leaf's own hooks.
void capture(GraphTask& gt, Node& fn, const GraphTask::ExecInfo& info, TensorList& grads,
             const std::vector<std::optional<Stream>>& written) {
  if (fn.accumulated_leaf() != nullptr) fn.run_tensor_hooks(grads[0]);
  std::lock_guard<std::mutex> lk(gt.mu);
  for (const auto& [slot, index] : info.captures) {
    gt.captured[index] = grads[slot];
    if (!grads[slot].defined()) continue;
    // S6: the caller's streams wait for the streams that wrote the captured gradient.
    if (written[slot]) gt.result_streams.insert(*written[slot]);
    if (fn.stream()) gt.result_streams.insert(*fn.stream());
  }
}

// call: pre hooks, captures, then apply() with the node held. Returns false when the
// node only captured (the task needs nothing downstream of it).
bool call(GraphTask& gt, Node& fn, const GraphTask::ExecInfo* info, InputBuffer& inputs,
          TensorList* outputs) {
  std::vector<std::optional<Stream>> written;
  for (size_t i = 0; info != nullptr && i < inputs.size(); ++i) {
    written.push_back(inputs.value_stream(i));
  }
  TensorList grads = inputs.take();
  // Observers (sanitizer, trace) name the node each kernel ran for; free without them.
  std::optional<LaunchScope> scope;
  if (detail::have_observers()) scope.emplace(fn.name());
  // Tensor hooks run before the node is held: only apply() is serialised, so a hook may
  // itself differentiate through this node (as in the reference framework).
  if (fn.has_pre_hooks()) fn.run_pre_hooks(grads);
  if (info != nullptr && !info->captures.empty()) {
    capture(gt, fn, *info, grads, written);
    // Capturing does not cut the graph: a node on the way to another requested input
    // still runs (with the gradient its hooks made, hooks not run twice).
    if (!info->needed) return false;
  }
  HeldNode held(fn);
  const bool none = !grads.empty() && std::none_of(grads.begin(), grads.end(),
                                                   [](const Tensor& g) { return g.defined(); });
  if (none && !fn.apply_without_gradients()) {
    outputs->resize(fn.num_outputs());  // no gradient in, none out
  } else {
    *outputs = fn.apply(std::move(grads));
  }
  return true;
}

// route: checks, then each result to its next node; nodes whose inputs are complete are
// queued.
void route(GraphTask& gt, Node& fn, TensorList&& outputs) {
  if (outputs.empty() && fn.num_outputs() == 0) {
    if (!gt.keep_graph) fn.release_variables();
    return;
  }
  MovedTo moved_to;
  validate_outputs(fn, outputs, &moved_to);
  if (anomaly_mode_enabled()) check_anomaly(fn, outputs);
  if (!gt.keep_graph) fn.release_variables();

  std::lock_guard<std::mutex> lk(gt.mu);
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Edge& e = fn.next_edge(i);
    if (!e.valid()) continue;
    Node* next = e.function.get();
    auto dep = gt.dependencies.find(next);
    SG_INTERNAL_CHECK(dep != gt.dependencies.end(), "dependency of ", next->name(), " missing");
    const bool ready = --dep->second == 0;
    auto buf = gt.not_ready.try_emplace(next, next->num_inputs()).first;
    buf->second.add(e.input_nr, std::move(outputs[i]),
                    moved_to[i] ? moved_to[i] : fn.output_stream(i), next->stream());
    if (ready) {
      gt.outstanding.fetch_add(1);
      queue_for(gt, *next).push(
          NodeTask{gt.weak_from_this(), e.function, std::move(buf->second), gt.reentrant_depth});
      gt.not_ready.erase(buf);
    }
  }
}

}  // namespace

void evaluate_function(GraphTask& gt, const std::shared_ptr<Node>& fn, InputBuffer&& inputs) {
  // prepare
  bool skip = false;
  const GraphTask::ExecInfo* info = exec_info_of(gt, *fn, &skip);
  if (skip) return;
  const std::optional<Stream>& stream = fn->stream();
  inputs.wait_ready(stream);  // S4: right before the consumer runs
  NodeScope scope(stream, gt.create_graph);
  warn_cross_stream_leaf(*fn, inputs);
  // call
  TensorList outputs;
  if (!call(gt, *fn, info, inputs, &outputs)) return;
  const bool visible = fn->has_pre_hooks() || fn->accumulated_leaf() != nullptr;
  if (visible && stream) {  // S5/S6: .grad and hook side effects live on this stream
    std::lock_guard<std::mutex> lk(gt.mu);
    gt.result_streams.insert(*stream);
  }
  // route
  route(gt, *fn, std::move(outputs));
}

}  // namespace streamgrad
