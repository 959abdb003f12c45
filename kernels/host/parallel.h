// Internal to the cpu kernels: parallel_for over a pool of worker threads.
//
//   cpu::parallel_for(0, numel, cpu::kParallelGrain, [&](int64_t b, int64_t e) { ... });
//
// parallel_for(begin, end, grain, fn) calls fn(b, e) on disjoint chunks that cover
// [begin, end) and returns when every call has returned. It runs fn(begin, end) inline,
// on the caller, when the range holds at most `grain` items, when get_num_threads() is 1,
// or when the caller is itself running a chunk (nested calls never wait on the pool, so
// they cannot deadlock). Otherwise the range is cut into T x k equal chunks (T =
// get_num_threads(), k the largest of 1 to 4 that leaves each chunk at least `grain` items,
// or 1; chunks of 4096 items or more rounded up to a multiple of 64, the last one shorter),
// which the caller and up to T - 1 workers claim one by one; a caller whose workers are
// busy with other callers' chunks (several sim streams launch at once) runs its chunks
// itself.
// How chunks are cut depends on the thread count, so fn must give the same result for any
// split: element-wise loops do; reductions write one partial per fixed block and combine
// the partials in order after parallel_for returns.
//
// Memory ordering: everything fn did in any chunk happens before parallel_for returns.
// Thread-safety: any thread may call parallel_for, concurrently. Workers are started on
// first need and joined at exit; calls made after that run inline. An idle worker, and a
// caller waiting for other threads' chunks, spins for up to get_thread_spin_us()
// (runtime/backend/cpu_settings.h) before it sleeps on a condition variable (waking a
// sleeping thread is slow on virtual machines; parallel.cc says how slow), and never
// spins while get_num_threads() exceeds the processors. Nor then does a worker that
// starts a job on its caller's processor move itself to another (it does otherwise, once;
// its allowed processors stay as they were).
// Failure: the first exception thrown by fn is rethrown to the caller after every chunk
// has finished (the kernels' chunks do not throw).
#ifndef STREAMGRAD_KERNELS_HOST_PARALLEL_H_
#define STREAMGRAD_KERNELS_HOST_PARALLEL_H_

#include <cstdint>
#include <type_traits>

namespace streamgrad {
namespace kernels {
namespace cpu {

// Items (elements, or element-sized steps of work) up to which one thread is faster than
// two. Measured with bench/kernels_bench (BM_*Threshold, bench/RESULTS.md). On the first
// 2-core machine, while a kernel's operands fit in the caller's L2, a second core had to
// pull them across and lost (an in-place float32 axpy of 256K elements: 31 us on one
// thread, 65 us on two), so the grain was 256K. On the Intel Xeon VM of 2026-12-03, with
// the pool's workers spinning and the same cut for the same length (each thread's share of
// a buffer can stay in its own L2 from one kernel to the next), two threads won from 128K
// elements on: add 25.6-30.0 -> 12.2-14.8 us, axpy 15.5-18.0 -> 11.6-12.0; at 256K, add
// 134 -> 30 us. Lengths between 64K and 128K were not timed alone; 64K was chosen from
// whole steps on two threads (ResNet 104.7 -> 100.4 ms, GPT 30.2 -> 29.6, medians of 6
// and 4 alternating pairs against 256K). PyTorch's grain is 32K.
constexpr int64_t kParallelGrain = 65536;
// The grain of kernels that call a transcendental function per element (SLEEF's tanh, erf,
// exp ...), which are compute-bound: about 30 us of tanh on one core, so that two threads
// win from two grains on (the reference's grain for every kernel).
constexpr int64_t kMathGrain = 32768;
// The grain of the normalisations (layer, RMS and batch norm), which read each element two
// or three times and compute statistics: about four element-wise kernels' work per
// element. Layer norm [1024, 256] on two threads: forward 0.084 -> 0.046 ms, forward and
// backward 0.256 -> 0.158 ms with it, where a 256K grain kept all rows on one thread; cut
// from 16K elements instead, slower again (0.11-0.13 -> 0.12-0.15 ms forward).
constexpr int64_t kNormGrain = 65536;

namespace detail {
// Chunks of at least kAlignFrom items are a multiple of kAlignItems long.
constexpr int64_t kAlignItems = 64;
constexpr int64_t kAlignFrom = 4096;
// The length of the chunks that a split of n > grain items over `threads` threads is cut
// into (the last chunk may be shorter).
int64_t chunk_size(int64_t n, int64_t grain, int64_t threads);
// How many times, since the process started, a pool worker found no work after spinning
// and went to sleep (get_thread_spin_us(), runtime/backend/cpu_settings.h).
int64_t worker_sleeps();
// The processor the calling thread runs on, or -1 where that cannot be asked (not Linux).
int current_cpu();
// Moves the calling thread to a processor of its allowed set other than `cpu`, then gives
// it its whole allowed set back, and returns the processor it moved to; does nothing and
// returns -1 where `cpu` is < 0 or the only one allowed.
int move_off(int cpu);
using ChunkFn = void (*)(void* ctx, int64_t begin, int64_t end);
// Whether parallel_for would split [begin, end) now (not nested, threads > 1, big enough).
bool should_split(int64_t begin, int64_t end, int64_t grain);
void run_parallel(int64_t begin, int64_t end, int64_t grain, ChunkFn fn, void* ctx);
}  // namespace detail

template <typename Fn>
void parallel_for(int64_t begin, int64_t end, int64_t grain, Fn&& fn) {
  if (begin >= end) return;
  if (!detail::should_split(begin, end, grain)) {
    fn(begin, end);
    return;
  }
  using F = std::remove_reference_t<Fn>;
  detail::run_parallel(
      begin, end, grain,
      [](void* ctx, int64_t b, int64_t e) { (*static_cast<F*>(ctx))(b, e); },
      const_cast<void*>(static_cast<const void*>(&fn)));
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_HOST_PARALLEL_H_
