// Helpers shared by the kernel tests.
//
// Offers:
//   kDevices / test_device()   the devices every kernel test runs on (cpu and sim:0), as a
//                      Catch2 GENERATE.
//   Shape              sizes, strides and an element offset into a buffer, with
//                      offsets() listing each element's position in row-major order.
//   Buffer<T>          device memory filled from host values; view(shape) makes the
//                      kernel View, read() copies everything back (blocking, on the
//                      device's current stream). bool data uses uint8_t host values.
//   gather(host, shape)    a view's elements in row-major order from host values.
//   random_values<T>(n, lo, hi, seed), check_close(got, want)   inputs and comparisons.
//   expect_value_error(fn, part)   fn throws a ValueError whose message contains part.
//   LaunchLog          a launch observer that records kernel launches; expect_ranges()
//                      checks that the last one declared ranges covering each view it
//                      reads and writes, and writes nothing else.
//
// Thread-safety: LaunchLog is safe to call from any thread; the rest is for the test
// thread. Failure: Catch2 assertions.
#ifndef STREAMGRAD_TESTS_KERNELS_KERNEL_TEST_UTIL_H_
#define STREAMGRAD_TESTS_KERNELS_KERNEL_TEST_UTIL_H_

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/kernels.h"
#include "runtime/runtime.h"
#include "tests/device_names.h"

namespace streamgrad {
namespace testing {

using kernels::View;

inline Device test_device() { return Device(GENERATE(from_range(device_names()))); }

template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same<T, uint8_t>::value) {
    return DType::kBool;
  } else {
    return DTypeOf<T>::value;
  }
}

struct Shape {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  // empty: contiguous
  int64_t offset = 0;

  Shape(std::vector<int64_t> s, std::vector<int64_t> st = {}, int64_t off = 0)
      : sizes(std::move(s)), strides(std::move(st)), offset(off) {
    if (strides.empty()) strides = kernels::contiguous_strides(sizes);
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
  // Each element's position in the buffer, row-major.
  std::vector<int64_t> offsets() const {
    std::vector<int64_t> out;
    const int64_t n = numel();
    out.reserve(static_cast<size_t>(n));
    std::vector<int64_t> idx(sizes.size(), 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t off = offset;
      for (size_t d = 0; d < sizes.size(); ++d) off += idx[d] * strides[d];
      out.push_back(off);
      for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
        if (++idx[d] < sizes[d]) break;
        idx[d] = 0;
      }
    }
    return out;
  }
  // The view with dims d0 and d1 swapped (a transpose of the same elements).
  Shape transposed(int d0, int d1) const {
    Shape t = *this;
    std::swap(t.sizes[d0], t.sizes[d1]);
    std::swap(t.strides[d0], t.strides[d1]);
    return t;
  }
};

template <typename T>
std::vector<T> gather(const std::vector<T>& host, const Shape& s) {
  std::vector<T> out;
  for (int64_t off : s.offsets()) out.push_back(host.at(static_cast<size_t>(off)));
  return out;
}

template <typename T>
class Buffer {
 public:
  Buffer(Device device, const std::vector<T>& host)
      : device_(device),
        n_(host.size()),
        storage_(Storage::allocate(std::max<size_t>(1, host.size()) * sizeof(T), device)) {
    write(host);
  }
  Buffer(Device device, size_t n, T value) : Buffer(device, std::vector<T>(n, value)) {}

  void write(const std::vector<T>& host) {
    REQUIRE(host.size() == n_);
    copy_bytes(storage_.data(), device_, host.data(), Device("cpu"), n_ * sizeof(T));
  }
  std::vector<T> read() const {
    std::vector<T> host(n_);
    copy_bytes(host.data(), Device("cpu"), storage_.data(), device_, n_ * sizeof(T));
    return host;
  }
  View view(const Shape& s) const {
    View v;
    v.data = static_cast<T*>(storage_.data()) + s.offset;
    v.dtype = dtype_of<T>();
    v.sizes = s.sizes;
    v.strides = s.strides;
    return v;
  }
  View view() const { return view(Shape({static_cast<int64_t>(n_)})); }
  void* data() const { return storage_.data(); }

 private:
  Device device_;
  size_t n_;
  Storage storage_;
};

// Every address a view touches, one entry per element.
inline std::vector<const char*> element_addresses(const View& v) {
  std::vector<const char*> out;
  Shape s(v.sizes, v.strides);
  for (int64_t off : s.offsets()) {
    out.push_back(static_cast<const char*>(v.data) +
                  off * static_cast<int64_t>(element_size(v.dtype)));
  }
  return out;
}

inline bool covered(const std::vector<MemRange>& ranges, const char* p, size_t bytes) {
  for (const MemRange& r : ranges) {
    const char* lo = static_cast<const char*>(r.ptr);
    if (p >= lo && p + bytes <= lo + r.bytes) return true;
  }
  return false;
}

class LaunchLog : public LaunchObserver {
 public:
  struct Seen {
    std::string name;
    std::vector<MemRange> reads, writes;
  };

  LaunchLog() { add_launch_observer(this); }
  ~LaunchLog() override { remove_launch_observer(this); }
  LaunchLog(const LaunchLog&) = delete;
  LaunchLog& operator=(const LaunchLog&) = delete;

  void on_launch(const Stream&, const LaunchDesc& d) override {
    if (d.kind != LaunchKind::kKernel) return;  // the tests' own copies
    std::lock_guard<std::mutex> lk(mu_);
    seen_.push_back(Seen{d.name, {d.reads.begin(), d.reads.end()},
                         {d.writes.begin(), d.writes.end()}});
  }
  size_t count() const {
    std::lock_guard<std::mutex> lk(mu_);
    return seen_.size();
  }
  Seen last() const {
    std::lock_guard<std::mutex> lk(mu_);
    REQUIRE(!seen_.empty());
    return seen_.back();
  }

  // The last kernel launch was `name`, declared every element of `reads` as read and
  // of `writes` as written, and declared no written byte outside `writes`.
  void expect_ranges(const std::string& name, const std::vector<View>& reads,
                     const std::vector<View>& writes) const {
    const Seen s = last();
    CHECK(s.name == name);
    for (const View& v : reads) {
      for (const char* p : element_addresses(v)) {
        CHECK(covered(s.reads, p, element_size(v.dtype)));
      }
    }
    std::vector<MemRange> written;
    for (const View& v : writes) {
      for (const char* p : element_addresses(v)) {
        CHECK(covered(s.writes, p, element_size(v.dtype)));
        written.push_back({p, element_size(v.dtype)});
      }
    }
    // A write range may span gaps between a strided view's elements, but must start and
    // end on bytes the kernel writes.
    for (const MemRange& r : s.writes) {
      if (r.bytes == 0) continue;
      const char* lo = static_cast<const char*>(r.ptr);
      CHECK(covered(written, lo, 1));
      CHECK(covered(written, lo + r.bytes - 1, 1));
    }
  }

 private:
  mutable std::mutex mu_;
  std::vector<Seen> seen_;
};

// `fn` throws a ValueError whose message contains `part`.
template <typename F>
void expect_value_error(F fn, const char* part) {
  try {
    fn();
    FAIL("expected a ValueError");
  } catch (const ValueError& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find(part) != std::string::npos);
  }
}

// n values uniform in [lo, hi), reproducible from `seed`.
template <typename T>
std::vector<T> random_values(size_t n, double lo, double hi, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> out(n);
  for (T& v : out) v = static_cast<T>(dist(gen));
  return out;
}

// Relative-plus-absolute closeness for float32 / float64 results.
template <typename T>
void check_close(const std::vector<T>& got, const std::vector<double>& want,
                 double rel = std::is_same<T, float>::value ? 1e-5 : 1e-12,
                 double abs = std::is_same<T, float>::value ? 1e-6 : 1e-14) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    if (want[i] != want[i]) {
      CHECK(got[i] != got[i]);
    } else if (std::isinf(want[i])) {
      CHECK(static_cast<double>(got[i]) == want[i]);
    } else {
      CHECK(static_cast<double>(got[i]) ==
            Approx(want[i]).epsilon(rel).margin(abs));
    }
  }
}

}  // namespace testing
}  // namespace streamgrad

#endif  // STREAMGRAD_TESTS_KERNELS_KERNEL_TEST_UTIL_H_
