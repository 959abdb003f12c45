// The interpreter behind runtime/cudaemu/cuda_emu.h: runs a launch block by block, each
// block's threads as cooperative fibers (fiber.h), and implements the builtins that need
// the scheduler (barriers, warp collectives, shared memory, the error context).
//
// Offers:
//   ThreadOrder, LaunchOptions    how the threads of a block take turns between blocking
//                                 points, and the dynamic shared memory opt-in.
//   emu_launch_options() / set_emu_launch_options()   the process-wide defaults.
//   check_launch()                the checks a launch makes before it runs, alone.
//   note_kernel() / launched_kernels()   which kernels this process launched.
//   internal::run_launch()        what emu_launch() (emu_launch.h) calls.
//   internal::*                   the scheduler entry points the header's builtins call.
//
// Scheduling: blocks run one after another on the launching OS thread (x fastest, then y,
// then z). Within a block every thread runs until it blocks (a __syncthreads, a warp
// collective that is still waiting for lanes) or returns; then the next ready thread in
// the phase's order runs. A phase ends when every live thread waits at the barrier; the
// next phase takes a new order. The default order is a seeded shuffle per phase and
// block: a missing __syncthreads in a shared-memory tree shows up as a wrong value (a
// forward order hides some such bugs, the reverse order others).
//
// Checks (each a streamgrad::DeviceError naming the launch, block and thread): launch
// shape and shared memory limits, divergent barriers, warp collectives with missing,
// exited or non-existent lanes, shared memory indices out of bounds, fiber stack overflow.
// An exception thrown by a thread's code ends the launch: the block's other threads are
// unwound (their waits throw an internal cancel token, so destructors run) and the first
// exception is rethrown on the launching thread, with the launch, block and thread added
// to a streamgrad::Error's message. Earlier blocks' writes stay; later blocks do not run.
//
// Thread-safety: launches on different OS threads run independently (all scheduler state
// is per launch and thread_local). A kernel must not launch (no dynamic parallelism).
#ifndef STREAMGRAD_RUNTIME_CUDAEMU_BLOCK_RUNNER_H_
#define STREAMGRAD_RUNTIME_CUDAEMU_BLOCK_RUNNER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/cudaemu/dim3.h"

namespace streamgrad {
namespace cudaemu {

enum class ThreadOrder {
  kForward,   // thread 0, 1, 2, ... (linear index, x fastest)
  kReverse,   // the last thread first
  kShuffled,  // a seeded shuffle, new for each phase of each block (the default)
};

struct LaunchOptions {
  ThreadOrder order = ThreadOrder::kShuffled;
  uint64_t seed = 0x5EED;
  // Dynamic shared memory a launch may ask for: 48 KiB unless the kernel opted in (what
  // cudaFuncSetAttribute(..., cudaFuncAttributeMaxDynamicSharedMemorySize) does), at most
  // kMaxOptInSharedBytes.
  size_t max_dynamic_shared_bytes = 48 * 1024;
};

constexpr size_t kDefaultSharedBytes = 48 * 1024;
constexpr size_t kMaxOptInSharedBytes = 227 * 1024;

// The defaults emu_launch() uses. Thread-safe.
LaunchOptions emu_launch_options();
void set_emu_launch_options(const LaunchOptions& options);

// The kernels launched in this process, by name (a template's arguments dropped:
// "reduce_kernel<float>" counts as "reduce_kernel"), sorted: launch_kernel notes each
// launch. With STREAMGRAD_CUDAEMU_KERNEL_LOG=FILE the names are also appended to FILE
// when the process exits, one per line, so that a whole test suite's coverage of the
// kernels can be read after it (.ci/run does). Thread-safe.
void note_kernel(const char* name);
std::vector<std::string> launched_kernels();

// What a launch checks before any thread runs (shape limits, zero blocks or threads,
// dynamic shared memory): throws that DeviceError without running anything. Launches
// that run later, on a stream, call it first to refuse a configuration at once, as a
// GPU's launch does.
void check_launch(const char* name, dim3 grid, dim3 block, size_t shared_bytes,
                  const LaunchOptions& options);

namespace internal {

// Runs `invoke(ctx)` once per thread of the grid. Throws DeviceError for a bad
// configuration (before any thread runs) or a failed check; rethrows a thread's exception.
void run_launch(const char* name, dim3 grid, dim3 block, size_t shared_bytes,
                const LaunchOptions& options, void (*invoke)(void*), void* ctx);

enum class Barrier { kPlain, kCount, kAnd, kOr };
// __syncthreads and its counting forms: the number of threads (kCount) or whether all /
// any (kAnd / kOr) passed a non-zero predicate.
int sync_threads(Barrier kind, int predicate);

enum class Collective { kSyncWarp, kShflIdx, kShflUp, kShflDown, kShflXor, kBallot };
// One lane's part in a warp collective: `value` the lane's bits (shuffles) or predicate
// (ballot); `arg` the source lane, delta or xor mask. Returns the lane's result.
uint64_t warp_collective(Collective kind, const char* builtin, unsigned mask, uint64_t value,
                         int arg, int width);

// The block's storage of one static shared array (one per key per block, 0xFF-filled at
// the start of each block) and the launch's dynamic shared memory.
void* block_shared(const void* key, size_t bytes, const char* name);
void* dynamic_shared(size_t* bytes);

// Throws the DeviceError of a shared memory index outside [0, size).
[[noreturn]] void shared_index_error(const char* name, long long index, size_t size);
// "kernel 'k' block (x, y, z) thread (x, y, z)", or "host code" outside a launch.
std::string where();

}  // namespace internal
}  // namespace cudaemu
}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_CUDAEMU_BLOCK_RUNNER_H_
