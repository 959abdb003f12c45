// The cuda backend's memory (runtime/cuda/cuda_backend.h): copies and fills on a stream,
// direct copies between GPUs, device memory for the caching allocator and page-locked
// host memory. Out of memory is an answer (nullptr) for the allocator to handle.
#include <algorithm>
#include <mutex>
#include <utility>

#include "runtime/cuda/cuda_backend.h"

namespace streamgrad {
namespace cuda_internal {

void CudaBackend::copy_async(void* dst, const void* src, size_t bytes, const Stream& s) {
  if (bytes == 0) return;
  const int index = s.device().index();
  if (count_ > 1) allow_peer_copy(device_of(src), device_of(dst));
  DeviceSwitch on(index);
  // cudaMemcpyDefault lets unified addressing tell host from device memory on each side.
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream(index, s.id())),
        "copy_async (cudaMemcpyAsync)", index);
}

void CudaBackend::fill_async(void* dst, unsigned char value, size_t bytes, const Stream& s) {
  if (bytes == 0) return;
  const int index = s.device().index();
  DeviceSwitch on(index);
  check(cudaMemsetAsync(dst, value, bytes, stream(index, s.id())),
        "fill_async (cudaMemsetAsync)", index);
}

int CudaBackend::device_of(const void* p) {
  cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return a.type == cudaMemoryTypeDevice ? a.device : -1;
}

// A copy between two GPUs goes over NVLink or PCIe directly once each may access the
// other's memory; without that, cudaMemcpy stages it through the host (still correct).
// Enabled once per pair, both ways, as PyTorch does on a pair's first copy; a pair that
// cannot (no P2P between them) is remembered and left staged.
void CudaBackend::allow_peer_copy(int a, int b) {
  if (a < 0 || b < 0 || a == b) return;
  std::lock_guard<std::mutex> lk(peer_mu_);
  const int key = std::min(a, b) * kMaxDevicesPerType + std::max(a, b);
  if (!peer_done_.insert(key).second) return;
  int can_ab = 0, can_ba = 0;
  if (cudaDeviceCanAccessPeer(&can_ab, a, b) != cudaSuccess ||
      cudaDeviceCanAccessPeer(&can_ba, b, a) != cudaSuccess || !can_ab || !can_ba) {
    (void)cudaGetLastError();
    return;
  }
  for (const auto& [from, to] : {std::pair<int, int>{a, b}, std::pair<int, int>{b, a}}) {
    DeviceSwitch on(from);
    const cudaError_t err = cudaDeviceEnablePeerAccess(to, 0);
    if (err == cudaErrorPeerAccessAlreadyEnabled) {
      (void)cudaGetLastError();  // the user enabled it: fine
    } else {
      check(err, "cudaDeviceEnablePeerAccess (a copy between GPUs)", from);
    }
  }
}

void* CudaBackend::raw_alloc(int index, size_t bytes) {
  DeviceSwitch on(index);
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // out of memory is an answer: the allocator handles it
    return nullptr;
  }
  check(err, "cudaMalloc", index);
  return p;
}

void CudaBackend::raw_free(int index, void* ptr) {
  if (ptr == nullptr) return;
  DeviceSwitch on(index);
  const cudaError_t err = cudaFree(ptr);
  if (err == cudaErrorCudartUnloading) {
    (void)cudaGetLastError();  // process exit: the memory goes with the context
    return;
  }
  check(err, "cudaFree", index);
}

size_t CudaBackend::total_memory(int index) const {
  DeviceSwitch on(index);
  size_t free_bytes = 0, total_bytes = 0;
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo", index);
  return total_bytes;
}

void* CudaBackend::pinned_alloc(size_t bytes) {
  void* p = nullptr;
  // Portable: page-locked for every device's copies, not only the current one's.
  if (cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocPortable) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return p;
}

void CudaBackend::pinned_free(void* ptr) noexcept {
  if (ptr != nullptr && cudaFreeHost(ptr) != cudaSuccess) (void)cudaGetLastError();
}

}  // namespace cuda_internal
}  // namespace streamgrad
