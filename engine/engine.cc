// Execution of graph tasks: device workers, the ready-queue loop, and evaluation of one
// node with the stream rules. See Note [Backward stream semantics] in backward.h.
#include <array>
#include <cctype>
#include <cmath>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/accumulate_grad.h"
#include "engine/grad_mode.h"
#include "engine/graph_task.h"
#include "runtime/error.h"
#include "runtime/guard.h"
#include "runtime/launch.h"

namespace streamgrad {
namespace {

// Set on device worker threads: their own queue; a backward started there runs its loop
// on this queue so that the worker keeps serving its device (reentrant backward).
thread_local ReadyQueue* t_worker_queue = nullptr;
thread_local std::shared_ptr<ReadyQueue> t_worker_queue_owner;
thread_local int t_reentrant_depth = 0;
thread_local GraphTask* t_current_graph_task = nullptr;

void thread_loop(ReadyQueue& queue, const GraphTask* waiting_for);

struct Worker {
  std::once_flag once;
  std::shared_ptr<ReadyQueue> queue;
};

// One worker per non-cpu device (DESIGN.md §6), started on first use and kept for the
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

void check_anomaly(const Node& fn, const TensorList& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& g = outputs[i];
    if (!g.defined() || !is_floating(g.dtype())) continue;
    bool bad = false;
    if (g.dtype() == DType::kFloat32) {
      for (float v : g.to_vector<float>()) bad = bad || !std::isfinite(v);
    } else {
      for (double v : g.to_vector<double>()) bad = bad || !std::isfinite(v);
    }
    if (bad) {
      std::string forward = fn.name();
      const size_t pos = forward.rfind("Backward");
      if (pos != std::string::npos) forward = forward.substr(0, pos);
      for (char& c : forward) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      throw Error(absl::StrCat("anomaly mode: ", fn.name(), " returned NaN or Inf in its output ",
                               i, " (", g.describe(), "); the forward op was '", forward,
                               "'. Check its inputs for values outside the op's domain"));
    }
  }
}

void validate_outputs(const Node& fn, const TensorList& outputs) {
  SG_CHECK(outputs.size() == fn.num_outputs(), Error, fn.name(), " returned ",
           outputs.size(), " gradients but has ", fn.num_outputs(),
           " inputs in forward; return one (possibly undefined) Tensor per input");
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Edge& e = fn.next_edge(i);
    if (!e.valid() || !outputs[i].defined()) continue;
    const InputMeta& m = e.function->input_metadata(e.input_nr);
    if (outputs[i].sizes() != m.sizes || outputs[i].dtype() != m.dtype ||
        outputs[i].device() != m.device) {
      throw Error(absl::StrCat(fn.name(), " returned an invalid gradient for input ", i, ": got ",
                               outputs[i].describe(), " but expected ", dtype_name(m.dtype), "[",
                               absl::StrJoin(m.sizes, ", "), "] on ", m.device.str()));
    }
  }
}

void evaluate_function(GraphTask& gt, const std::shared_ptr<Node>& fn, InputBuffer&& inputs) {
  if (!gt.exec_info.empty()) {
    auto it = gt.exec_info.find(fn.get());
    const GraphTask::ExecInfo* info = it == gt.exec_info.end() ? nullptr : &it->second;
    if (info != nullptr && !info->captures.empty()) {
      // Captured gradients leave the engine: the caller's streams wait for the streams
      // that wrote them at the end (S6), so no host wait here.
      std::vector<std::optional<Stream>> written;
      for (size_t i = 0; i < inputs.size(); ++i) written.push_back(inputs.value_stream(i));
      TensorList grads = inputs.take();
      fn->run_pre_hooks(grads);
      std::lock_guard<std::mutex> lk(gt.mu);
      for (const auto& [slot, index] : info->captures) {
        gt.captured[index] = grads[slot];
        if (grads[slot].defined() && written[slot]) gt.result_streams.insert(*written[slot]);
        if (grads[slot].defined() && fn->has_pre_hooks() && fn->stream()) {
          gt.result_streams.insert(*fn->stream());
        }
      }
      return;  // a captured node is not run (grad() does not accumulate into .grad)
    }
    if (info == nullptr || !info->needed) return;
  }
  const std::optional<Stream>& stream = fn->stream();
  inputs.wait_ready(stream);  // S4: right before the consumer runs
  std::optional<StreamGuard> on_stream;
  if (stream) on_stream.emplace(*stream);  // S2
  GradModeGuard grad_mode(gt.create_graph);
  TensorList grads = inputs.take();
  TensorList outputs;
  {
    // Observers (sanitizer, trace) name the node each kernel ran for; free without them.
    std::optional<LaunchScope> scope;
    if (detail::have_observers()) scope.emplace(fn->name());
    std::lock_guard<std::mutex> lk(fn->mutex());  // a node never runs concurrently with itself
    if (fn->has_pre_hooks()) fn->run_pre_hooks(grads);
    outputs = fn->apply(std::move(grads));
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
  validate_outputs(*fn, outputs);
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
    buf->second.add(e.input_nr, std::move(outputs[i]), fn->output_stream(i), next->stream());
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
    if (!gt->has_error.load()) {
      // A backward started inside this node nests one level deeper (and runs first).
      const int saved_depth = t_reentrant_depth;
      t_reentrant_depth = task.reentrant_depth + 1;
      GraphTask* const saved_task = t_current_graph_task;
      t_current_graph_task = gt.get();
      try {
        evaluate_function(*gt, task.fn, std::move(task.inputs));
      } catch (const std::exception& e) {
        gt->set_error(absl::StrCat("error in ", task.fn->name(), " during backward: ", e.what()));
      } catch (...) {
        gt->set_error(absl::StrCat("unknown error in ", task.fn->name(), " during backward"));
      }
      t_reentrant_depth = saved_depth;
      t_current_graph_task = saved_task;
    }
    task = NodeTask{};  // drop inputs and the node before signalling completion
    finish_task(*gt);
  }
}

}  // namespace

void GraphTask::set_error(std::string message) {
  std::lock_guard<std::mutex> lk(mu);
  if (!has_error.load()) error = std::move(message);
  has_error.store(true);
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

std::shared_ptr<ReadyQueue> queue_for_new_task(int* reentrant_depth) {
  *reentrant_depth = t_reentrant_depth;
  if (t_worker_queue != nullptr) return t_worker_queue_owner;
  return std::make_shared<ReadyQueue>();
}

void execute_graph(const std::shared_ptr<GraphTask>& gt, const std::shared_ptr<Node>& root) {
  gt->outstanding.store(1);
  queue_for(*gt, *root).push(NodeTask{gt, root, InputBuffer(0), gt->reentrant_depth});
  thread_loop(*gt->owner_queue, gt.get());
  std::lock_guard<std::mutex> lk(gt->mu);
  if (gt->has_error.load()) throw Error(gt->error);
}

}  // namespace streamgrad
