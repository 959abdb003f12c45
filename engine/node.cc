#include "engine/node.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/accumulate_grad.h"
#include "engine/grad_mode.h"
#include "engine/saved_hooks.h"
#include "engine/view_history.h"
#include "kernels/kernels.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace {

std::atomic<uint64_t> g_next_sequence_nr{0};
std::atomic<const EngineOps*> g_ops{nullptr};

}  // namespace

Node::Node() : sequence_nr_(g_next_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {}

// Note [Iterative graph destruction]
// Dropping the last reference to a node drops its next edges, whose nodes drop theirs:
// done naively that recursion is as deep as the graph, and a chain of a few thousand
// nodes overflows the stack. Instead the outermost ~Node on a thread moves every edge it
// owns onto a thread-local list and releases the list's entries one at a time; a ~Node
// that runs while the list is being drained only appends its edges and returns. The
// recursion depth is thus bounded by the few frames between a node and the next ~Node
// (a saved tensor whose grad_fn is not also a next edge adds one level, not a chain).
Node::~Node() {
  thread_local std::vector<std::shared_ptr<Node>> pending;
  thread_local bool draining = false;
  for (Edge& e : next_edges_) {
    if (e.function != nullptr) pending.push_back(std::move(e.function));
  }
  if (draining) return;
  draining = true;
  while (!pending.empty()) {
    std::shared_ptr<Node> n = std::move(pending.back());
    pending.pop_back();
    n.reset();  // may append to `pending`
  }
  draining = false;
}

uint32_t Node::add_input_metadata(const Tensor& t) {
  inputs_.push_back(InputMeta{t.sizes(), t.dtype(), t.device()});
  if (!stream_.has_value() && !t.device().is_cpu()) stream_ = t.stream();
  return static_cast<uint32_t>(inputs_.size() - 1);
}

std::optional<Stream> Node::output_stream(size_t) const { return stream_; }

void Node::add_pre_hook(uint32_t input_nr, int id, TensorHook hook, bool retains_grad) {
  pre_hooks_.push_back(PreHook{input_nr, id, std::move(hook), retains_grad});
}

void Node::remove_pre_hook(uint32_t input_nr, int id) {
  for (auto it = pre_hooks_.begin(); it != pre_hooks_.end(); ++it) {
    if (it->input_nr == input_nr && it->id == id) {
      pre_hooks_.erase(it);
      return;
    }
  }
}

void Node::run_pre_hooks(TensorList& grads) {
  for (const bool retains_pass : {false, true}) {
    for (const PreHook& h : pre_hooks_) {
      if (h.retains_grad != retains_pass) continue;
      Tensor& g = grads[h.input_nr];
      // Hooks see undefined gradients too, as in the reference framework (≥ 2.0).
      Tensor replaced = h.hook(g);
      if (!replaced.defined()) continue;
      const InputMeta& meta = inputs_[h.input_nr];
      if (replaced.sizes() != meta.sizes || replaced.dtype() != meta.dtype ||
          replaced.device() != meta.device) {
        throw ValueError(absl::StrCat(
            "a hook on the gradient of ", name(), " input ", h.input_nr, " returned ",
            replaced.describe(), " but the gradient must be ", dtype_name(meta.dtype), "[",
            absl::StrJoin(meta.sizes, ", "), "] on ", meta.device.str(),
            "; return a tensor of the same shape, dtype and device, or an undefined Tensor "
            "to keep the gradient"));
      }
      g = std::move(replaced);
    }
  }
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined()) return Edge{};
  refresh_view_history(t);
  AutogradMeta* m = t.autograd_meta_if_any();
  if (m == nullptr) return Edge{};
  if (m->grad_fn != nullptr) return Edge{m->grad_fn, m->output_nr};
  if (m->requires_grad) return Edge{grad_accumulator(t), 0};
  return Edge{};
}

std::vector<Edge> collect_next_edges(absl::Span<const Tensor> tensors) {
  std::vector<Edge> edges;
  edges.reserve(tensors.size());
  for (const Tensor& t : tensors) edges.push_back(gradient_edge(t));
  return edges;
}

bool any_requires_grad(absl::Span<const Tensor> tensors) {
  if (!grad_mode_enabled()) return false;
  for (const Tensor& t : tensors) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

void set_history(const Tensor& out, const std::shared_ptr<Node>& node) {
  const uint32_t nr = node->add_input_metadata(out);
  out.set_history(node, nr);
}

// What a pack hook returned, and what unpack needs to give the result its history back.
struct SavedTensor::Packed {
  std::shared_ptr<const SavedTensorsHookPair> hooks;
  std::any value;
  Shape sizes;
  DType dtype = DType::kFloat32;
  Device device{"cpu"};
  std::shared_ptr<Node> grad_fn;  // a saved input's producer (an output's is kept weakly)
  uint32_t output_nr = 0;
  // A saved leaf that requires grad, to reach its AccumulateGrad at unpack (made then if
  // need be: the node that saves it may not hold one yet when pack runs).
  std::weak_ptr<TensorImpl> leaf;
};

void SavedTensor::mark_output_of(const std::shared_ptr<Node>& node, uint32_t output_nr) {
  if (!data_.defined() && !packed_) return;
  if (packed_) {
    // Packed before its history was set, or with it: either way no strong reference to
    // the node may stay (the cycle above).
    auto p = std::make_shared<Packed>(*packed_);
    p->grad_fn = nullptr;
    packed_ = std::move(p);
  } else {
    data_ = data_.detach();  // same data and version counter, no history: no cycle
  }
  is_output_ = true;
  weak_grad_fn_ = node;
  output_nr_ = output_nr;
}

SavedTensor::SavedTensor(const Tensor& t, bool defer_pack) {
  if (!t.defined()) return;
  data_ = t;
  saved_version_ = t.version();
  was_defined_ = true;
  if (!defer_pack) pack_with_hooks();
}

void SavedTensor::pack_with_hooks() {
  if (!data_.defined() || packed_) return;
  std::shared_ptr<const SavedTensorsHookPair> hooks = detail::current_saved_tensors_hooks();
  if (hooks == nullptr) return;
  auto p = std::make_shared<Packed>();
  p->hooks = hooks;
  p->sizes = data_.sizes();
  p->dtype = data_.dtype();
  p->device = data_.device();
  std::shared_ptr<Node> producer = is_output_ ? weak_grad_fn_.lock() : data_.grad_fn();
  if (!is_output_) {
    p->grad_fn = producer;
    p->output_nr = data_.output_nr();
    if (producer == nullptr && data_.requires_grad()) p->leaf = data_.impl_ptr();
  }
  const SavedTensorInfo info{current_stream(data_.device()), producer.get(),
                             data_.requires_grad()};
  const uint32_t version = data_.version();
  {
    NoGradGuard no_grad;
    p->value = hooks->pack(data_.detach(), info);
  }
  SG_CHECK(data_.version() == version, Error,
           "a saved-tensor pack hook modified its input in place (", data_.describe(),
           " went from version ", version, " to ", data_.version(),
           "); a pack hook must leave the tensor it is given as it is: work on a copy "
           "(clone) instead");
  packed_ = std::move(p);
  data_ = Tensor();  // what pack kept is all that stays alive
}

Tensor SavedTensor::unpack_packed(const char* node_name) const {
  const Packed& p = *packed_;
  const Tensor got = p.hooks->unpack(p.value);
  const std::string saved = absl::StrCat(dtype_name(p.dtype), "[", absl::StrJoin(p.sizes, ", "),
                                         "] on ", p.device.str());
  SG_CHECK(got.defined(), Error, node_name,
           ": the unpack hook of a saved tensor returned an undefined tensor; it must return "
           "a tensor equal to the one its pack hook was given (", saved, ")");
  SG_CHECK(got.sizes() == p.sizes && got.dtype() == p.dtype && got.device() == p.device, Error,
           node_name, ": the unpack hook of a saved tensor returned ", got.describe(),
           ", but the tensor saved was ", saved, "; unpack must return a tensor of the "
           "saved shape, dtype and device (copy it back with to(), for example)");
  Tensor out = got.detach();  // the saved tensor's history, never the hook's tensor's
  if (is_output_) {
    if (std::shared_ptr<Node> node = weak_grad_fn_.lock()) out.set_history(node, output_nr_);
  } else if (p.grad_fn != nullptr) {
    out.set_history(p.grad_fn, p.output_nr);
  } else if (std::shared_ptr<TensorImpl> leaf = p.leaf.lock()) {
    // Gradients through the unpacked tensor (double backward) reach the saved leaf.
    AutogradMeta& meta = out.autograd_meta();
    meta.requires_grad = true;
    meta.grad_accumulator = grad_accumulator(Tensor(std::move(leaf)));
  }
  return out;
}

Tensor SavedTensor::unpack(const char* node_name) const {
  if (!was_defined_) return Tensor();
  if (packed_) return unpack_packed(node_name);
  SG_CHECK(data_.defined(), Error, node_name,
           ": trying to backward through the graph a second time (or to use saved tensors "
           "after they were freed); pass retain_graph=true to the first backward() if you "
           "need to backward through the graph again");
  const uint32_t now = data_.version();
  if (now != saved_version_) {
    const std::string& name = data_.name();
    // The node that produced the tensor's current value: the in-place op that moved it on.
    const std::shared_ptr<Node> producer = data_.grad_fn();
    throw Error(absl::StrCat(
        node_name, ": one of the tensors needed for gradient computation has been modified "
        "by an in-place operation: ", data_.describe(),
        name.empty() ? "" : absl::StrCat(" (named \"", name, "\")"),
        producer ? absl::StrCat(", which is output ", data_.output_nr(), " of ", producer->name(), ",")
                 : "",
        " is at version ", now,
        "; expected version ", saved_version_,
        " instead. Clone the tensor before modifying it in place, or do the in-place "
        "operation after backward"));
  }
  if (is_output_) {
    // A fresh handle each time: attaching the history to data_ would recreate the cycle.
    std::shared_ptr<Node> node = weak_grad_fn_.lock();
    Tensor out = data_.detach();
    if (node != nullptr) out.set_history(node, output_nr_);
    return out;
  }
  return data_;
}

void SavedTensor::reset() {
  data_ = Tensor();
  packed_.reset();  // frees what the pack hook kept (host copies, for example)
}

void set_engine_ops(const EngineOps& ops) { g_ops.store(new EngineOps(ops)); }

const EngineOps& engine_ops() {
  const EngineOps* ops = g_ops.load();
  SG_INTERNAL_CHECK(ops != nullptr, "no ops registered with the engine (link //ops)");
  return *ops;
}

AddFn engine_add() { return engine_ops().add; }

bool sole_owner(const Tensor& g) {
  return g.impl_ptr().use_count() == 1 && g.impl()->base == nullptr && g.is_contiguous() &&
         g.storage().use_count() == 1;
}

void accumulate_into(const Tensor& acc, const Tensor& g, const Stream& stream) {
  kernels::axpy(stream, acc.view(), acc.view(), g.view(), 1.0);
  acc.bump_version();
}

}  // namespace streamgrad
