// The cpu backend: one device with one synchronous stream. Work runs on the calling
// thread at submit(), so every event is complete as soon as it is recorded.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "runtime/backend/backend.h"
#include "runtime/backend/cpu_settings.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace {

constexpr size_t kAlignment = 64;

size_t aligned_size(size_t n) { return ((n == 0 ? 1 : n) + kAlignment - 1) / kAlignment * kAlignment; }

class CpuEvent final : public BackendEvent {
 public:
  std::chrono::steady_clock::time_point when;
};

class CpuBackend final : public Backend {
 public:
  DeviceType type() const noexcept override { return DeviceType::kCpu; }
  int device_count() const noexcept override { return 1; }
  std::string device_name(int) const override { return "host cpu"; }
  Facts backend_facts() const override { return {}; }
  Facts device_facts(int) const override {
    return {{"hardware threads", std::to_string(std::thread::hardware_concurrency())},
            {"kernel threads", std::to_string(get_num_threads())},
            {"kernel level", cpu_capability_name(cpu_capability())}};
  }
  void on_set_device(int) noexcept override {}

  StreamId create_stream(int, int) override { return 0; }
  bool stream_exists(const Stream& s) const noexcept override { return s.id() == 0; }
  int stream_count(int) const noexcept override { return 1; }
  int stream_priority(const Stream&) const override { return 0; }
  bool query_stream(const Stream&) override { return true; }
  void synchronize_stream(const Stream&) override {}
  void synchronize_device(int) override {}

  std::unique_ptr<BackendEvent> create_event(int, bool) override {
    return std::make_unique<CpuEvent>();
  }
  void record_event(BackendEvent& event, const Stream&) override {
    static_cast<CpuEvent&>(event).when = std::chrono::steady_clock::now();
  }
  void block_event(BackendEvent&, const Stream&) override {}
  bool query_event(BackendEvent&) override { return true; }
  void synchronize_event(BackendEvent&) override {}
  double elapsed_ms(BackendEvent& start, BackendEvent& end) override {
    return std::chrono::duration<double, std::milli>(static_cast<CpuEvent&>(end).when -
                                                     static_cast<CpuEvent&>(start).when)
        .count();
  }
  bool reports_orderings() const noexcept override { return false; }

  void submit(const Stream&, HostFn fn) override { fn(); }
  void sleep(const Stream&, double microseconds) override {
    std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(microseconds));
  }
  void copy_async(void* dst, const void* src, size_t bytes, const Stream&) override {
    std::memmove(dst, src, bytes);
  }
  void fill_async(void* dst, unsigned char value, size_t bytes, const Stream&) override {
    std::memset(dst, value, bytes);
  }

  void* raw_alloc(int, size_t bytes) override {
    // Every block is cache-line aligned, tiny ones too: the cpu allocator reuses freed
    // blocks (caching_allocator.h), so glibc's slower aligned path runs on cache misses
    // only.
    return std::aligned_alloc(kAlignment, aligned_size(bytes));
  }
  void raw_free(int, void* ptr) override { std::free(ptr); }
  size_t total_memory(int) const override {
    return static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
  }
  // The cpu allocator keeps one block per segment (caching_allocator.h): no mapping.
  size_t vm_granularity(int) const override { return 0; }
  void* vm_reserve(int, size_t) override { return nullptr; }
  bool vm_map(int, void*, size_t) override { return false; }
  void vm_unmap(int, void*, size_t) override {}
  void* pinned_alloc(size_t bytes) override { return raw_alloc(0, bytes); }
  void pinned_free(void* ptr) noexcept override { std::free(ptr); }
};

SG_REGISTER_BACKEND(DeviceType::kCpu, CpuBackend);

}  // namespace
}  // namespace streamgrad
