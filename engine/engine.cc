// Execution of graph tasks: device workers, the ready-queue loop, and evaluation of one
// node with the stream rules. See Note [Backward stream semantics] in backward.h.
#include <algorithm>
#include <array>
#include <optional>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/accumulate_grad.h"
#include "engine/autocast.h"
#include "engine/grad_mode.h"
#include "engine/graph_task.h"
#include "engine/output_checks.h"
#include "runtime/error.h"
#include "runtime/guard.h"
#include "runtime/launch.h"
#include "runtime/warning.h"

namespace streamgrad {
namespace {

// Set on device worker threads: their own queue; a backward started there runs its loop
// on this queue so that the worker keeps serving its device (reentrant backward).
thread_local ReadyQueue* t_worker_queue = nullptr;
thread_local std::shared_ptr<ReadyQueue> t_worker_queue_owner;
thread_local int t_reentrant_depth = 0;
thread_local GraphTask* t_current_graph_task = nullptr;
// Graph tasks whose loop runs on this thread's stack right now (nested backward).
thread_local int t_stack_depth = 0;

// Note [Deep reentrant backward]
// A backward started inside a node's backward runs its loop on the same thread, one stack
// level deeper. Past kMaxStackDepth nested loops on one thread, the next nested task is
// handed to a fresh thread with a fresh stack, which serves the same queue (so a device
// worker's device keeps being served) while the original thread waits; depth 10,000
// therefore costs 10,000 / kMaxStackDepth threads, never a stack overflow, and each
// level's cost is independent of the depth.
constexpr int kMaxStackDepth = 50;

void thread_loop(ReadyQueue& queue, const GraphTask* waiting_for);

struct Worker {
  std::once_flag once;
  std::shared_ptr<ReadyQueue> queue;
};

// One worker per non-cpu device (ARCHITECTURE.md §6), started on first use and kept for the
// life of the process.
ReadyQueue& worker_queue(Device d) {
  static auto* workers =
      new std::array<std::array<Worker, kMaxDevicesPerType>, kNumDeviceTypes>();
  Worker& w = (*workers)[static_cast<int>(d.type())][d.index()];
  std::call_once(w.once, [&w] {
    w.queue = std::make_shared<ReadyQueue>();
    std::shared_ptr<ReadyQueue> q = w.queue;
    std::thread([q] {
      t_worker_queue = q.get();
      t_worker_queue_owner = q;
      thread_loop(*q, nullptr);
    }).detach();
  });
  return *w.queue;
}

ReadyQueue& queue_for(GraphTask& gt, const Node& node) {
  if (node.stream().has_value()) return worker_queue(node.stream()->device());
  return *gt.owner_queue;
}

// The reentrant chain this thread serves: itself, or, on a thread that took over deep
// nesting, the chain of the thread it took over from (see Note [Deep reentrant backward]).
thread_local char t_chain_id;
thread_local const void* t_chain = &t_chain_id;

// Marks a node as running on this chain. A nested backward on the same chain that reaches
// the node again would wait for the node's own lock forever: it is an error instead.
class HeldNode {
 public:
  explicit HeldNode(Node& fn) : fn_(fn) {
    SG_CHECK(fn.running_on().load() != t_chain, Error, fn.name(),
             ": a backward started inside this node's backward (or one of its hooks) reached "
             "the node again; a graph cannot be differentiated through a node while that "
             "node's backward is running. Differentiate a separate graph (detach() the "
             "tensors you start from) instead");
    lock_ = std::unique_lock<std::mutex>(fn.mutex());  // never concurrently with itself
    fn.running_on().store(t_chain);
  }
  ~HeldNode() { fn_.running_on().store(nullptr); }
  HeldNode(const HeldNode&) = delete;
  HeldNode& operator=(const HeldNode&) = delete;

 private:
  Node& fn_;
  std::unique_lock<std::mutex> lock_;
};

// Collects warnings raised while a device worker runs a node of `gt`, for its caller.
class TaskWarnings final : public WarningSink {
 public:
  explicit TaskWarnings(GraphTask& gt) : gt_(gt) {}
  void handle(Warning w) override {
    std::lock_guard<std::mutex> lk(gt_.mu);
    gt_.warnings.push_back(std::move(w));
  }

 private:
  GraphTask& gt_;
};

// A captured gradient (grad(), or backward(inputs=) of a non-leaf) leaves the engine here,
// after the hooks the tensor would see: its grad_fn's pre hooks, or a leaf's own hooks.
void capture(GraphTask& gt, Node& fn, const GraphTask::ExecInfo& info, TensorList& grads,
             const std::vector<std::optional<Stream>>& written) {
  if (auto* leaf = dynamic_cast<AccumulateGrad*>(&fn)) leaf->run_tensor_hooks(grads[0]);
  std::lock_guard<std::mutex> lk(gt.mu);
  for (const auto& [slot, index] : info.captures) {
    gt.captured[index] = grads[slot];
    if (!grads[slot].defined()) continue;
    // S6: the caller's streams wait for the streams that wrote the captured gradient.
    if (written[slot]) gt.result_streams.insert(*written[slot]);
    if (fn.stream()) gt.result_streams.insert(*fn.stream());
  }
}

void evaluate_function(GraphTask& gt, const std::shared_ptr<Node>& fn, InputBuffer&& inputs) {
  const GraphTask::ExecInfo* info = nullptr;
  if (!gt.exec_info.empty()) {
    auto it = gt.exec_info.find(fn.get());
    if (it == gt.exec_info.end()) return;
    info = &it->second;
    if (!info->needed && info->captures.empty()) return;
  }
  const std::optional<Stream>& stream = fn->stream();
  inputs.wait_ready(stream);  // S4: right before the consumer runs
  std::optional<StreamGuard> on_stream;
  if (stream) on_stream.emplace(*stream);  // S2
  GradModeGuard grad_mode(gt.create_graph);
  // Backward never autocasts: nodes compute in the dtypes their forward chose, also when
  // backward() is called inside an AutocastGuard on a thread that runs nodes itself.
  autocast_internal::Suspend no_autocast;
  if (dynamic_cast<AccumulateGrad*>(fn.get()) != nullptr && stream && inputs.size() == 1) {
    const std::optional<Stream>& producer = inputs.value_stream(0);
    if (producer && *producer != *stream && producer->device() == stream->device()) {
      SG_WARN("the gradient of leaf ", static_cast<AccumulateGrad&>(*fn).variable().describe(),
              " was produced on ", producer->str(), " but accumulates into .grad on ",
              stream->str(), ", the stream of its first use in this graph (S5): every backward "
              "pays a cross-stream wait for it. Use the leaf first on the stream that "
              "produces its gradient");
    }
  }
  std::vector<std::optional<Stream>> written;
  for (size_t i = 0; info != nullptr && i < inputs.size(); ++i) {
    written.push_back(inputs.value_stream(i));
  }
  TensorList grads = inputs.take();
  TensorList outputs;
  {
    // Observers (sanitizer, trace) name the node each kernel ran for; free without them.
    std::optional<LaunchScope> scope;
    if (detail::have_observers()) scope.emplace(fn->name());
    // Tensor hooks run before the node is held: only apply() is serialised, so a hook may
    // itself differentiate through this node (as in the reference framework).
    if (fn->has_pre_hooks()) fn->run_pre_hooks(grads);
    if (info != nullptr && !info->captures.empty()) {
      capture(gt, *fn, *info, grads, written);
      // Capturing does not cut the graph: a node on the way to another requested input
      // still runs (with the gradient its hooks made, hooks not run twice).
      if (!info->needed) return;
    }
    HeldNode held(*fn);
    const bool none = !grads.empty() && std::none_of(grads.begin(), grads.end(),
                                                     [](const Tensor& g) { return g.defined(); });
    if (none && !fn->apply_without_gradients()) {
      outputs.resize(fn->num_outputs());  // no gradient in, none out
    } else {
      outputs = fn->apply(std::move(grads));
    }
  }
  const bool visible = fn->has_pre_hooks() || dynamic_cast<AccumulateGrad*>(fn.get()) != nullptr;
  if (visible && stream) {  // S5/S6: .grad and hook side effects live on this stream
    std::lock_guard<std::mutex> lk(gt.mu);
    gt.result_streams.insert(*stream);
  }
  if (outputs.empty() && fn->num_outputs() == 0) {
    if (!gt.keep_graph) fn->release_variables();
    return;
  }
  MovedTo moved_to;
  validate_outputs(*fn, outputs, &moved_to);
  if (anomaly_mode_enabled()) check_anomaly(*fn, outputs);
  if (!gt.keep_graph) fn->release_variables();

  std::lock_guard<std::mutex> lk(gt.mu);
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Edge& e = fn->next_edge(i);
    if (!e.valid()) continue;
    Node* next = e.function.get();
    auto dep = gt.dependencies.find(next);
    SG_INTERNAL_CHECK(dep != gt.dependencies.end(), "dependency of ", next->name(), " missing");
    const bool ready = --dep->second == 0;
    auto buf = gt.not_ready.try_emplace(next, next->num_inputs()).first;
    buf->second.add(e.input_nr, std::move(outputs[i]),
                    moved_to[i] ? moved_to[i] : fn->output_stream(i), next->stream());
    if (ready) {
      gt.outstanding.fetch_add(1);
      queue_for(gt, *next).push(
          NodeTask{gt.weak_from_this(), e.function, std::move(buf->second), gt.reentrant_depth});
      gt.not_ready.erase(buf);
    }
  }
}

void finish_task(GraphTask& gt) {
  if (gt.outstanding.fetch_sub(1) == 1) {
    gt.completed.store(true);
    gt.owner_queue->push(NodeTask{{}, nullptr, InputBuffer(0), 1 << 30, true});
  }
}

void thread_loop(ReadyQueue& queue, const GraphTask* waiting_for) {
  while (waiting_for == nullptr || !waiting_for->completed.load()) {
    NodeTask task = queue.pop();
    if (task.wake) continue;
    std::shared_ptr<GraphTask> gt = task.graph_task.lock();
    if (!gt) continue;
    if (!gt->aborted()) {
      // A backward started inside this node nests one level deeper (and runs first).
      const int saved_depth = t_reentrant_depth;
      t_reentrant_depth = task.reentrant_depth + 1;
      GraphTask* const saved_task = t_current_graph_task;
      t_current_graph_task = gt.get();
      // Warnings wait in the task for the thread that called backward (this one may be a
      // device worker, or a thread that took over deep nesting).
      TaskWarnings warnings(*gt);
      try {
        evaluate_function(*gt, task.fn, std::move(task.inputs));
      } catch (const Error& e) {
        gt->set_error(absl::StrCat("error in ", task.fn->name(), " during backward: ", e.what()),
                      e.rethrower());
      } catch (const std::exception& e) {
        gt->set_error(absl::StrCat("error in ", task.fn->name(), " during backward: ", e.what()),
                      nullptr);
      } catch (...) {
        gt->set_error(absl::StrCat("unknown error in ", task.fn->name(), " during backward"),
                      nullptr);
      }
      t_reentrant_depth = saved_depth;
      t_current_graph_task = saved_task;
    }
    task = NodeTask{};  // drop inputs and the node before signalling completion
    finish_task(*gt);
  }
}

}  // namespace

void GraphTask::set_error(std::string message, Error::Rethrower rethrower) {
  {
    std::lock_guard<std::mutex> lk(mu);
    if (has_error.load()) return;
    error = std::move(message);
    rethrow = std::move(rethrower);
    has_error.store(true);
  }
  // Nested backward started from this task stops as soon as possible: its remaining nodes
  // are skipped, and it reports the cancellation to the node that started it.
  std::vector<std::shared_ptr<GraphTask>> stack{shared_from_this()};
  while (!stack.empty()) {
    std::shared_ptr<GraphTask> t = std::move(stack.back());
    stack.pop_back();
    std::lock_guard<std::mutex> lk(t->mu);
    for (const auto& weak : t->children) {
      if (auto child = weak.lock()) {
        child->cancelled.store(true);
        stack.push_back(std::move(child));
      }
    }
  }
}

bool ReadyQueue::Later::operator()(const NodeTask& a, const NodeTask& b) const {
  if (a.wake != b.wake) return b.wake;
  if (a.reentrant_depth != b.reentrant_depth) return a.reentrant_depth < b.reentrant_depth;
  const uint64_t sa = a.fn ? a.fn->sequence_nr() : 0;
  const uint64_t sb = b.fn ? b.fn->sequence_nr() : 0;
  return sa < sb;
}

void ReadyQueue::push(NodeTask task) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    heap_.push(std::move(task));
  }
  cv_.notify_one();
}

NodeTask ReadyQueue::pop() {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [this] { return !heap_.empty(); });
  NodeTask task = std::move(const_cast<NodeTask&>(heap_.top()));
  heap_.pop();
  return task;
}

GraphTask* current_graph_task() { return t_current_graph_task; }

CurrentGraphTaskScope::CurrentGraphTaskScope(GraphTask* gt) : previous_(t_current_graph_task) {
  t_current_graph_task = gt;
}
CurrentGraphTaskScope::~CurrentGraphTaskScope() { t_current_graph_task = previous_; }

std::shared_ptr<ReadyQueue> queue_for_new_task(int* reentrant_depth) {
  *reentrant_depth = t_reentrant_depth;
  if (t_worker_queue != nullptr) return t_worker_queue_owner;
  return std::make_shared<ReadyQueue>();
}

void execute_graph(const std::shared_ptr<GraphTask>& gt, const std::shared_ptr<Node>& root) {
  gt->outstanding.store(1);
  queue_for(*gt, *root).push(NodeTask{gt, root, InputBuffer(0), gt->reentrant_depth});
  if (t_stack_depth < kMaxStackDepth) {
    ++t_stack_depth;
    thread_loop(*gt->owner_queue, gt.get());
    --t_stack_depth;
  } else {
    // See Note [Deep reentrant backward]. The thread-local state the loop relies on moves
    // with it; this thread only waits, so nothing else touches that state meanwhile.
    ReadyQueue* const worker_queue = t_worker_queue;
    std::shared_ptr<ReadyQueue> worker_owner = t_worker_queue_owner;
    const int depth = t_reentrant_depth;
    GraphTask* const current = t_current_graph_task;
    const void* const chain = t_chain;
    auto body = [&] {
      t_worker_queue = worker_queue;
      t_worker_queue_owner = worker_owner;
      t_reentrant_depth = depth;
      t_current_graph_task = current;
      t_chain = chain;
      t_stack_depth = 1;
      thread_loop(*gt->owner_queue, gt.get());
      t_worker_queue_owner.reset();
    };
    try {
      std::thread(body).join();
    } catch (const std::system_error&) {
      body();  // no thread to be had: nest on this stack rather than fail the backward
    }
  }
  std::vector<Warning> warnings;
  decltype(gt->not_ready) unused;
  Error::Rethrower rethrow;
  std::string error;
  bool failed = false;
  {
    std::lock_guard<std::mutex> lk(gt->mu);
    warnings = std::move(gt->warnings);
    failed = gt->aborted();
    if (failed) {
      // Gradients still waiting for their other inputs are freed before the caller sees
      // the error, not whenever the last worker drops its reference to the task.
      unused = std::move(gt->not_ready);
      gt->captured.clear();
      error = gt->error;
      rethrow = gt->rethrow;
    }
  }
  for (Warning& w : warnings) warn(std::move(w));
  if (!failed) return;
  unused.clear();
  if (error.empty()) {
    throw Error("backward was cancelled because the backward that started it (a reentrant "
                "backward's parent) failed; see that backward's error");
  }
  if (rethrow) rethrow(error);
  throw Error(error);
}

}  // namespace streamgrad
