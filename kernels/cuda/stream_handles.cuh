// One library handle (cuBLAS, cuDNN) per (device, stream), made on first use:
//
//   using Handle = StreamHandle<cublasHandle_t>;
//   Handle& h = handle_for_stream<Handle>(stream, [&](Handle& fresh) { ...create... });
//   std::lock_guard<std::mutex> lk(h.mu);   // around each use
//
// A handle is bound to one stream, and these libraries' handles must not be used by two
// host threads at once, hence one per stream and a lock around each use. Each Handle type
// has its own table. Handles live as long as the process, as streams do (never freed).
// `make` runs inside launch(), where the stream's device is current, so the handle (and
// any workspace it makes) lives on that device.
//
// Thread-safety: any thread. Failure: what `make` throws; the entry stays empty and the
// next call tries again.
#ifndef STREAMGRAD_KERNELS_CUDA_STREAM_HANDLES_CUH_
#define STREAMGRAD_KERNELS_CUDA_STREAM_HANDLES_CUH_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "runtime/backend/stream.h"

namespace streamgrad {
namespace kernels {
namespace cuda {

template <typename Raw>
struct StreamHandle {
  std::mutex mu;  // held around each use
  Raw handle = nullptr;
};

// What to do when a library call fails, appended to the libraries' error messages.
constexpr const char* kLibraryFailureHint =
    "out of memory: free tensors or empty_cache(); otherwise errors of earlier asynchronous "
    "work can surface here, rerun with STREAMGRAD_LAUNCH_BLOCKING=1";

template <typename Handle, typename Make>
Handle& handle_for_stream(const Stream& stream, Make make) {
  static std::mutex mu;
  static auto* handles = new std::map<std::pair<int, int64_t>, std::unique_ptr<Handle>>();
  std::lock_guard<std::mutex> lk(mu);
  std::unique_ptr<Handle>& h =
      (*handles)[{stream.device().index(), static_cast<int64_t>(stream.id())}];
  if (h == nullptr) {
    auto fresh = std::make_unique<Handle>();
    make(*fresh);
    h = std::move(fresh);
  }
  return *h;
}

}  // namespace cuda
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_CUDA_STREAM_HANDLES_CUH_
