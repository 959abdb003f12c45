// Private to the host kernels: whether this is a ThreadSanitizer build, and how code that
// TSan does not instrument tells it which memory a call reads and writes.
//
//   SG_HOST_UNDER_TSAN          defined in ThreadSanitizer builds
//   announce(p, n, step, size, writes)   n elements of `size` bytes at p, `step` elements
//                               apart, are read (writes false) or written (true) now
//   announce_matrix(p, rows, cols, ld, size, writes)   the same for a row-major matrix
//
// Why: the level loops (loops.h) are compiled without TSan's per-access instrumentation in
// the tsan build (.bazelrc), where checking every element was two thirds of a
// training run's time; announced_loops.cc announces each call's rows instead, which is
// what TSan is there to check in them (two sim streams touching one buffer without a
// wait). The libraries TSan never instruments (OpenBLAS, oneDNN) have their operands
// announced likewise by their callers (gemm.cc, onednn_conv.cc). A contiguous row is one
// range; a row whose step is 0 is its one element; any other strided row is announced
// element by element, so that nothing between its elements is claimed. TSan checks a
// range one 8-byte cell at a time: float32 rows cost half what their elements did.
// Outside TSan builds announce() does nothing.
//
// Thread-safety: no state. Failure: none; TSan reports a race as it would for the accesses.
#ifndef STREAMGRAD_KERNELS_HOST_TSAN_ANNOUNCE_H_
#define STREAMGRAD_KERNELS_HOST_TSAN_ANNOUNCE_H_

#include <cstddef>
#include <cstdint>

#if defined(__SANITIZE_THREAD__)
#define SG_HOST_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SG_HOST_UNDER_TSAN 1
#endif
#endif

#ifdef SG_HOST_UNDER_TSAN
// TSan's runtime exports these (GCC and Clang alike); no header declares them.
extern "C" void __tsan_read_range(void* addr, unsigned long size);
extern "C" void __tsan_write_range(void* addr, unsigned long size);
#endif

namespace streamgrad {
namespace kernels {
namespace cpu {

inline void announce([[maybe_unused]] const void* p, [[maybe_unused]] int64_t n,
                     [[maybe_unused]] int64_t step, [[maybe_unused]] size_t size,
                     [[maybe_unused]] bool writes) {
#ifdef SG_HOST_UNDER_TSAN
  if (p == nullptr || n <= 0) return;
  char* at = static_cast<char*>(const_cast<void*>(p));
  const auto range = [writes](char* q, size_t bytes) {
    if (writes) {
      __tsan_write_range(q, bytes);
    } else {
      __tsan_read_range(q, bytes);
    }
  };
  if (step == 1 || n == 1) return range(at, static_cast<size_t>(n) * size);
  if (step == 0) return range(at, size);
  for (int64_t i = 0; i < n; ++i) range(at + i * step * static_cast<int64_t>(size), size);
#endif
}

// A row-major matrix of `rows` rows of `cols` contiguous elements, `ld` elements apart.
inline void announce_matrix([[maybe_unused]] const void* p, [[maybe_unused]] int64_t rows,
                            [[maybe_unused]] int64_t cols, [[maybe_unused]] int64_t ld,
                            [[maybe_unused]] size_t size, [[maybe_unused]] bool writes) {
#ifdef SG_HOST_UNDER_TSAN
  if (cols == ld) return announce(p, rows * cols, 1, size, writes);
  const char* at = static_cast<const char*>(p);
  for (int64_t r = 0; r < rows; ++r) {
    announce(at + r * ld * static_cast<int64_t>(size), cols, 1, size, writes);
  }
#endif
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_HOST_TSAN_ANNOUNCE_H_
