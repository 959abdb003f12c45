// The executor: device workers, the ready-queue loop and deep reentrant backward. One
// node's evaluation (prepare, call, route) is engine/evaluate.cc; the stream rules are
// Note [Backward stream semantics] in backward.h.
//
// Note [The backward algorithm]
//   backward(roots, seeds):                                          (backward.cc)
//     seeds on the caller's current streams (S3); GraphRoot feeds them to the roots
//     count, for every node reachable from GraphRoot, the edges that point at it
//     (pruned to the paths to inputs= / grad()'s inputs, which are captured there)
//     execute_graph(task, GraphRoot); then every caller stream waits for the streams
//     that hold a user-visible result (S6)
//   execute_graph(task, root):                                       (this file)
//     push root on its queue; the calling thread runs a loop on the task's queue (cpu
//     nodes) while each non-cpu node goes to its device's worker, which loops forever
//   loop(queue):
//     take the deepest, then latest-created, ready task
//     evaluate it (evaluate.cc):
//       prepare: skip unneeded nodes; wait on the inputs' ready events (S4); make the
//                node's stream current (S2)
//       call:    pre hooks; capture what grad() asked for; apply() with the node held
//       route:   check results; add each into its next node's input buffer, recording a
//                ready event when the streams differ (S4); queue nodes with no
//                dependency left
//     on an error: keep the first, cancel nested tasks; the caller rethrows it
//     when the task's last node is done: wake the caller
#include <algorithm>
#include <array>
#include <optional>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/evaluate.h"
#include "engine/graph_task.h"
#include "runtime/backend/guard.h"
#include "runtime/backend/launch.h"
#include "runtime/base/error.h"
#include "runtime/base/warning.h"

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

// The reentrant chain this thread serves: itself, or, on a thread that took over deep
// nesting, the chain of the thread it took over from (see Note [Deep reentrant backward]).
thread_local char t_chain_id;
thread_local const void* t_chain = &t_chain_id;

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

ReadyQueue& queue_for(GraphTask& gt, const Node& node) {
  if (node.stream().has_value()) return worker_queue(node.stream()->device());
  return *gt.owner_queue;
}

const void* current_chain() { return t_chain; }

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
