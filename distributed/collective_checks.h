// What every process group checks before a collective, and how it words a failure
// (internal to distributed/: gloo_group.cc and nccl_group.cc).
//
// Thread-safety: pure functions. Failure: ValueError naming the op, the tensor and what to
// pass instead.
#ifndef STREAMGRAD_DISTRIBUTED_COLLECTIVE_CHECKS_H_
#define STREAMGRAD_DISTRIBUTED_COLLECTIVE_CHECKS_H_

#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/tensor.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace distributed {
namespace internal {

// Defined, contiguous, float32 / float64 / int64.
inline void check_collective_tensor(const char* op, const Tensor& t) {
  SG_CHECK(t.defined(), ValueError, op, ": the tensor is undefined");
  SG_CHECK(t.is_contiguous(), ValueError, op, ": ", t.describe(),
           " is not contiguous; pass contiguous(t) and copy the result back");
  SG_CHECK(t.dtype() == DType::kFloat32 || t.dtype() == DType::kFloat64 ||
               t.dtype() == DType::kInt64,
           ValueError, op, ": ", t.describe(), " is not float32, float64 or int64");
}

// One part per process, each like `like`.
inline void check_collective_parts(const char* op, const std::vector<Tensor>& parts,
                                   const Tensor& like, int group_size) {
  SG_CHECK(static_cast<int>(parts.size()) == group_size, ValueError, op, ": ", parts.size(),
           " tensors for a group of ", group_size, "; pass one per process");
  for (const Tensor& p : parts) {
    SG_CHECK(p.defined() && p.sizes() == like.sizes() && p.dtype() == like.dtype() &&
                 p.device() == like.device(),
             ValueError, op, ": ", p.defined() ? p.describe() : std::string("undefined"),
             " does not match ", like.describe(), "; every part must be alike");
  }
}

inline void check_collective_root(const char* op, int root, int group_size) {
  SG_CHECK(root >= 0 && root < group_size, ValueError, op, ": root ", root,
           " is not a rank of this group of ", group_size);
}

inline DistributedError collective_failure(const char* op, int rank, int size,
                                           std::chrono::milliseconds timeout,
                                           const std::string& what) {
  return DistributedError(absl::StrCat(
      op, " on rank ", rank, " of ", size, " failed: ", what,
      "; a peer has exited, or did not join this collective within ", timeout.count(),
      " ms (every process must issue the same collectives in the same order)"));
}

}  // namespace internal
}  // namespace distributed
}  // namespace streamgrad

#endif  // STREAMGRAD_DISTRIBUTED_COLLECTIVE_CHECKS_H_
