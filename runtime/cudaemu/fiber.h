// Internal to runtime/cudaemu: the cooperative fibers that run the emulated CUDA threads
// of one block, and the pool of their stacks.
//
// Offers:
//   Fiber          one stack (mmap'd, a PROT_NONE guard region below it and a canary
//                  just above that) and a saved context. The scheduler calls resume(); the
//                  code on the fiber calls suspend() to give control back, and returns from
//                  its entry function to finish. A finished fiber is reset() with the next
//                  entry function and reused (it waits for it inside its first frame).
//   FiberPool      per-OS-thread cache of fibers, so that launches after the first reuse
//                  their stacks (and, under TSan, their TSan fiber contexts). It keeps as
//                  many as the most threads of one block that were blocked at once (at
//                  most 1024 x 80 KiB of address space, only touched pages resident)
//                  until the thread exits.
//
// The switch is a few lines of x86-64 assembly (callee-saved registers, MXCSR and the x87
// control word): no signal mask syscall per switch as glibc's swapcontext makes. Under
// ASan and TSan every switch is announced through the sanitizers' fiber interfaces, and a
// TSan switch synchronises (the emulated threads of a block run one at a time on one OS
// thread, so nothing they do to each other is a data race).
//
// Thread-safety: a Fiber belongs to the OS thread that resumes it; it must never be
// resumed from another OS thread (the emulated builtins are thread_local). FiberPool is
// thread_local. Failure: mmap failure throws streamgrad::OutOfMemoryError; exceptions must
// never leave a fiber's entry function (the caller of reset() catches everything there).
// A stack overflow faults on the guard region (SIGSEGV), or shows as a broken canary that
// the scheduler reports (stack_intact()). A single frame larger than the 16 KiB guard can
// jump over both unless the code is compiled with -fstack-clash-protection.
#ifndef STREAMGRAD_RUNTIME_CUDAEMU_FIBER_H_
#define STREAMGRAD_RUNTIME_CUDAEMU_FIBER_H_

#include <cstddef>
#include <memory>
#include <vector>

namespace streamgrad {
namespace cudaemu {
namespace internal {

class Fiber {
 public:
  // Usable stack bytes: 64 KiB, 256 KiB under a sanitizer (its redzones grow the frames).
  static size_t stack_bytes();

  Fiber();
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Prepares a fresh run of entry(arg) from the top of the stack. The fiber must not be
  // suspended (it was never started, or its entry function returned).
  void reset(void (*entry)(void*), void* arg);
  // Scheduler side: runs the fiber until it suspends or finishes.
  void resume();
  // Fiber side: gives control back to the resume() that ran it.
  void suspend();
  // False when the canary above the guard region was overwritten: the stack overflowed.
  bool stack_intact() const;

 private:
  [[noreturn]] static void main(void* self);
  void after_switch_in();

  char* map_ = nullptr;  // the mapping: guard region, then the stack
  size_t map_bytes_ = 0;
  char* lo_ = nullptr;  // lowest usable byte (the canary sits here)
  char* hi_ = nullptr;  // one past the highest usable byte, 16-aligned
  void* sp_ = nullptr;
  void* caller_sp_ = nullptr;
  void (*entry_)(void*) = nullptr;
  void* arg_ = nullptr;
  bool parked_ = false;  // main() has started and waits in its loop between runs
  // ASan: each side's fake stack while the other runs, and the caller's stack bounds.
  void* fake_stack_ = nullptr;
  void* caller_fake_stack_ = nullptr;
  const void* caller_bottom_ = nullptr;
  size_t caller_size_ = 0;
  // TSan: this fiber's context and the one that resumed it.
  void* tsan_fiber_ = nullptr;
  void* tsan_caller_ = nullptr;
};

// The fibers of the calling OS thread: get(i) is the i-th of them, created on first use,
// valid until the thread exits.
class FiberPool {
 public:
  static FiberPool& for_this_thread();
  Fiber* get(size_t i);

 private:
  std::vector<std::unique_ptr<Fiber>> fibers_;
};

}  // namespace internal
}  // namespace cudaemu
}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_CUDAEMU_FIBER_H_
