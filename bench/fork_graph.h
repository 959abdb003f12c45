// The stream-overlap graph of `sg_bench --case=overlap`, shared with
// tests/engine/backward_sync_counts_test so that the counts the test asserts are those of
// the graph the benchmark times.
//
//   loss = sum(b_0 + b_1 + ... + b_{K-1}),   b_k = FixedTime applied L times to x
//
// x is a leaf made on the caller's current stream of `device`, first used there (a view,
// which every branch reads); branch k runs on streams[k] (everything on the caller's
// stream when `streams` is empty) and the join on the caller's stream. The view's
// gradients thus come from the branches' streams and are added on the caller's.
// Why the view: a leaf's AccumulateGrad takes the stream of the leaf's first use (S5).
// Were that the first branch's, the engine (as the reference's rules say) would queue the
// other branches' gradient sums on that stream, each waiting for its branch, ahead of the
// first branch's own backward, which would then start only after all the others: the
// benchmark measured 2.0x the longest branch that way, not an overlap.
// FixedTime's forward is a copy; its backward keeps its stream busy
// for `kernel_us` (runtime/backend/launch.h `sleep`, no host wait), then copies the gradient on
// that stream, so a branch's backward costs L * kernel_us of stream time, the branches may
// overlap, and a consumer on another stream that did not wait would read an unwritten
// gradient.
//
//   SyncCounter count;                 // events recorded and stream waits from here on
//   fork.loss.backward();
//   count.events(), count.waits()
//
// Thread-safety: make_fork_graph as any op; SyncCounter reads the process-wide counters
// (runtime/backend/event.h), so other threads' events and waits count too. Failure: as the ops
// it calls.
#ifndef STREAMGRAD_BENCH_FORK_GRAPH_H_
#define STREAMGRAD_BENCH_FORK_GRAPH_H_

#include <cstdint>
#include <memory>
#include <unordered_set>
#include <vector>

#include "streamgrad.h"

namespace streamgrad {
namespace bench {

inline Tensor fixed_time(const Tensor& x, double kernel_us) {
  return apply_function(
      "FixedTime", {x}, [](FunctionCtx&, const TensorList& in) { return TensorList{clone(in[0])}; },
      [kernel_us](FunctionCtx&, const TensorList& g) {
        sleep(current_stream(g[0].device()), kernel_us);
        return TensorList{clone(g[0])};
      })[0];
}

// Edges of the backward graph below `root` whose two nodes run on different streams.
inline int64_t cross_stream_edges(const std::shared_ptr<Node>& root) {
  int64_t count = 0;
  std::unordered_set<const Node*> seen{root.get()};
  std::vector<const Node*> todo{root.get()};
  while (!todo.empty()) {
    const Node* node = todo.back();
    todo.pop_back();
    for (const Edge& e : node->next_edges()) {
      if (!e.valid()) continue;
      if (e.function->stream() != node->stream()) ++count;
      if (seen.insert(e.function.get()).second) todo.push_back(e.function.get());
    }
  }
  return count;
}

struct ForkGraph {
  Tensor x;
  Tensor loss;
  int64_t cross_stream_edges = 0;
};

inline ForkGraph make_fork_graph(Device device, const std::vector<Stream>& streams, int branches,
                                 int length, double kernel_us) {
  const Stream main = current_stream(device);
  ForkGraph g;
  g.x = ones({1}, TensorOptions().device(device)).requires_grad_();
  const Tensor x_on_main = g.x.view({1});
  std::vector<Tensor> outs;
  for (int k = 0; k < branches; ++k) {
    Tensor h = x_on_main;
    if (streams.empty()) {
      for (int j = 0; j < length; ++j) h = fixed_time(h, kernel_us);
    } else {
      const Stream& s = streams[static_cast<size_t>(k) % streams.size()];
      s.wait_stream(main);               // x is ready for the branch
      g.x.storage().record_stream(s);    // and read there: not reused before (S8)
      StreamGuard on_branch(s);
      for (int j = 0; j < length; ++j) h = fixed_time(h, kernel_us);
    }
    outs.push_back(h);
  }
  for (const Stream& s : streams) main.wait_stream(s);  // the join reads every branch
  for (const Tensor& o : outs) {
    if (o.storage().stream() != main) o.storage().record_stream(main);
  }
  Tensor joined = outs[0];
  for (size_t k = 1; k < outs.size(); ++k) joined = add(joined, outs[k]);
  g.loss = sum(joined);
  g.cross_stream_edges = cross_stream_edges(g.loss.grad_fn());
  return g;
}

// Counts Event::record calls and device-side waits (events_recorded() and
// stream_waits_issued()) since its construction.
class SyncCounter {
 public:
  SyncCounter() : events_before_(events_recorded()), waits_before_(stream_waits_issued()) {}
  uint64_t events() const { return events_recorded() - events_before_; }
  uint64_t waits() const { return stream_waits_issued() - waits_before_; }

 private:
  uint64_t events_before_, waits_before_;
};

}  // namespace bench
}  // namespace streamgrad

#endif  // STREAMGRAD_BENCH_FORK_GRAPH_H_
