// Private to the host kernels that call oneDNN (gemm.cc, onednn_conv.cc): how they keep
// oneDNN's OpenMP to one thread, and whether this is a ThreadSanitizer build.
//
// oneDNN here is built on OpenMP, whose idle threads spin after every parallel region on
// the cores the kernels' own pool needs (kernels/host/gemm.h, onednn_conv.cc); so every
// oneDNN call runs with one OpenMP thread and streamgrad shares work out itself.
// Under ThreadSanitizer (SG_HOST_UNDER_TSAN, tsan_announce.h), which cannot see into
// oneDNN's JIT code and internal synchronisation, the callers keep oneDNN off their threads.
//
// Thread-safety: OneOmpThread changes the calling thread's OpenMP setting only (it is per
// thread). Failure: none.
#ifndef STREAMGRAD_KERNELS_HOST_ONEDNN_THREADS_H_
#define STREAMGRAD_KERNELS_HOST_ONEDNN_THREADS_H_

#include <omp.h>

#include "kernels/host/tsan_announce.h"

namespace streamgrad {
namespace kernels {
namespace cpu {

// oneDNN sees one OpenMP thread while this lives; the calling thread's own setting (a
// program may use OpenMP itself) comes back after.
class OneOmpThread {
 public:
  OneOmpThread() : saved_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneOmpThread() { omp_set_num_threads(saved_); }
  OneOmpThread(const OneOmpThread&) = delete;
  OneOmpThread& operator=(const OneOmpThread&) = delete;

 private:
  int saved_;
};

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_HOST_ONEDNN_THREADS_H_
