// Reducer: DistributedDataParallel's gradient bucketing and all-reduce (internal to
// distributed/ddp.cc; users see distributed/ddp.h).
//
// The parameters that require grad are split into buckets in reverse registration order
// (the order backward usually produces their gradients), each at most `bucket_cap_bytes`
// (a parameter is never split; a bucket holds one device and dtype), each with one flat
// buffer. A post-accumulate hook on every parameter copies its .grad into its bucket's
// slot on the accumulation stream; when a bucket's last slot is filled the bucket is
// all-reduced (average) with ProcessGroup::all_reduce_async, so the communication stream
// works while backward goes on. Buckets are started strictly in index order, so every
// process issues the same collectives in the same order even when its gradients arrive in
// another. A final callback of the backward (engine/backward.h: after S6, on the caller's
// thread and streams) makes the caller's stream wait for every bucket and copies the
// averages back into .grad there: when backward() returns, later work on the caller's
// stream sees reduced gradients.
//
// Thread-safety: hooks (device workers) and the final callback (the backward's caller)
// take one mutex; prepare() is called by forward on the training thread.
// Failure: ValueError at construction for parameters on several devices; Error from the
// final callback (so from backward()) naming the parameters that got no gradient when
// find_unused_parameters is off; DistributedError from the collectives.
#ifndef STREAMGRAD_DISTRIBUTED_REDUCER_H_
#define STREAMGRAD_DISTRIBUTED_REDUCER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "distributed/process_group.h"
#include "engine/tensor.h"
#include "runtime/backend/event.h"
#include "runtime/backend/stream.h"

namespace streamgrad {
namespace distributed {
namespace ddp_internal {

class Reducer : public std::enable_shared_from_this<Reducer> {
 public:
  Reducer(std::vector<std::pair<std::string, Tensor>> params, std::shared_ptr<ProcessGroup> group,
          int64_t bucket_cap_bytes, bool find_unused_parameters);
  // Registers the hooks (they hold the reducer weakly: a dead DDP leaves inert hooks).
  void install_hooks();

  // Called by forward: whether the coming backward reduces (no_sync: it does not), and,
  // with find_unused_parameters, the parameters the forward's graph reaches.
  void prepare(bool sync, const std::vector<Tensor>& outputs);

  std::vector<std::vector<size_t>> bucket_indices() const;
  // The buckets started since the last clear, in start order (tests check the order).
  std::vector<size_t> launch_log() const;
  void clear_launch_log();

 private:
  struct Bucket {
    std::vector<size_t> params;   // indices into params_
    std::vector<int64_t> offset;  // of each parameter's slot in flat (elements)
    Tensor flat;
    size_t pending = 0;  // slots not yet filled this iteration
    std::shared_ptr<Work> work;
    std::map<Stream, Event> filled_on;  // last copy-in per stream
    Event copied_back;  // on the caller's stream after the last copy-back
  };

  void on_grad_ready(size_t i);
  // Fills parameter i's slot (its .grad, or zeros) on the current stream.
  void mark_ready(size_t i, bool has_grad) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void launch_ready() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void finalize();
  Tensor slot(const Bucket& b, size_t k) const;

  const std::vector<std::pair<std::string, Tensor>> params_;
  const std::shared_ptr<ProcessGroup> group_;
  const bool find_unused_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_, slot_of_;

  mutable std::mutex mu_;
  bool expect_hooks_ ABSL_GUARDED_BY(mu_) = false;
  bool callback_queued_ ABSL_GUARDED_BY(mu_) = false;
  bool unused_marked_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<char> ready_ ABSL_GUARDED_BY(mu_);
  std::vector<char> reached_ ABSL_GUARDED_BY(mu_);  // by the forward graph (find_unused)
  std::vector<char> has_grad_ ABSL_GUARDED_BY(mu_);
  size_t next_launch_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<size_t> launch_log_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp_internal
}  // namespace distributed
}  // namespace streamgrad

#endif  // STREAMGRAD_DISTRIBUTED_REDUCER_H_
