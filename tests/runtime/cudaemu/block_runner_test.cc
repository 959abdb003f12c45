// The interpreter of runtime/cudaemu/block_runner.h: thread orders that expose a missing
// __syncthreads, and every check the hardware would punish (divergent barriers, launch
// shapes, shared memory bounds), exceptions from kernel code reaching the caller.
#include "runtime/cudaemu/block_runner.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/base/error.h"
#include "runtime/cudaemu/cuda_emu.h"

namespace streamgrad {
namespace cudaemu {
namespace {

using Catch::Matchers::Contains;

constexpr int kThreads = 256;

// The tree of reduce.cu's kernels; kBarrierInLoop false drops the barrier between levels.
template <bool kBarrierInLoop>
__global__ void __launch_bounds__(kThreads) tree_sum(const double* in, int n, double* out) {
  SG_SHARED_ARRAY(double, part, kThreads);
  double acc = 0;
  for (int j = static_cast<int>(threadIdx.x); j < n; j += kThreads) acc += in[j];
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (static_cast<int>(threadIdx.x) < w) part[threadIdx.x] += part[threadIdx.x + w];
    if (kBarrierInLoop) __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}

double run_tree(bool with_barrier, const LaunchOptions& options) {
  std::vector<double> in(1000);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<double>(i % 17);
  double out = -1;
  if (with_barrier) {
    emu_launch_with(options, "tree_sum", 1, kThreads, 0, tree_sum<true>, in.data(), 1000, &out);
  } else {
    emu_launch_with(options, "tree_sum", 1, kThreads, 0, tree_sum<false>, in.data(), 1000, &out);
  }
  return out;
}

double expected_tree() {
  double s = 0;
  for (int i = 0; i < 1000; ++i) s += i % 17;
  return s;
}

TEST_CASE("a shared-memory tree reduction sums correctly in every thread order",
          "[cudaemu][order]") {
  LaunchOptions o;
  o.order = GENERATE(ThreadOrder::kForward, ThreadOrder::kReverse, ThreadOrder::kShuffled);
  o.seed = GENERATE(1u, 77u);
  CHECK(run_tree(true, o) == expected_tree());
}

TEST_CASE("the default order exposes a tree reduction with one __syncthreads removed",
          "[cudaemu][order]") {
  // The point of the shuffled default: without the barrier between levels a thread reads
  // a partial sum its partner has not added yet, and the sum comes out wrong.
  CHECK(run_tree(false, emu_launch_options()) != expected_tree());
  LaunchOptions o;
  o.order = ThreadOrder::kShuffled;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    o.seed = seed;
    CHECK(run_tree(false, o) != expected_tree());
  }
  // Reverse order hides this bug (every partner has finished all its levels before it is
  // read), which is why it is not the default.
  o.order = ThreadOrder::kReverse;
  CHECK(run_tree(false, o) == expected_tree());
}

// Each thread notes when it first runs (its place in `seq`) and where its frame is; with
// kBarrier it then waits at a __syncthreads.
template <bool kBarrier>
__global__ void note_runs(std::vector<unsigned>* seq, std::vector<uintptr_t>* frames) {
  volatile int local = 0;
  seq->push_back(threadIdx.x);
  (*frames)[threadIdx.x] = reinterpret_cast<uintptr_t>(&local);
  if (kBarrier) __syncthreads();
}

TEST_CASE("threads that never block share one stack and keep the phase's order",
          "[cudaemu][order]") {
  LaunchOptions o;
  o.order = GENERATE(ThreadOrder::kForward, ThreadOrder::kReverse, ThreadOrder::kShuffled);
  o.seed = GENERATE(1u, 77u);
  std::vector<unsigned> free_seq, barrier_seq;
  std::vector<uintptr_t> free_frames(kThreads), barrier_frames(kThreads);
  emu_launch_with(o, "note_runs", 1, kThreads, 0, note_runs<false>, &free_seq, &free_frames);
  emu_launch_with(o, "note_runs", 1, kThreads, 0, note_runs<true>, &barrier_seq,
                  &barrier_frames);
  // The same order whether or not the threads block: running them on one stack changes
  // nothing a kernel can see but the addresses of its locals.
  REQUIRE(free_seq.size() == static_cast<size_t>(kThreads));
  CHECK(free_seq == barrier_seq);
  if (o.order == ThreadOrder::kForward) CHECK(free_seq.front() == 0);
  if (o.order == ThreadOrder::kReverse) CHECK(free_seq.front() == kThreads - 1);
  // One frame address for every thread that returned without blocking; one stack each
  // for threads waiting at the barrier together.
  CHECK(std::set<uintptr_t>(free_frames.begin(), free_frames.end()).size() == 1);
  CHECK(std::set<uintptr_t>(barrier_frames.begin(), barrier_frames.end()).size() ==
        static_cast<size_t>(kThreads));
}

TEST_CASE("the default launch options can be changed for the whole process", "[cudaemu][order]") {
  const LaunchOptions saved = emu_launch_options();
  LaunchOptions o = saved;
  o.order = ThreadOrder::kReverse;
  set_emu_launch_options(o);
  CHECK(emu_launch_options().order == ThreadOrder::kReverse);
  CHECK(run_tree(false, emu_launch_options()) == expected_tree());
  set_emu_launch_options(saved);
  o.max_dynamic_shared_bytes = kMaxOptInSharedBytes + 1;
  CHECK_THROWS_AS(set_emu_launch_options(o), ValueError);
}

// ---- divergent barriers ------------------------------------------------------------------

__global__ void barrier_in_branch(int* out) {
  if (threadIdx.x < 16) __syncthreads();
  out[threadIdx.x] = 1;
}

__global__ void early_return(int n, int* out) {
  if (static_cast<int>(threadIdx.x) >= n) return;
  out[threadIdx.x] = 1;
  __syncthreads();
}

TEST_CASE("a __syncthreads not reached by every thread is reported", "[cudaemu][barrier]") {
  std::vector<int> out(64);
  try {
    emu_launch("barrier_in_branch", 2, 64, 0, barrier_in_branch, out.data());
    FAIL("no error");
  } catch (const DeviceError& e) {
    CHECK_THAT(std::string(e.what()),
               Contains("kernel 'barrier_in_branch' block (0, 0, 0) thread (") &&
                   Contains("waits at __syncthreads") && Contains("divergent barrier") &&
                   Contains("has returned without reaching it"));
  }
  CHECK_THROWS_WITH(emu_launch("early_return", 1, 64, 0, early_return, 40, out.data()),
                    Contains("divergent barrier"));
  // Every thread reaching it is fine.
  emu_launch("early_return", 1, 64, 0, early_return, 64, out.data());
}

// ---- launch configuration --------------------------------------------------------------

int g_runs = 0;
__global__ void count_runs() { atomicAdd(&g_runs, 1); }

TEST_CASE("launches the device would refuse throw before any thread runs",
          "[cudaemu][launch]") {
  g_runs = 0;
  CHECK_THROWS_WITH(emu_launch("count_runs", 1, 1025, 0, count_runs),
                    Contains("kernel 'count_runs'") && Contains("1025 threads per block"));
  CHECK_THROWS_WITH(emu_launch("count_runs", 1, dim3(2, 2, 65), 0, count_runs),
                    Contains("(1024, 1024, 64)"));
  CHECK_THROWS_WITH(emu_launch("count_runs", 1, dim3(64, 32, 1), 0, count_runs),
                    Contains("2048 threads per block"));
  CHECK_THROWS_WITH(emu_launch("count_runs", 0, 32, 0, count_runs), Contains("zero blocks"));
  CHECK_THROWS_WITH(emu_launch("count_runs", dim3(4, 0), 32, 0, count_runs),
                    Contains("zero blocks"));
  CHECK_THROWS_WITH(emu_launch("count_runs", 1, dim3(32, 1, 0), 0, count_runs),
                    Contains("zero threads"));
  CHECK_THROWS_WITH(emu_launch("count_runs", dim3(1, 65536), 1, 0, count_runs),
                    Contains("grid dimension"));
  CHECK_THROWS_WITH(emu_launch("count_runs", dim3(0x80000000u), 1, 0, count_runs),
                    Contains("grid dimension"));
  CHECK_THROWS_WITH(emu_launch("count_runs", 1, 32, 48 * 1024 + 1, count_runs),
                    Contains("49153 bytes of dynamic shared memory") &&
                        Contains("max_dynamic_shared_bytes"));
  CHECK_THROWS_AS(emu_launch("count_runs", 1, 1025, 0, count_runs), DeviceError);
  CHECK(g_runs == 0);
  // The limits themselves are allowed, and an opt-in raises the shared memory allowance.
  emu_launch("count_runs", 1, 1024, 0, count_runs);
  emu_launch("count_runs", dim3(1, 65535), 1, 0, count_runs);
  LaunchOptions o;
  o.max_dynamic_shared_bytes = 100 * 1024;
  emu_launch_with(o, "count_runs", 1, 32, 100 * 1024, count_runs);
  CHECK(g_runs == 1024 + 65535 + 32);
}

__global__ void launches_inside() { emu_launch("inner", 1, 1, 0, count_runs); }

TEST_CASE("a kernel cannot launch a kernel", "[cudaemu][launch]") {
  CHECK_THROWS_WITH(emu_launch("outer", 1, 2, 0, launches_inside),
                    Contains("kernel 'inner'") && Contains("from inside kernel 'outer'"));
}

// ---- shared memory bounds --------------------------------------------------------------

__global__ void off_by_one(int* out) {
  SG_SHARED_ARRAY(int, tile, 32);
  tile[threadIdx.x + 1] = 1;  // thread 31 writes tile[32]
  __syncthreads();
  out[threadIdx.x] = tile[threadIdx.x];
}

__global__ void negative_index(int* out) {
  SG_SHARED_ARRAY(float, buf, 8);
  out[0] = static_cast<int>(buf[static_cast<int>(threadIdx.x) - 1]);
}

__global__ void dynamic_past_end(int* out) {
  auto s = sg_dynamic_shared<int>();
  s[threadIdx.x] = 1;
  out[threadIdx.x] = s[threadIdx.x];
}

TEST_CASE("a shared memory index out of bounds is reported", "[cudaemu][shared]") {
  std::vector<int> out(32);
  CHECK_THROWS_WITH(emu_launch("off_by_one", 3, 32, 0, off_by_one, out.data()),
                    Contains("kernel 'off_by_one' block (0, 0, 0) thread (31, 0, 0)") &&
                        Contains("index 32 of shared array 'tile' is outside [0, 32)"));
  CHECK_THROWS_WITH(emu_launch("negative_index", 1, 4, 0, negative_index, out.data()),
                    Contains("thread (0, 0, 0)") && Contains("index -1 of shared array 'buf'"));
  CHECK_THROWS_WITH(emu_launch("dynamic_past_end", 1, 16, 15 * sizeof(int), dynamic_past_end,
                               out.data()),
                    Contains("index 15 of shared array 'dynamic shared memory' is outside [0, "
                             "15)"));
}

TEST_CASE("shared memory builtins from host code are refused", "[cudaemu][shared]") {
  CHECK_THROWS_WITH(__syncthreads(), Contains("host code"));
  CHECK_THROWS_AS(sg_dynamic_shared<int>(), DeviceError);
}

// ---- exceptions from kernel code -------------------------------------------------------

int g_alive = 0;
struct Tracked {
  Tracked() { ++g_alive; }
  ~Tracked() { --g_alive; }
};

__global__ void throws_in_one_thread(int* out) {
  Tracked t;  // every thread's stack holds one; abandoned threads must unwind it
  std::vector<int> heap(16, 1);  // and free this (LeakSanitizer would see it otherwise)
  __syncthreads();
  if (blockIdx.x == 2 && threadIdx.x == 5) throw ValueError("bad value in the kernel");
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = heap[3];
}

__global__ void throws_std(int*) {
  if (threadIdx.x == 1) throw std::out_of_range("plain std exception");
  __syncthreads();
}

TEST_CASE("an exception in one thread reaches the caller and the next launch works",
          "[cudaemu][exceptions]") {
  std::vector<int> out(4 * 64, 0);
  g_alive = 0;
  try {
    emu_launch("throws_in_one_thread", 4, 64, 0, throws_in_one_thread, out.data());
    FAIL("no error");
  } catch (const ValueError& e) {
    CHECK_THAT(std::string(e.what()),
               Contains("bad value in the kernel") &&
                   Contains("kernel 'throws_in_one_thread' block (2, 0, 0) thread (5, 0, 0)"));
  }
  CHECK(g_alive == 0);          // the block's other threads were unwound
  CHECK(out[64] == 1);          // block 1 had finished
  CHECK(out[3 * 64] == 0);      // block 3 never ran
  CHECK_THROWS_AS(emu_launch("throws_std", 1, 8, 0, throws_std, out.data()), std::out_of_range);
  CHECK(g_alive == 0);
  // The same kernel without the failing block, on the same (reused) fibers.
  emu_launch("throws_in_one_thread", 2, 64, 0, throws_in_one_thread, out.data());
  CHECK(out[0] == 1);
  CHECK(g_alive == 0);
}

}  // namespace
}  // namespace cudaemu
}  // namespace streamgrad
