// The cuda backend on a device: streams, priorities, events, ordering between streams, the
// caching allocator, launch, and the stream sanitizer on cuda streams. GPU-only (tag "gpu", tests/gpu_required.h): runs on a GPU
// and on the interpreted CUDA device (--config=cudaemu).
#include <cuda_runtime_api.h>

#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "runtime/cuda/cuda_stream.h"
#include "runtime/observe/stream_sanitizer.h"
#include "runtime/runtime.h"
#include "tests/gpu_required.h"

namespace streamgrad {
namespace {

using testing::require_cuda_device;

constexpr size_t kBytes = 1 << 20;

bool all_equal(const std::vector<unsigned char>& v, unsigned char value) {
  for (unsigned char c : v) {
    if (c != value) return false;
  }
  return true;
}

TEST_CASE("cuda device name and default stream", "[cuda][gpu]") {
  require_cuda_device();
  const std::string name = backend(DeviceType::kCuda).device_name(0);
  CHECK(name.find("(sm_") != std::string::npos);
  const cudaStream_t raw = raw_cuda_stream(Stream::default_for(Device("cuda:0")));
  // Id 0 is a non-blocking stream of its own, never the legacy or per-thread stream.
  REQUIRE(raw != nullptr);
  REQUIRE(raw != cudaStreamLegacy);
  REQUIRE(raw != cudaStreamPerThread);
  unsigned flags = 0;
  REQUIRE(cudaStreamGetFlags(raw, &flags) == cudaSuccess);
  CHECK((flags & cudaStreamNonBlocking) != 0);
  REQUIRE(raw_cuda_stream(Stream::default_for(Device("cuda:0"))) == raw);
}

TEST_CASE("cuda stream priorities are clamped to the device's range", "[cuda][gpu]") {
  require_cuda_device();
  int least = 0, greatest = 0;
  REQUIRE(cudaDeviceGetStreamPriorityRange(&least, &greatest) == cudaSuccess);
  CHECK(Stream::create(Device("cuda:0"), -1000).priority() == greatest);
  CHECK(Stream::create(Device("cuda:0"), 1000).priority() == least);
  CHECK(Stream::default_for(Device("cuda:0")).priority() == 0);
}

TEST_CASE("cuda stream work runs in order: fill then copy back", "[cuda][gpu]") {
  require_cuda_device();
  const Stream s = Stream::create(Device("cuda:0"));
  DeviceAllocator& alloc = allocator_for(Device("cuda:0"));
  void* p = alloc.allocate(kBytes, s);
  std::vector<unsigned char> host(kBytes, 0);
  // The sleep holds the first fill back; the second must still land after it.
  sleep(s, 5000);
  fill_async(s, p, 0x11, kBytes);
  fill_async(s, p, 0xAB, kBytes);
  copy_async(s, host.data(), p, kBytes);
  s.synchronize();
  CHECK(all_equal(host, 0xAB));
  CHECK(s.query());
  alloc.free(p);
}

TEST_CASE("cuda events time a 20 ms sleep", "[cuda][gpu]") {
  require_cuda_device();
  const Stream s = Stream::create(Device("cuda:0"));
  Event start(true), end(true);
  start.record(s);
  sleep(s, 20000);
  end.record(s);
  end.synchronize();
  REQUIRE(end.query());
  REQUIRE(start.query());
  CHECK(start.elapsed_ms(end) >= 15.0);
  Event untimed;
  CHECK(untimed.query());  // never recorded: complete
  untimed.record(s);
  untimed.synchronize();
  CHECK(untimed.query());
}

TEST_CASE("cuda wait_stream orders one stream after another", "[cuda][gpu]") {
  require_cuda_device();
  const Stream producer = Stream::create(Device("cuda:0"));
  const Stream consumer = Stream::create(Device("cuda:0"));
  DeviceAllocator& alloc = allocator_for(Device("cuda:0"));
  void* p = alloc.allocate(kBytes, producer);
  fill_async(producer, p, 0, kBytes);
  producer.synchronize();
  // Without the wait, the copy would read the zeros before the delayed fill.
  sleep(producer, 20000);
  fill_async(producer, p, 7, kBytes);
  consumer.wait_stream(producer);
  alloc.record_stream(p, consumer);
  std::vector<unsigned char> host(kBytes, 0xFF);
  copy_async(consumer, host.data(), p, kBytes);
  consumer.synchronize();
  CHECK(all_equal(host, 7));
  alloc.free(p);
  synchronize(Device("cuda:0"));
}

// With STREAMGRAD_NO_MEMORY_CACHING=1 the same steps check the opposite: every free gives
// the segment back at once and nothing is served from a cache.
TEST_CASE("cuda allocator reuses a block freed on its stream", "[cuda][gpu]") {
  require_cuda_device();
  DeviceAllocator& alloc = allocator_for(Device("cuda:0"));
  const Stream s = Stream::create(Device("cuda:0"));
  // Earlier cases' cached blocks are anyone's once their streams are idle: start empty.
  synchronize(Device("cuda:0"));
  empty_cache(Device("cuda:0"));
  const MemoryStats before = memory_stats(Device("cuda:0"));
  void* p = alloc.allocate(kBytes, s);
  REQUIRE(p != nullptr);
  alloc.free(p);
  if (!alloc.caching()) {
    const MemoryStats freed = memory_stats(Device("cuda:0"));
    CHECK(freed.reserved_bytes.current == before.reserved_bytes.current);
    CHECK(freed.num_segment_frees == before.num_segment_frees + 1);
    void* again = alloc.allocate(kBytes, s);
    CHECK(memory_stats(Device("cuda:0")).num_cache_hits == before.num_cache_hits);
    alloc.free(again);
    return;
  }
  void* q = alloc.allocate(kBytes, s);
  CHECK(q == p);
  const MemoryStats after = memory_stats(Device("cuda:0"));
  CHECK(after.num_cache_hits == before.num_cache_hits + 1);
  alloc.free(q);
  empty_cache(Device("cuda:0"));
  CHECK(memory_stats(Device("cuda:0")).reserved_bytes.current == 0);
}

TEST_CASE("cuda launch runs the work at once with the stream's device current",
          "[cuda][gpu]") {
  require_cuda_device();
  const Device last(DeviceType::kCuda, device_count(DeviceType::kCuda) - 1);
  const Stream s = Stream::create(last);
  bool ran = false;
  int during = -1;
  launch(s, {"probe", {}, {}}, [&] {
    ran = true;
    check_cuda(cudaGetDevice(&during), "cudaGetDevice");
  });
  CHECK(ran);
  CHECK(during == last.index());
}

// A copy stream fills a device buffer from the host and a compute stream reads it, as a
// data loader and a training step do. On the interpreted device the sanitizer learns of
// waits from the emulated runtime (cudaStreamWaitEvent as the backend really called it),
// so a wait the backend forgets is a finding here too.
struct CopyThenCompute {
  CopyThenCompute() {
    load();
    copied.record(copy);  // the compute stream's wait, if a case makes it, is on this
  }
  ~CopyThenCompute() { synchronize(Device("cuda:0")); }

  void load() { copy_async(copy, buf.data(), host.data(), kBytes); }
  void consume() {
    const MemRange r[] = {{buf.data(), kBytes}};
    launch(compute, {"consume", r, {}}, [] {});
  }

  struct Required {
    Required() { require_cuda_device(); }
  } required;                             // first: before any member touches cuda
  SanitizerSuppression races_on_purpose;  // the unordered case races deliberately
  StreamSanitizer san{StreamSanitizer::Mode::kCollect};
  Stream copy = Stream::create(Device("cuda:0"));
  Stream compute = Stream::create(Device("cuda:0"));
  Storage buf = Storage::allocate(kBytes, copy);
  std::vector<unsigned char> host = std::vector<unsigned char>(kBytes, 3);
  Event copied;
};

TEST_CASE("cuda: the sanitizer accepts a copy ordered before compute by an event",
          "[cuda][gpu][sanitizer]") {
  CopyThenCompute f;
  f.copied.block(f.compute);
  f.consume();
  // The next batch overwrites the buffer: the copy stream waits for the read first.
  Event consumed;
  consumed.record(f.compute);
  consumed.block(f.copy);
  f.load();
  f.compute.wait_stream(f.copy);
  f.consume();
  CHECK(f.san.findings().empty());
}

TEST_CASE("cuda: the sanitizer reports compute that reads a copy it did not wait for",
          "[cuda][gpu][sanitizer]") {
  CopyThenCompute f;
  f.consume();  // without f.copied.block(f.compute)
  const auto found = f.san.findings();
  REQUIRE(found.size() == 1);
  CHECK(found[0].current.op == "consume");
  CHECK(found[0].current.stream == f.compute);
  CHECK(found[0].previous.stream == f.copy);
  CHECK(found[0].message.find("on cuda:0/s") != std::string::npos);
}

}  // namespace
}  // namespace streamgrad
