#include "engine/backward.h"

#include <mutex>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "engine/accumulate_grad.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "engine/graph_task.h"
#include "runtime/backend/devices.h"
#include "runtime/backend/event.h"
#include "runtime/base/error.h"

namespace streamgrad {

GraphRoot::GraphRoot(std::vector<Edge> roots, TensorList seeds,
                     std::vector<std::optional<Stream>> streams)
    : seeds_(std::move(seeds)), streams_(std::move(streams)) {
  set_next_edges(std::move(roots));
}

TensorList GraphRoot::apply(TensorList&&) { return seeds_; }

namespace {

struct Roots {
  std::vector<Edge> edges;
  TensorList seeds;
  std::vector<std::optional<Stream>> streams;
};

// S3: each seed is produced on the caller's current stream of its device.
Roots make_roots(const TensorList& outputs, const TensorList& grad_outputs, const char* api) {
  SG_CHECK(!outputs.empty(), ValueError, api, ": no tensors to differentiate");
  SG_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), ValueError, api, ": ",
           outputs.size(), " tensors but ", grad_outputs.size(),
           " gradients; pass one gradient per tensor (or none)");
  const bool legacy = engine_options().legacy_seed_streams;
  Roots r;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    SG_CHECK(out.defined(), ValueError, api, ": tensor ", i, " is undefined");
    SG_CHECK(out.requires_grad(), Error, api, ": tensor ", i, " (", out.describe(),
             ") does not require grad and has no grad_fn; call requires_grad_() on the leaves "
             "before the forward pass, and do not run it under NoGradGuard");
    const Device d = out.device();
    Tensor g = grad_outputs.empty() ? Tensor() : grad_outputs[i];
    if (g.defined()) {
      SG_CHECK(g.sizes() == out.sizes() && g.dtype() == out.dtype() && g.device() == d,
               ValueError, api, ": gradient ", i, " is ", g.describe(), " but tensor ", i,
               " is ", out.describe(), "; pass a gradient of the same shape, dtype and device");
    } else {
      SG_CHECK(out.numel() == 1, ValueError, api,
               ": a gradient can be created implicitly only for a tensor of one element, but "
               "tensor ", i, " is ", out.describe(), "; pass its gradient explicitly");
      g = ones_like(out);  // on the caller's current stream of d
    }
    r.edges.push_back(gradient_edge(out));
    r.seeds.push_back(g);
    if (d.is_cpu()) {
      r.streams.emplace_back(std::nullopt);
    } else {
      r.streams.emplace_back(legacy ? Stream::default_for(d) : current_stream(d));
    }
  }
  return r;
}

// Counts, for every node reachable from root, how many edges point at it; returns the
// devices of the nodes' streams.
std::set<Device> count_dependencies(GraphTask& gt, Node* root) {
  std::set<Device> devices;
  std::vector<Node*> stack{root};
  std::lock_guard<std::mutex> lk(gt.mu);
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (n->stream()) devices.insert(n->stream()->device());
    for (const Edge& e : n->next_edges()) {
      if (!e.valid()) continue;
      // The first edge into a node finds it: the root has none, the graph being acyclic.
      if (++gt.dependencies[e.function.get()] == 1) stack.push_back(e.function.get());
    }
  }
  return devices;
}

// Marks which nodes must run so that every capture and run target is reached (grad() and
// backward(inputs=) prune the graph).
void compute_exec_info(GraphTask& gt, Node* root, const std::vector<Edge>& captures,
                       const std::unordered_set<Node*>& run_targets) {
  for (size_t i = 0; i < captures.size(); ++i) {
    if (!captures[i].valid()) continue;
    gt.exec_info[captures[i].function.get()].captures.emplace_back(captures[i].input_nr, i);
  }
  for (Node* t : run_targets) gt.exec_info[t].needed = true;
  // Iterative post-order: a node is needed if any successor is needed or captured.
  std::vector<std::pair<Node*, size_t>> stack{{root, 0}};
  std::unordered_set<Node*> seen{root};
  while (!stack.empty()) {
    auto& [n, next] = stack.back();
    if (next < n->num_outputs()) {
      const Edge& e = n->next_edge(next++);
      if (e.valid() && seen.insert(e.function.get()).second) stack.emplace_back(e.function.get(), 0);
      continue;
    }
    bool needed = false;
    for (const Edge& e : n->next_edges()) {
      if (!e.valid()) continue;
      auto it = gt.exec_info.find(e.function.get());
      if (it != gt.exec_info.end() && (it->second.needed || !it->second.captures.empty())) {
        needed = true;
      }
    }
    if (needed) gt.exec_info[n].needed = true;
    stack.pop_back();
  }
  gt.exec_info[root].needed = true;
}

// Runs the callbacks queued during backward, in order, including those that callbacks
// queue themselves (they run in this same backward, as in the reference framework).
void run_final_callbacks(GraphTask& gt) {
  CurrentGraphTaskScope in_task(&gt);
  for (size_t i = 0;; ++i) {
    std::function<void()> cb;
    {
      std::lock_guard<std::mutex> lk(gt.mu);
      if (i >= gt.final_callbacks.size()) break;
      cb = std::move(gt.final_callbacks[i]);
    }
    const char* kContext = "error in a callback queued during backward (queue_callback): ";
    try {
      cb();
    } catch (const Error& e) {
      e.rethrower()(absl::StrCat(kContext, e.what()));
    } catch (const std::exception& e) {
      throw Error(absl::StrCat(kContext, e.what()));
    }
  }
}

TensorList run(const Roots& roots, bool keep_graph, bool create_graph,
               const std::vector<Edge>& captures, const std::unordered_set<Node*>& run_targets) {
  auto gt = std::make_shared<GraphTask>();
  gt->keep_graph = keep_graph;
  gt->create_graph = create_graph;
  gt->owner_queue = queue_for_new_task(&gt->reentrant_depth);
  if (GraphTask* parent = current_graph_task()) {  // a backward inside a backward
    gt->parent = parent->shared_from_this();
    std::lock_guard<std::mutex> lk(parent->mu);
    parent->children.push_back(gt);
    if (parent->aborted()) gt->cancelled.store(true);
  }
  auto root = std::make_shared<GraphRoot>(roots.edges, roots.seeds, roots.streams);
  std::set<Device> devices = count_dependencies(*gt, root.get());
  for (const auto& s : roots.streams) {
    if (s) devices.insert(s->device());
  }
  if (!captures.empty() || !run_targets.empty()) {
    compute_exec_info(*gt, root.get(), captures, run_targets);
  }
  {
    std::lock_guard<std::mutex> lk(gt->mu);
    gt->captured.resize(captures.size());
  }
  const bool legacy_leaf_sync = engine_options().legacy_leaf_sync;
  for (const Device& d : devices) {
    gt->caller_streams.push_back(legacy_leaf_sync ? Stream::default_for(d) : current_stream(d));
  }

  execute_graph(gt, root);

  std::unique_lock<std::mutex> lk(gt->mu);
  // S6: one event per distinct result stream; every caller stream waits on it.
  for (const Stream& result : gt->result_streams) {
    Event e;
    bool recorded = false;
    for (const Stream& caller : gt->caller_streams) {
      if (caller == result || caller.device().type() != result.device().type()) continue;
      if (!recorded) {
        e.record(result);
        recorded = true;
      }
      e.block(caller);
    }
  }
  for (const Tensor& g : gt->captured) {  // S8: returned gradients are used by the caller
    if (g.defined() && !g.device().is_cpu() && g.storage().stream() != current_stream(g.device())) {
      g.storage().record_stream(current_stream(g.device()));
    }
  }
  TensorList captured = std::move(gt->captured);
  lk.unlock();
  run_final_callbacks(*gt);
  return captured;
}

}  // namespace

void backward(const TensorList& tensors, const TensorList& grad_tensors, bool retain_graph,
              bool create_graph, const TensorList& inputs) {
  const Roots roots = make_roots(tensors, grad_tensors, "backward");
  std::vector<Edge> captures;
  std::unordered_set<Node*> run_targets;
  std::vector<size_t> captured_inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    SG_CHECK(x.defined() && x.requires_grad(), ValueError, "backward: inputs[", i, "] (",
             x.describe(), ") does not require grad");
    if (x.is_leaf()) {
      run_targets.insert(grad_accumulator(x).get());
    } else {
      captures.push_back(gradient_edge(x));
      captured_inputs.push_back(i);
    }
  }
  if (!inputs.empty() && run_targets.empty() && captures.empty()) return;
  std::vector<std::shared_ptr<Node>> keep_alive;  // run targets must outlive the call
  for (const Tensor& x : inputs) {
    if (x.is_leaf()) keep_alive.push_back(grad_accumulator(x));
  }
  const TensorList got = run(roots, retain_graph || create_graph, create_graph, captures,
                             run_targets);
  for (size_t k = 0; k < captured_inputs.size(); ++k) {  // non-leaf inputs= get .grad too
    if (!got[k].defined()) continue;
    const Tensor& x = inputs[captured_inputs[k]];
    Tensor old;  // read directly: grad() warns about non-leaf reads, this one is intended
    {
      AutogradMeta& meta = x.autograd_meta();
      std::lock_guard<std::mutex> lk(meta.mu);
      old = meta.grad;
    }
    x.set_grad(old.defined() ? engine_add()(old, got[k]) : got[k]);
  }
}

TensorList grad(const TensorList& outputs, const TensorList& inputs,
                const TensorList& grad_outputs, bool retain_graph, bool create_graph,
                bool allow_unused) {
  const Roots roots = make_roots(outputs, grad_outputs, "grad");
  SG_CHECK(!inputs.empty(), ValueError, "grad: no inputs to differentiate with respect to");
  std::vector<Edge> captures;
  for (size_t i = 0; i < inputs.size(); ++i) {
    SG_CHECK(inputs[i].defined() && inputs[i].requires_grad(), ValueError, "grad: inputs[", i,
             "] (", inputs[i].describe(), ") does not require grad");
    captures.push_back(gradient_edge(inputs[i]));
  }
  TensorList got = run(roots, retain_graph || create_graph, create_graph, captures, {});
  for (size_t i = 0; i < got.size(); ++i) {
    SG_CHECK(got[i].defined() || allow_unused, Error, "grad: inputs[", i, "] (",
             inputs[i].describe(),
             ") was not used in computing the outputs; pass allow_unused=true to get an "
             "undefined gradient for it instead");
  }
  return got;
}

void queue_callback(std::function<void()> callback) {
  GraphTask* gt = current_graph_task();
  SG_CHECK(gt != nullptr, Error,
           "queue_callback: no backward is running on this thread; call it from a backward "
           "function or a hook");
  std::lock_guard<std::mutex> lk(gt->mu);
  gt->final_callbacks.push_back(std::move(callback));
}

}  // namespace streamgrad
