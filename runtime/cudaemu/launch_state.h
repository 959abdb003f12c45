// Internal to runtime/cudaemu: the state of one running launch (the block being run, its
// emulated threads, their pending warp collectives and shared memory), shared by
// block_runner.cc (scheduling, barriers, shared memory, errors) and warp.cc (collectives).
//
// Thread-safety: a Launch lives on the stack of the launching OS thread and is touched
// only from it (by the scheduler and by the fibers it resumes, one at a time).
// Failure: fail() throws DeviceError on the calling fiber after recording it as the
// launch's error, so the message keeps its context when it reaches the launching thread.
#ifndef STREAMGRAD_RUNTIME_CUDAEMU_LAUNCH_STATE_H_
#define STREAMGRAD_RUNTIME_CUDAEMU_LAUNCH_STATE_H_

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cudaemu/block_runner.h"
#include "runtime/cudaemu/dim3.h"
#include "runtime/cudaemu/fiber.h"

namespace streamgrad {
namespace cudaemu {
namespace internal {

// Thrown inside a waiting thread when its block is abandoned, so that its stack unwinds
// on its own fiber; not derived from std::exception so that kernels do not catch it.
struct Cancel {};

enum class State { kReady, kBarrier, kWarp, kDone };

struct EmuThread {
  Fiber* fiber = nullptr;  // the stack it runs on, from its start; shared until it blocks
  uint3 idx{0, 0, 0};
  unsigned linear = 0;
  State state = State::kReady;
  bool started = false;
  bool cancel = false;
  Barrier barrier = Barrier::kPlain;
  int predicate = 0;
  int barrier_result = 0;
  // The warp collective this lane waits in.
  Collective kind = Collective::kSyncWarp;
  const char* builtin = "";
  unsigned mask = 0;
  uint64_t in = 0, out = 0;
  int arg = 0, width = 32;
};

// Lanes of one warp that have arrived at a collective with the same mask.
struct WarpGroup {
  unsigned mask;
  unsigned arrived;
  Collective kind;
  const char* builtin;
};

struct SharedAlloc {
  const void* key;
  size_t bytes;
  std::unique_ptr<unsigned char[]> data;
};

class Launch {
 public:
  Launch(const char* name, dim3 grid, dim3 block, size_t shared_bytes,
         const LaunchOptions& options, void (*invoke)(void*), void* ctx);
  void run();

  EmuThread& current();  // the running emulated thread; DeviceError outside a kernel
  bool in_kernel() const { return current_ != nullptr; }
  std::string where(const EmuThread& t) const;
  [[noreturn]] void fail(const std::string& what);
  // Blocks the running thread in `s` until the scheduler makes it ready again.
  void wait(EmuThread& t, State s);

  int sync_threads(Barrier kind, int predicate);
  uint64_t collective(Collective kind, const char* builtin, unsigned mask, uint64_t value,
                      int arg, int width);
  void* block_shared(const void* key, size_t bytes, const char* name);
  void* dynamic_shared(size_t* bytes);

 private:
  static void thread_main(void* thread);
  // A fiber's entry: runs the thread the scheduler started on it, then each next thread of
  // the scan that has not started yet, until one blocks or the next has started.
  static void runner(void* launch);
  void run_block();
  void resume(EmuThread& t);
  void begin(EmuThread& t, Fiber* f);
  Fiber* take_fiber();
  // Records a DeviceError when t's stack canary was overwritten.
  void check_stack(const EmuThread& t);
  void abandon();
  void order_for_phase(unsigned phase);
  bool next_phase();  // false: block done or failed (error_ set)
  void record(std::exception_ptr e, const EmuThread& t);
  std::string missing_lane(const EmuThread& waiting) const;
  void complete(unsigned warp, const WarpGroup& g);

  const char* name_;
  dim3 grid_, block_;
  size_t shared_bytes_;
  LaunchOptions options_;
  void (*invoke_)(void*);
  void* ctx_;
  unsigned threads_per_block_;
  std::vector<EmuThread> threads_;
  std::vector<unsigned> order_;
  size_t scan_ = 0;  // the position in order_ the scheduler's pass has reached
  // Fibers of this OS thread's pool not holding a thread, and how many of the pool this
  // launch has taken; a thread needs a fiber of its own only from when it first blocks.
  std::vector<Fiber*> free_fibers_;
  size_t fibers_taken_ = 0;
  std::vector<std::vector<WarpGroup>> warps_;
  std::vector<SharedAlloc> shared_;
  size_t static_shared_bytes_ = 0;
  std::unique_ptr<unsigned char[]> dynamic_;
  EmuThread* current_ = nullptr;
  std::exception_ptr error_;
};

// The launch running on this OS thread, or null.
Launch* running_launch();

}  // namespace internal
}  // namespace cudaemu
}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_CUDAEMU_LAUNCH_STATE_H_
