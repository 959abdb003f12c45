// Node: one backward function in the autograd graph; Edge: where its outputs go;
// SavedTensor: a tensor kept for backward with a version check.
//
// A differentiable op creates one Node per call (ops/ shows the pattern):
//
//   auto node = std::make_shared<MulBackward>();          // a Node subclass
//   node->set_next_edges(collect_next_edges({a, b}));      // one edge per differentiable input
//   node->saved_a = SavedTensor(a);  ...
//   Tensor out = ...compute...;
//   set_history(out, node);                                // stamps the node's stream (S1)
//
// apply() receives one gradient per forward output (undefined where no gradient flowed)
// and returns one gradient per next edge (undefined for "no gradient"). It runs with
// the node's canonical stream current (S2) and with grad mode on only under
// create_graph, so backward formulas written with ops are themselves differentiable.
//
// Thread-safety: the engine never runs one node concurrently with itself (it holds
// mutex() around apply); other methods are called before the node is shared.
// Failure: SavedTensor::unpack throws Error when the tensor was modified in place after it
// was saved, or when the graph was already freed by a backward without retain_graph.
#ifndef STREAMGRAD_ENGINE_NODE_H_
#define STREAMGRAD_ENGINE_NODE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "engine/tensor.h"

namespace streamgrad {

using TensorList = std::vector<Tensor>;

struct Edge {
  std::shared_ptr<Node> function;
  uint32_t input_nr = 0;
  bool valid() const { return function != nullptr; }
};

// What the forward output at a backward input slot looked like: gradients arriving there
// are checked against it.
struct InputMeta {
  Shape sizes;
  DType dtype;
  Device device;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  // Releases the next edges without recursion: see Note [Iterative graph destruction].
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // The backward function's name, e.g. "MulBackward".
  virtual std::string name() const = 0;
  virtual TensorList apply(TensorList&& grads) = 0;
  // Frees saved tensors after a backward without retain_graph.
  virtual void release_variables() {}
  // Whether apply() is called when no gradient arrived at any input slot. Built-in nodes
  // are skipped (their results are all undefined, as the reference framework's generated
  // backward functions give); custom functions are called (they may materialize zeros).
  virtual bool apply_without_gradients() const { return false; }
  // The leaf whose .grad this node writes (AccumulateGrad), or null. The engine treats
  // such a node's effects as user-visible (S5, S6) and runs the leaf's tensor hooks on a
  // gradient grad() captures instead of accumulating it.
  virtual const Tensor* accumulated_leaf() const { return nullptr; }
  // The hooks of the tensor whose gradient arrives at this node's single input, on `g`
  // (which they may replace); a no-op unless accumulated_leaf() is set (a non-leaf
  // tensor's hooks are this node's pre hooks instead).
  virtual void run_tensor_hooks(Tensor& g) const { (void)g; }

  const std::vector<Edge>& next_edges() const { return next_edges_; }
  const Edge& next_edge(size_t i) const { return next_edges_[i]; }
  size_t num_outputs() const { return next_edges_.size(); }
  void set_next_edges(std::vector<Edge> edges) { next_edges_ = std::move(edges); }
  void add_next_edge(Edge e) { next_edges_.push_back(std::move(e)); }

  // Registers forward output `t` as backward input number num_inputs(); the first
  // non-cpu output fixes the canonical stream (S1).
  uint32_t add_input_metadata(const Tensor& t);
  const InputMeta& input_metadata(size_t i) const { return inputs_[i]; }
  size_t num_inputs() const { return inputs_.size(); }

  // S1: the stamp of the first non-cpu output; nullopt for cpu nodes (they run on the
  // thread that called backward).
  const std::optional<Stream>& stream() const { return stream_; }
  void set_stream(std::optional<Stream> s) { stream_ = std::move(s); }
  // The stream gradient `i` of apply()'s result is produced on (the canonical stream,
  // except for GraphRoot's per-seed streams, S3).
  virtual std::optional<Stream> output_stream(size_t i) const;

  uint64_t sequence_nr() const { return sequence_nr_; }
  // Makes this node ordered as if created after everything so far (used by GraphRoot).
  void set_sequence_nr(uint64_t n) { sequence_nr_ = n; }

  // Hooks on the gradients arriving at input slot `input_nr` (tensor hooks of non-leaf
  // tensors); they may replace the gradient. A retains_grad hook runs after every other
  // hook of its slot, so .grad sees the gradient the other hooks made (as in the
  // reference framework).
  void add_pre_hook(uint32_t input_nr, int id, TensorHook hook, bool retains_grad = false);
  void remove_pre_hook(uint32_t input_nr, int id);
  bool has_pre_hooks() const { return !pre_hooks_.empty(); }
  // Runs the pre hooks on `grads` in place; throws ValueError when a hook returns a
  // tensor that does not match the slot's metadata.
  void run_pre_hooks(TensorList& grads);

  std::mutex& mutex() { return mu_; }
  // The reentrant chain whose thread runs this node's backward now (engine.cc), or null.
  std::atomic<const void*>& running_on() { return running_on_; }

 private:
  struct PreHook {
    uint32_t input_nr;
    int id;
    TensorHook hook;
    bool retains_grad;
  };
  std::vector<Edge> next_edges_;
  std::vector<InputMeta> inputs_;
  std::vector<PreHook> pre_hooks_;
  std::optional<Stream> stream_;
  uint64_t sequence_nr_;
  std::mutex mu_;
  std::atomic<const void*> running_on_{nullptr};
};

// The edge a gradient for `t` must take: its grad_fn, or its AccumulateGrad if it is a
// leaf that requires grad; an invalid edge otherwise.
Edge gradient_edge(const Tensor& t);
std::vector<Edge> collect_next_edges(absl::Span<const Tensor> tensors);
// True when grad mode is on and any of `tensors` requires grad.
// Spans, so that ops' braced lists ({a, b}) cost no allocation.
bool any_requires_grad(absl::Span<const Tensor> tensors);
// Makes `out` the output `node->add_input_metadata(out)` of `node`.
void set_history(const Tensor& out, const std::shared_ptr<Node>& node);

// A tensor saved for backward. Checks at unpack that it was not modified in place since
// (the version counter) and that the graph was not freed.
//
// A tensor that is an output of the node that saves it would form a cycle (tensor ->
// grad_fn -> node -> saved tensor): mark_output_of() keeps only its data and the node
// weakly, and unpack() rebuilds a tensor with that history (the reference framework's
// saved-variable rule for outputs).
//
// Under saved-tensor hooks (saved_hooks.h) the tensor goes to the pack hook when saved and
// only what the hook returned is kept; unpack() calls the unpack hook and gives its result
// the saved tensor's history. The version check is then the hooks' business, as in the
// reference framework.
class SavedTensor {
 public:
  SavedTensor() = default;
  // `defer_pack`: the hooks run at pack_with_hooks() instead, once the saver knows which
  // saved tensors are its outputs (custom functions).
  explicit SavedTensor(const Tensor& t, bool defer_pack = false);
  Tensor unpack(const char* node_name) const;
  void reset();  // release_variables()
  bool defined() const { return data_.defined() || was_defined_; }
  bool is_same(const Tensor& t) const { return data_.defined() && data_.is_same(t); }
  void mark_output_of(const std::shared_ptr<Node>& node, uint32_t output_nr);
  // Hands the tensor to this thread's innermost pack hook, if there is one (once).
  void pack_with_hooks();

 private:
  struct Packed;
  Tensor unpack_packed(const char* node_name) const;

  Tensor data_;
  uint32_t saved_version_ = 0;
  bool was_defined_ = false;  // defined once, now released
  bool is_output_ = false;
  std::weak_ptr<Node> weak_grad_fn_;  // is_output_ only
  uint32_t output_nr_ = 0;
  std::shared_ptr<const Packed> packed_;  // set by pack_with_hooks(); data_ is then empty
};

// What the engine needs from ops/, which sits above it: set by ops/ at start-up.
//   add        accumulation of gradients (differentiable when grad mode is on);
//   sum_to     a gradient reduced to a shape it broadcasts from;
//   to_dtype, to_device   conversions of gradients that a backward returned in another
//              floating dtype, or as a 0-dim tensor on another device;
struct EngineOps {
  Tensor (*add)(const Tensor&, const Tensor&) = nullptr;
  Tensor (*sum_to)(const Tensor&, const Shape&) = nullptr;
  Tensor (*to_dtype)(const Tensor&, DType) = nullptr;
  Tensor (*to_device)(const Tensor&, Device) = nullptr;
  // view_backward  the node that places a differentiable view's gradient into zeros of
  //            its base's shape (engine/view_history.h); the engine sets its edges.
  std::shared_ptr<Node> (*view_backward)(const Tensor& view, const Tensor& base) = nullptr;
};
void set_engine_ops(const EngineOps& ops);
const EngineOps& engine_ops();
using AddFn = Tensor (*)(const Tensor&, const Tensor&);
AddFn engine_add();

// True when `g` is the only handle on its metadata and its storage, is no view and is
// contiguous: nothing else can observe it, so the engine may take it over (AccumulateGrad)
// or add into it in place (InputBuffer) instead of allocating.
bool sole_owner(const Tensor& g);
// acc += g in place on `stream` (acc: a sole owner of g's sizes and dtype, any device),
// without recording history: gradient accumulation when grad mode is off.
void accumulate_into(const Tensor& acc, const Tensor& g, const Stream& stream);

}  // namespace streamgrad

#endif  // STREAMGRAD_ENGINE_NODE_H_
