// GraphTask, NodeTask and ReadyQueue: the state of one backward() / grad() call and the
// queues its nodes wait in. Internal to engine/ (engine.cc, backward.cc).
//
// A ReadyQueue orders tasks by reentrant depth (deeper first, so a nested backward
// finishes before its caller resumes), then by sequence number (latest-created node
// first, which walks the graph from outputs to inputs).
//
// Thread-safety: ReadyQueue is thread-safe. GraphTask's maps are guarded by its mutex; its
// counters are atomics.
// Failure: none of its own; GraphTask keeps the first exception of any node.
#ifndef STREAMGRAD_ENGINE_GRAPH_TASK_H_
#define STREAMGRAD_ENGINE_GRAPH_TASK_H_

#include <atomic>
#include <condition_variable>
#include <string>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "engine/input_buffer.h"
#include "engine/node.h"
#include "runtime/base/error.h"
#include "runtime/base/warning.h"

namespace streamgrad {

class ReadyQueue;

struct GraphTask : std::enable_shared_from_this<GraphTask> {
  struct ExecInfo {
    bool needed = false;
    std::vector<std::pair<uint32_t, size_t>> captures;  // (input slot, result index)
  };

  bool keep_graph = false;
  bool create_graph = false;
  int reentrant_depth = 0;
  // Where this task's cpu nodes run, and where completion is signalled: the calling
  // thread's queue (a device worker's own queue for a backward inside a backward).
  std::shared_ptr<ReadyQueue> owner_queue;

  std::mutex mu;
  // Flat maps: one entry per node of the graph, where node-based maps would allocate
  // once per entry.
  absl::flat_hash_map<Node*, int> dependencies ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<Node*, InputBuffer> not_ready ABSL_GUARDED_BY(mu);
  // Empty: run every reachable node (backward without inputs=).
  absl::flat_hash_map<Node*, ExecInfo> exec_info;  // read-only once execution starts
  TensorList captured ABSL_GUARDED_BY(mu);
  // S6: streams where backward left a user-visible result.
  std::set<Stream> result_streams ABSL_GUARDED_BY(mu);
  std::vector<Stream> caller_streams;  // S6, noted at the start
  std::vector<std::function<void()>> final_callbacks ABSL_GUARDED_BY(mu);

  // Warnings raised by nodes that ran on device workers, handed to the caller at the end.
  std::vector<Warning> warnings ABSL_GUARDED_BY(mu);

  // A backward started inside one of this task's nodes (reentrant backward) is a child:
  // when this task fails, its live descendants are cancelled and stop running nodes.
  std::shared_ptr<GraphTask> parent;
  std::vector<std::weak_ptr<GraphTask>> children ABSL_GUARDED_BY(mu);

  std::atomic<int> outstanding{0};
  std::atomic<bool> completed{false};
  std::atomic<bool> has_error{false};
  std::atomic<bool> cancelled{false};  // an ancestor failed
  // The first error's message, and a function that throws it with its original type.
  // The exception object itself stays on the thread that caught it: the caller throws a
  // fresh one, so none is shared between a worker and the caller.
  std::string error ABSL_GUARDED_BY(mu);
  Error::Rethrower rethrow ABSL_GUARDED_BY(mu);

  bool aborted() const { return has_error.load() || cancelled.load(); }
  // Keeps the first error only; cancels every live descendant.
  void set_error(std::string message, Error::Rethrower rethrower);
};

struct NodeTask {
  std::weak_ptr<GraphTask> graph_task;
  std::shared_ptr<Node> fn;
  InputBuffer inputs{0};
  int reentrant_depth = 0;
  bool wake = false;  // only wakes the owner to re-check completion
};

class ReadyQueue {
 public:
  void push(NodeTask task);
  NodeTask pop();

 private:
  struct Later {
    bool operator()(const NodeTask& a, const NodeTask& b) const;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::priority_queue<NodeTask, std::vector<NodeTask>, Later> heap_ ABSL_GUARDED_BY(mu_);
};

// Runs `graph_task` from `root` to completion on the calling thread (cpu nodes) and the
// device workers (every other node), then rethrows its first error. engine.cc.
void execute_graph(const std::shared_ptr<GraphTask>& graph_task,
                   const std::shared_ptr<Node>& root);
// The graph task whose node the calling thread is running, or null.
GraphTask* current_graph_task();
// Makes `gt` the calling thread's current graph task for a scope (final callbacks run
// in it, so that they may queue more callbacks).
class CurrentGraphTaskScope {
 public:
  explicit CurrentGraphTaskScope(GraphTask* gt);
  ~CurrentGraphTaskScope();
  CurrentGraphTaskScope(const CurrentGraphTaskScope&) = delete;
  CurrentGraphTaskScope& operator=(const CurrentGraphTaskScope&) = delete;

 private:
  GraphTask* previous_;
};
// The queue cpu nodes of a backward started on this thread should use.
std::shared_ptr<ReadyQueue> queue_for_new_task(int* reentrant_depth);

}  // namespace streamgrad

#endif  // STREAMGRAD_ENGINE_GRAPH_TASK_H_
