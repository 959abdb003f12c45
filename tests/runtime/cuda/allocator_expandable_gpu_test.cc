// STREAMGRAD_ALLOC_CONF=expandable_segments:True on cuda (this target's environment), through
// the driver's virtual memory API: a growing request size reuses one segment that grows by
// granules; data written across granule boundaries reads back; empty_cache() unmaps the
// free granules at the end and gives the memory back to the device, and the segment grows
// again afterwards; a granule is unmapped only after the queued work that reads it ran.
// GPU-only (tag "gpu", tests/gpu_required.h): runs on a GPU and on the interpreted CUDA
// device (--config=cudaemu), where unmapped memory faults when touched. It reads the
// device's free memory, which every process on the GPU changes: the target is tagged
// exclusive, so that it runs alone (a first H200 run beside 13 other tests saw the free
// memory grow while this test mapped 6 MiB).
#include <cuda_runtime_api.h>

#include <vector>

#include <catch2/catch.hpp>

#include "runtime/runtime.h"
#include "tests/gpu_required.h"

namespace streamgrad {
namespace {

using testing::require_cuda_device;

constexpr size_t kMiB = size_t{1} << 20;

Device dev() { return Device("cuda:0"); }

size_t granularity() { return backend(DeviceType::kCuda).vm_granularity(0); }

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

size_t device_free_bytes() {
  size_t free = 0, total = 0;
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  REQUIRE(cudaMemGetInfo(&free, &total) == cudaSuccess);
  return free;
}

void start_empty() {
  require_cuda_device();
  REQUIRE(granularity() > 0);  // the device maps memory: no fallback to whole segments
  synchronize(dev());
  empty_cache(dev());
  reset_peak_stats(dev());
  REQUIRE(memory_stats(dev()).reserved_bytes.current == 0);
}

// `bytes` of p, copied to the host after the stream's queued work.
std::vector<unsigned char> read_back(const Stream& s, const void* p, size_t bytes) {
  std::vector<unsigned char> host(bytes, 0);
  copy_async(s, host.data(), p, bytes);
  s.synchronize();
  return host;
}

bool all_equal(const std::vector<unsigned char>& v, unsigned char value) {
  for (unsigned char c : v) {
    if (c != value) return false;
  }
  return true;
}

TEST_CASE("cuda: a growing request size reuses one segment", "[allocator][expandable][gpu]") {
  start_empty();
  const Stream s = current_stream(dev());
  for (size_t mib = 2; mib <= 8; ++mib) {
    Storage a = Storage::allocate(mib * kMiB, s);
    fill_async(s, a.data(), static_cast<unsigned char>(mib), mib * kMiB);
    CHECK(all_equal(read_back(s, a.data(), mib * kMiB), static_cast<unsigned char>(mib)));
  }
  const MemoryStats st = memory_stats(dev());
  CHECK(st.reserved_bytes.peak == static_cast<int64_t>(round_up(8 * kMiB, granularity())));
  CHECK(st.segments.current == 1);
}

TEST_CASE("cuda: empty_cache unmaps the free end and the device gets the memory back",
          "[allocator][expandable][gpu]") {
  start_empty();
  const size_t free_before = device_free_bytes();
  const Stream s = current_stream(dev());
  {
    Storage a = Storage::allocate(6 * kMiB, s);
    fill_async(s, a.data(), 0x3C, 6 * kMiB);
    CHECK(all_equal(read_back(s, a.data(), 6 * kMiB), 0x3C));
    CHECK(device_free_bytes() <= free_before - 6 * kMiB);
  }
  empty_cache(dev());
  CHECK(memory_stats(dev()).reserved_bytes.current == 0);
  CHECK(device_free_bytes() == free_before);
  // Mapped again, at the same addresses.
  Storage b = Storage::allocate(6 * kMiB, s);
  fill_async(s, b.data(), 0xC3, 6 * kMiB);
  CHECK(all_equal(read_back(s, b.data(), 6 * kMiB), 0xC3));
  CHECK(memory_stats(dev()).reserved_bytes.current ==
        static_cast<int64_t>(round_up(6 * kMiB, granularity())));
}

TEST_CASE("cuda: memory is unmapped only after queued work that reads it ran",
          "[allocator][expandable][gpu]") {
  start_empty();
  const Stream s = current_stream(dev());
  Storage kept = Storage::allocate(4 * kMiB, s);
  {
    Storage dropped = Storage::allocate(4 * kMiB, s);
    fill_async(s, dropped.data(), 0x5A, 4 * kMiB);
    sleep(s, 50000);  // the copy below is still queued when empty_cache() unmaps
    copy_async(s, kept.data(), dropped.data(), 4 * kMiB);
  }
  // `dropped` is free for its own stream at once, and at the end of the segment.
  empty_cache(dev());
  CHECK(memory_stats(dev()).reserved_bytes.current ==
        static_cast<int64_t>(round_up(4 * kMiB, granularity())));
  CHECK(all_equal(read_back(s, kept.data(), 4 * kMiB), 0x5A));
}

}  // namespace
}  // namespace streamgrad
