// The tensors of a collective queued on a communication stream, kept alive by its Work
// instead of record_stream (as the reference framework's TORCH_NCCL_AVOID_RECORD_STREAMS,
// its default now): internal to distributed/ (gloo_group.cc, nccl_group.cc).
//
// record_stream keeps a block from reuse until the communication stream passes the point
// where the block is freed, which may be long after the collective (a block is freed late
// in a step), and memory stays stranded meanwhile. Here the Work holds the tensors; wait()
// makes the caller's stream wait for the collective and then lets them go: a tensor whose
// memory belongs to that stream is then reused only after the collective, by stream order.
// A tensor allocated on another stream, and every tensor of a Work dropped without wait(),
// falls back to record_stream on the communication stream, so nothing is ever reused early.
//
// Thread-safety: none of its own (a Work is used by one thread at a time).
// Failure: none.
#ifndef STREAMGRAD_DISTRIBUTED_STASHED_INPUTS_H_
#define STREAMGRAD_DISTRIBUTED_STASHED_INPUTS_H_

#include <optional>
#include <utility>
#include <vector>

#include "engine/tensor.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace distributed {
namespace internal {

class StashedInputs {
 public:
  StashedInputs() = default;
  StashedInputs(std::vector<Tensor> tensors, Stream comm)
      : tensors_(std::move(tensors)), comm_(std::move(comm)) {}
  StashedInputs(StashedInputs&& other) noexcept
      : tensors_(std::move(other.tensors_)), comm_(std::exchange(other.comm_, std::nullopt)) {}
  StashedInputs& operator=(StashedInputs&&) = delete;
  ~StashedInputs() { release(std::nullopt); }

  // `caller` now waits for the collective (its done event): memory allocated on it is free
  // to go back to the allocator.
  void release_after_wait(const Stream& caller) { release(caller); }

 private:
  void release(const std::optional<Stream>& waited) {
    if (!comm_) return;
    for (const Tensor& t : tensors_) {
      if (!waited || t.storage().stream() != *waited) t.storage().record_stream(*comm_);
    }
    tensors_.clear();
    comm_.reset();
  }

  std::vector<Tensor> tensors_;
  std::optional<Stream> comm_;
};

}  // namespace internal
}  // namespace distributed
}  // namespace streamgrad

#endif  // STREAMGRAD_DISTRIBUTED_STASHED_INPUTS_H_
