// The CUDA execution model of runtime/cudaemu/cuda_emu.h as kernels see it: built-in
// variables in 1-D, 2-D and 3-D launches, grid-stride loops, shared memory per block,
// atomics, warp shuffles and votes. The kernels are written as a .cu file would be.
#include "runtime/cudaemu/cuda_emu.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <thread>
#include <vector>

namespace streamgrad {
namespace cudaemu {
namespace {

// ---- built-in variables ----------------------------------------------------------------

struct Seen {
  uint3 thread, block;
  dim3 block_dim, grid_dim;
};

__global__ void record_position(Seen* seen) {
  const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
  const unsigned block =
      blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  Seen& s = seen[block * threads + thread];
  s.thread = threadIdx;
  __syncthreads();  // the values survive a switch to the other threads
  s.block = blockIdx;
  s.block_dim = blockDim;
  s.grid_dim = gridDim;
}

TEST_CASE("every thread of 1-D, 2-D and 3-D launches sees its own indices", "[cudaemu]") {
  const auto [grid, block] = GENERATE(table<dim3, dim3>({
      {dim3(3), dim3(5)},
      {dim3(2, 3), dim3(4, 3)},
      {dim3(2, 2, 3), dim3(3, 2, 4)},
      {dim3(1, 1, 2), dim3(1, 1, 64)},
  }));
  const unsigned threads = block.x * block.y * block.z;
  std::vector<Seen> seen(size_t(grid.x) * grid.y * grid.z * threads);
  emu_launch("record_position", grid, block, 0, record_position, seen.data());
  size_t i = 0;
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx)
        for (unsigned tz = 0; tz < block.z; ++tz)
          for (unsigned ty = 0; ty < block.y; ++ty)
            for (unsigned tx = 0; tx < block.x; ++tx, ++i) {
              INFO("block " << bx << "," << by << "," << bz << " thread " << tx << "," << ty
                            << "," << tz);
              const Seen& s = seen[i];
              REQUIRE((s.thread.x == tx && s.thread.y == ty && s.thread.z == tz));
              REQUIRE((s.block.x == bx && s.block.y == by && s.block.z == bz));
              REQUIRE((s.block_dim.x == block.x && s.block_dim.y == block.y &&
                       s.block_dim.z == block.z));
              REQUIRE((s.grid_dim.x == grid.x && s.grid_dim.y == grid.y &&
                       s.grid_dim.z == grid.z));
            }
  // Outside a launch the built-ins read as a one-thread launch.
  CHECK((threadIdx.x == 0 && blockIdx.x == 0 && blockDim.x == 1 && gridDim.z == 1));
}

TEST_CASE("dim3 defaults unspecified components to 1", "[cudaemu]") {
  const dim3 d(7);
  CHECK((d.x == 7 && d.y == 1 && d.z == 1));
  const dim3 e;
  CHECK((e.x == 1 && e.y == 1 && e.z == 1));
  CHECK(warpSize == 32);
}

// ---- grid-stride loops -----------------------------------------------------------------

__global__ void __launch_bounds__(1024) axpb(int64_t n, float a, const float* x, float* y) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step) {
    y[i] = a * x[i] + 1.0f;
  }
}

TEST_CASE("a grid-stride loop covers every element once, whatever the grid", "[cudaemu]") {
  const int64_t n = GENERATE(0, 1, 255, 256, 257, 10000);
  const auto [blocks, threads] =
      GENERATE(table<unsigned, unsigned>(
          {{1, 1}, {1, 256}, {3, 128}, {7, 33}, {64, 256}, {2, 1024}}));
  INFO("n " << n << " grid " << blocks << " block " << threads);
  std::vector<float> x(n), y(n + 8, -7.0f);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i);
  emu_launch("axpb", blocks, threads, 0, axpb, n, 2.0f, x.data(), y.data());
  for (int64_t i = 0; i < n; ++i) REQUIRE(y[i] == 2.0f * static_cast<float>(i) + 1.0f);
  for (int64_t i = n; i < n + 8; ++i) REQUIRE(y[i] == -7.0f);  // nothing past the end
}

TEST_CASE("a lambda is a kernel too, and each thread gets its own copy of the arguments",
          "[cudaemu]") {
  std::vector<int> out(64);
  emu_launch("lambda", 2, 32, 0, [](int* o, int k) {
    k += static_cast<int>(threadIdx.x);  // changes this thread's copy only
    o[blockIdx.x * 32 + threadIdx.x] = k;
  }, out.data(), 100);
  for (int i = 0; i < 64; ++i) REQUIRE(out[i] == 100 + i % 32);
}

// ---- shared memory ---------------------------------------------------------------------

template <int kThreads>
__global__ void block_sums(const int* in, int* out) {
  SG_SHARED_ARRAY(int, part, kThreads);
  part[threadIdx.x] = in[blockIdx.x * kThreads + threadIdx.x];
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (static_cast<int>(threadIdx.x) < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}

TEST_CASE("a shared array is one per block, shared by the block's threads", "[cudaemu]") {
  std::vector<int> in(4 * 128), out(4);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>(i);
  emu_launch("block_sums", 4, 128, 0, block_sums<128>, in.data(), out.data());
  for (int b = 0; b < 4; ++b) CHECK(out[b] == 128 * 128 * b + 127 * 128 / 2);
}

__global__ void first_read(int* seen) {
  SG_SHARED_ARRAY(int, s, 4);
  if (threadIdx.x == 0) seen[blockIdx.x] = s[1];  // before any write in this block
  __syncthreads();
  s[threadIdx.x] = 42;
}

TEST_CASE("shared memory starts every block as 0xFF bytes, not as the last block left it",
          "[cudaemu]") {
  std::vector<int> seen(3, 0);
  emu_launch("first_read", 3, 4, 0, first_read, seen.data());
  CHECK(seen == std::vector<int>{-1, -1, -1});
}

__global__ void plain_shared_sum(const float* in, float* out) {
  __shared__ float part[64];
  part[threadIdx.x] = in[blockIdx.x * 64 + threadIdx.x];
  __syncthreads();
  for (int w = 32; w > 0; w /= 2) {
    if (static_cast<int>(threadIdx.x) < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = part[0];
  __syncthreads();  // no thread overwrites part[0] of this block before it is read
}

TEST_CASE("plain __shared__ arrays are shared by the block as in the project's kernels",
          "[cudaemu]") {
  std::vector<float> in(3 * 64, 0.5f), out(3);
  emu_launch("plain_shared_sum", 3, 64, 0, plain_shared_sum, in.data(), out.data());
  CHECK(out == std::vector<float>{32.0f, 32.0f, 32.0f});
}

__global__ void reverse_in_dynamic(const double* in, double* out) {
  auto s = sg_dynamic_shared<double>();
  s[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  out[threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
}

TEST_CASE("dynamic shared memory is sized by the launch", "[cudaemu]") {
  std::vector<double> in = {1, 2, 3, 4, 5}, out(5);
  emu_launch("reverse_in_dynamic", 1, 5, 5 * sizeof(double), reverse_in_dynamic, in.data(),
             out.data());
  CHECK(out == std::vector<double>{5, 4, 3, 2, 1});
}

__global__ void counted_barriers(int* out) {
  const int t = static_cast<int>(threadIdx.x);
  out[0] = __syncthreads_count(t % 3 == 0);
  __syncthreads();
  out[1] = __syncthreads_and(t < 100);
  __syncthreads();
  out[2] = __syncthreads_and(t < 40);
  __syncthreads();
  out[3] = __syncthreads_or(t == 41);
  __syncthreads();
  out[4] = __syncthreads_or(t > 100);
}

TEST_CASE("__syncthreads_count, _and and _or combine the block's predicates", "[cudaemu]") {
  std::vector<int> out(5, -9);
  emu_launch("counted_barriers", 1, 42, 0, counted_barriers, out.data());
  CHECK(out == std::vector<int>{14, 1, 0, 1, 0});
}

// ---- atomics ---------------------------------------------------------------------------

struct Totals {
  int count;
  unsigned int ucount;
  unsigned long long big;
  float fsum;
  double dsum;
  int lowest;
  unsigned long long first;
  int highest;
};

__global__ void count_everything(Totals* t) {
  const int id = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  atomicAdd(&t->count, 1);
  atomicAdd(&t->ucount, 2u);
  atomicAdd(&t->big, 1ull << 33);
  atomicAdd(&t->fsum, 1.0f);
  atomicAdd(&t->dsum, 0.5);
  atomicMin(&t->lowest, 1000 - id);
  atomicMin(&t->first, static_cast<unsigned long long>(id + 5));
  atomicMax(&t->highest, id);
  __syncthreads();
}

TEST_CASE("atomics from many blocks give the exact counts and sums", "[cudaemu]") {
  Totals t{0, 0, 0, 0.0f, 0.0, std::numeric_limits<int>::max(), ~0ull, -1};
  emu_launch("count_everything", 64, 256, 0, count_everything, &t);
  const int n = 64 * 256;
  CHECK(t.count == n);
  CHECK(t.ucount == 2u * n);
  CHECK(t.big == (1ull << 33) * n);
  CHECK(t.fsum == static_cast<float>(n));
  CHECK(t.dsum == 0.5 * n);
  CHECK(t.lowest == 1000 - (n - 1));
  CHECK(t.first == 5);
  CHECK(t.highest == n - 1);
}

__global__ void add_many(Totals* t, int rounds) {
  for (int r = 0; r < rounds; ++r) {
    atomicAdd(&t->count, 1);
    atomicAdd(&t->big, 3ull);
    atomicAdd(&t->fsum, 1.0f);
    atomicAdd(&t->dsum, 0.25);
    atomicMax(&t->highest, static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x));
  }
}

TEST_CASE("launches on several OS threads at once share counters through real atomics",
          "[cudaemu]") {
  Totals t{0, 0, 0, 0.0f, 0.0, 0, 0, -1};
  std::vector<std::thread> launchers;
  for (int i = 0; i < 4; ++i) {
    launchers.emplace_back([&t] { emu_launch("add_many", 16, 128, 0, add_many, &t, 64); });
  }
  for (std::thread& l : launchers) l.join();
  const int n = 4 * 16 * 128 * 64;  // 2^19: exact in a float
  CHECK(t.count == n);
  CHECK(t.big == 3ull * n);
  CHECK(t.fsum == static_cast<float>(n));
  CHECK(t.dsum == 0.25 * n);
  CHECK(t.highest == 16 * 128 - 1);
}

TEST_CASE("atomics return the old value as CUDA's do", "[cudaemu]") {
  int i = 5;
  CHECK(atomicAdd(&i, 3) == 5);
  CHECK(atomicExch(&i, 1) == 8);
  CHECK(atomicCAS(&i, 2, 9) == 1);  // no swap: returns what it found
  CHECK(i == 1);
  CHECK(atomicCAS(&i, 1, 9) == 1);
  CHECK(i == 9);
  unsigned long long u = 7;
  CHECK(atomicCAS(&u, 7ull, 70ull) == 7);
  CHECK(atomicMax(&u, 3ull) == 70);
  CHECK(u == 70);
  float f = 1.5f;
  CHECK(atomicAdd(&f, 2.0f) == 1.5f);
  CHECK(atomicExch(&f, -1.0f) == 3.5f);
  CHECK(f == -1.0f);
  unsigned int b = 0xF0;
  CHECK(atomicOr(&b, 0x0Fu) == 0xF0u);
  CHECK(atomicAnd(&b, 0x3Cu) == 0xFFu);
  CHECK(atomicSub(&b, 4u) == 0x3Cu);
  CHECK(b == 0x38u);
  CHECK(__uint_as_float(__float_as_uint(-2.25f)) == -2.25f);
  CHECK(__float_as_uint(1.0f) == 0x3F800000u);
  CHECK(__longlong_as_double(__double_as_longlong(3.125)) == 3.125);
}

// A floating max through compare-and-swap, as index.cu's atomic_combine does it.
__device__ void atomic_max_float(float* p, float v) {
  auto* bits = reinterpret_cast<unsigned int*>(p);
  unsigned int old = *bits, seen;
  do {
    seen = old;
    const float next = fmaxf(__uint_as_float(seen), v);
    if (__float_as_uint(next) == seen) return;
    old = atomicCAS(bits, seen, __float_as_uint(next));
  } while (old != seen);
}

__global__ void float_max(const float* in, int n, float* out) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    atomic_max_float(out, in[i]);
  }
}

TEST_CASE("an atomicCAS loop implements a floating max", "[cudaemu]") {
  const int n = 4096;
  std::vector<float> in(n);
  for (int i = 0; i < n; ++i) in[i] = std::sin(static_cast<float>(i)) * 100.0f;
  float best = -std::numeric_limits<float>::infinity();
  emu_launch("float_max", 4, 256, 0, float_max, in.data(), n, &best);
  float expect = in[0];
  for (float v : in) expect = std::max(expect, v);
  CHECK(best == expect);
}

}  // namespace
}  // namespace cudaemu
}  // namespace streamgrad
