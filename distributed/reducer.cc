#include "distributed/reducer.h"

#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/backward.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "ops/ops.h"
#include "runtime/backend/stream.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace distributed {
namespace ddp_internal {

Reducer::Reducer(std::vector<std::pair<std::string, Tensor>> params,
                 std::shared_ptr<ProcessGroup> group, int64_t bucket_cap_bytes,
                 bool find_unused_parameters)
    : params_(std::move(params)), group_(std::move(group)), find_unused_(find_unused_parameters) {
  const size_t n = params_.size();
  for (const auto& [name, p] : params_) {
    SG_CHECK(p.device() == params_.front().second.device(), ValueError,
             "DistributedDataParallel: parameter '", name, "' is on ", p.device().str(), " but '",
             params_.front().first, "' is on ", params_.front().second.device().str(),
             "; DDP serves a module on one device per process: move it with module->to()");
  }
  // Reverse registration order approximates the order backward produces the gradients.
  bucket_of_.assign(n, 0);
  slot_of_.assign(n, 0);
  int64_t bytes = 0;
  for (size_t r = n; r-- > 0;) {
    const Tensor& p = params_[r].second;
    const int64_t pb = p.numel() * static_cast<int64_t>(element_size(p.dtype()));
    const bool fits = !buckets_.empty() && bytes + pb <= bucket_cap_bytes &&
                      params_[buckets_.back().params.front()].second.dtype() == p.dtype();
    if (!fits) {
      buckets_.emplace_back();
      bytes = 0;
    }
    Bucket& b = buckets_.back();
    bucket_of_[r] = buckets_.size() - 1;
    slot_of_[r] = b.params.size();
    b.offset.push_back(b.params.empty()
                           ? 0
                           : b.offset.back() + params_[b.params.back()].second.numel());
    b.params.push_back(r);
    bytes += pb;
  }
  for (Bucket& b : buckets_) {
    const Tensor& last = params_[b.params.back()].second;
    const Tensor& first = params_[b.params.front()].second;
    b.flat = zeros({b.offset.back() + last.numel()},
                   TensorOptions().dtype(first.dtype()).device(first.device()));
    b.pending = b.params.size();
  }
  std::lock_guard<std::mutex> lk(mu_);
  ready_.assign(n, 0);
  reached_.assign(n, 1);
  has_grad_.assign(n, 0);
}

void Reducer::install_hooks() {
  std::weak_ptr<Reducer> weak = weak_from_this();
  for (size_t i = 0; i < params_.size(); ++i) {
    params_[i].second.register_post_accumulate_grad_hook([weak, i](const Tensor&) {
      if (auto self = weak.lock()) self->on_grad_ready(i);
    });
  }
}

namespace {
// The parameters (by impl) whose AccumulateGrad the graph of `outputs` reaches.
std::unordered_set<const TensorImpl*> reached_leaves(const std::vector<Tensor>& outputs) {
  std::unordered_set<const TensorImpl*> leaves;
  std::unordered_set<const Node*> seen;
  std::vector<std::shared_ptr<Node>> todo;
  for (const Tensor& t : outputs) {
    if (!t.defined()) continue;
    if (t.is_leaf()) leaves.insert(t.impl());
    if (auto fn = t.grad_fn()) todo.push_back(std::move(fn));
  }
  while (!todo.empty()) {
    std::shared_ptr<Node> node = std::move(todo.back());
    todo.pop_back();
    if (!seen.insert(node.get()).second) continue;
    if (const Tensor* leaf = node->accumulated_leaf()) leaves.insert(leaf->impl());
    for (const Edge& e : node->next_edges()) {
      if (e.valid()) todo.push_back(e.function);
    }
  }
  return leaves;
}
}  // namespace

void Reducer::prepare(bool sync, const std::vector<Tensor>& outputs) {
  std::unordered_set<const TensorImpl*> leaves;
  if (sync && find_unused_) leaves = reached_leaves(outputs);
  std::lock_guard<std::mutex> lk(mu_);
  expect_hooks_ = sync;
  for (size_t i = 0; i < params_.size(); ++i) {
    reached_[i] = !find_unused_ || leaves.count(params_[i].second.impl()) > 0;
  }
}

Tensor Reducer::slot(const Bucket& b, size_t k) const {
  const Tensor& p = params_[b.params[k]].second;
  return reshape(narrow(b.flat, 0, b.offset[k], p.numel()), p.sizes());
}

void Reducer::on_grad_ready(size_t i) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!expect_hooks_) return;  // no_sync, or no DDP forward before this backward
  if (!callback_queued_) {
    std::weak_ptr<Reducer> weak = weak_from_this();
    queue_callback([weak] {
      if (auto self = weak.lock()) self->finalize();
    });
    callback_queued_ = true;
  }
  if (find_unused_ && !unused_marked_) {
    // As soon as backward starts, the parameters the forward did not reach count as ready
    // (with zeros), so that their buckets need not wait for the end of backward.
    unused_marked_ = true;
    for (size_t j = 0; j < params_.size(); ++j) {
      if (!reached_[j] && j != i) mark_ready(j, false);
    }
  }
  SG_CHECK(!ready_[i], Error, "DistributedDataParallel: parameter '", params_[i].first,
           "' got a gradient twice in one backward (or after it was found unused by the "
           "forward); its bucket may already be reduced. Do not use a parameter in a second "
           "graph whose backward runs before the first one's");
  // The hook also runs when no gradient reached the parameter (a custom backward that
  // returned none for it): its slot is then zeros, as the reference's reducer does.
  mark_ready(i, params_[i].second.grad().defined());
  launch_ready();
}

void Reducer::mark_ready(size_t i, bool has_grad) {
  NoGradGuard no_grad;
  Bucket& b = buckets_[bucket_of_[i]];
  const Tensor& p = params_[i].second;
  const Stream s = current_stream(p.device());
  auto [it, first_on_stream] = b.filled_on.try_emplace(s);
  // The slot may still be read by the previous step's copy-back, on the caller's stream.
  if (first_on_stream) b.copied_back.block(s);
  Tensor view = slot(b, slot_of_[i]);
  if (has_grad) {
    copy_(view, p.grad());
  } else {
    zero_(view);
  }
  it->second.record(s);
  ready_[i] = 1;
  has_grad_[i] = has_grad;
  --b.pending;
}

void Reducer::launch_ready() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    Bucket& b = buckets_[next_launch_];
    const Stream s = current_stream(b.flat.device());
    for (const auto& [stream, filled] : b.filled_on) filled.block(s);  // slots filled elsewhere
    b.work = group_->all_reduce_async(b.flat, ReduceOp::kAvg);
    launch_log_.push_back(next_launch_);
    ++next_launch_;
  }
}

void Reducer::finalize() {
  std::unique_lock<std::mutex> lk(mu_);
  auto reset = [this] {
    std::fill(ready_.begin(), ready_.end(), 0);
    for (Bucket& b : buckets_) {
      b.pending = b.params.size();
      b.filled_on.clear();
    }
    next_launch_ = 0;
    unused_marked_ = false;
    callback_queued_ = false;
  };
  if (!expect_hooks_) return;
  std::vector<std::string> missing;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (ready_[i]) continue;
    if (find_unused_) {
      mark_ready(i, false);
    } else {
      missing.push_back(params_[i].first);
    }
  }
  if (!missing.empty()) {
    reset();
    throw Error(absl::StrCat(
        "DistributedDataParallel: no gradient reached ", absl::StrJoin(missing, ", "),
        " in this backward, so ", missing.size() == 1 ? "its bucket" : "their buckets",
        " could not be all-reduced and the other processes will time out. Construct it with "
        "DistributedDataParallelOptions().find_unused_parameters(true) when a forward may "
        "leave parameters out"));
  }
  launch_ready();
  const Device d = params_.front().second.device();
  const Stream caller = current_stream(d);
  // A parameter without a local gradient gets the average if any process had one (the
  // reference's rule); that needs everyone's usage, one small all-reduce.
  std::vector<double> used_anywhere;
  if (find_unused_) {
    std::vector<double> mine(params_.size());
    for (size_t i = 0; i < params_.size(); ++i) mine[i] = has_grad_[i] ? 1.0 : 0.0;
    Tensor used = to(from_vector<double>(mine), d);  // the group may serve only d (nccl)
    group_->all_reduce(used);
    used_anywhere = used.to_vector<double>();
  }
  NoGradGuard no_grad;
  for (Bucket& b : buckets_) {
    b.work->wait();
    for (size_t k = 0; k < b.params.size(); ++k) {
      const size_t i = b.params[k];
      const Tensor& p = params_[i].second;
      Tensor g = p.grad();
      if (g.defined() && has_grad_[i]) {
        copy_(g, slot(b, k));
        g.storage().record_stream(caller);
      } else if (!used_anywhere.empty() && used_anywhere[i] > 0) {
        p.set_grad(clone(slot(b, k)));
      }
    }
    b.copied_back.record(caller);
  }
  reset();
}

std::vector<std::vector<size_t>> Reducer::bucket_indices() const {
  std::vector<std::vector<size_t>> out;
  for (const Bucket& b : buckets_) out.push_back(b.params);
  return out;
}

std::vector<size_t> Reducer::launch_log() const {
  std::lock_guard<std::mutex> lk(mu_);
  return launch_log_;
}

void Reducer::clear_launch_log() {
  std::lock_guard<std::mutex> lk(mu_);
  launch_log_.clear();
}

}  // namespace ddp_internal
}  // namespace distributed
}  // namespace streamgrad
