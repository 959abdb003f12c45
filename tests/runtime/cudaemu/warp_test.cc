// Warp collectives of runtime/cudaemu/cuda_emu.h: shuffles (idx, up, down, xor, with
// widths), ballot / any / all, on full and partial warps; and the lanes they must have.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "runtime/base/error.h"
#include "runtime/cudaemu/cuda_emu.h"

namespace streamgrad {
namespace cudaemu {
namespace {

constexpr unsigned kFull = 0xFFFFFFFFu;

template <typename T>
__device__ T warp_sum(T v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(kFull, v, offset);
  return v;
}

template <typename T>
__global__ void sum_by_warps(const T* in, int n, T* out) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const T v = warp_sum(i < n ? in[i] : T(0));
  if (threadIdx.x % warpSize == 0) atomicAdd(out, v);
}

TEST_CASE("a warp reduction with __shfl_down_sync gives the sum", "[cudaemu][warp]") {
  const int n = 1000;
  std::vector<int> ints(n);
  std::vector<double> reals(n);
  for (int i = 0; i < n; ++i) {
    ints[i] = i * 3 - 700;
    reals[i] = 0.25 * i;
  }
  int isum = 0;
  double dsum = 0;
  emu_launch("sum_by_warps<int>", 4, 256, 0, sum_by_warps<int>, ints.data(), n, &isum);
  emu_launch("sum_by_warps<double>", 8, 128, 0, sum_by_warps<double>, reals.data(), n, &dsum);
  CHECK(isum == 3 * (n - 1) * n / 2 - 700 * n);
  CHECK(dsum == 0.25 * (n - 1) * n / 2);
}

struct Shuffled {
  int idx, up, down, xr, down8, up8, all;
};

__global__ void shuffles(Shuffled* out) {
  const int lane = static_cast<int>(threadIdx.x);
  Shuffled s;
  s.idx = __shfl_sync(kFull, lane * 10, 3);           // broadcast from lane 3
  s.up = __shfl_up_sync(kFull, lane, 2);              // lanes 0, 1 keep their own
  s.down = __shfl_down_sync(kFull, lane, 5);          // lanes 27..31 keep their own
  s.xr = __shfl_xor_sync(kFull, lane, 1);             // neighbours swap
  s.down8 = __shfl_down_sync(kFull, lane, 3, 8);      // within segments of 8
  s.up8 = __shfl_up_sync(kFull, lane, 1, 8);
  int v = lane;
  for (int m = 16; m > 0; m /= 2) v += __shfl_xor_sync(kFull, v, m);
  s.all = v;                                           // butterfly: every lane has the sum
  out[lane] = s;
}

TEST_CASE("shuffles read the lanes CUDA's rules name", "[cudaemu][warp]") {
  std::vector<Shuffled> out(32);
  emu_launch("shuffles", 1, 32, 0, shuffles, out.data());
  for (int l = 0; l < 32; ++l) {
    INFO("lane " << l);
    const Shuffled& s = out[l];
    CHECK(s.idx == 30);
    CHECK(s.up == (l >= 2 ? l - 2 : l));
    CHECK(s.down == (l + 5 < 32 ? l + 5 : l));
    CHECK(s.xr == (l ^ 1));
    CHECK(s.down8 == (l % 8 + 3 < 8 ? l + 3 : l));
    CHECK(s.up8 == (l % 8 >= 1 ? l - 1 : l));
    CHECK(s.all == 31 * 32 / 2);
  }
}

__global__ void votes(unsigned* out) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const unsigned warp = threadIdx.x / 32;
  if (warp == 0) {
    out[0] = __ballot_sync(kFull, lane % 3 == 0);
    out[1] = __any_sync(kFull, lane == 31);
    out[2] = __any_sync(kFull, lane > 40);
    out[3] = __all_sync(kFull, lane < 32);
    out[4] = __all_sync(kFull, lane < 31);
  } else {
    // The block's second warp has 16 lanes: a mask of those is complete.
    out[5] = __ballot_sync(0xFFFFu, lane >= 8);
    out[6] = __all_sync(0xFFFFu, 1);
    __syncwarp(0xFFFFu);
    out[7] = __shfl_sync(0xFFFFu, lane + 100, 15);
  }
}

TEST_CASE("ballot, any and all vote over the lanes of the mask", "[cudaemu][warp]") {
  std::vector<unsigned> out(8, 12345);
  emu_launch("votes", 1, 48, 0, votes, out.data());
  unsigned thirds = 0;
  for (int l = 0; l < 32; l += 3) thirds |= 1u << l;
  CHECK(out[0] == thirds);
  CHECK(out == std::vector<unsigned>{thirds, 1, 0, 1, 0, 0xFF00u, 1, 115});
}

__global__ void half_warps(int* out) {
  // Two disjoint groups of one warp shuffle at the same time, each with its own mask.
  const int lane = static_cast<int>(threadIdx.x);
  const unsigned mask = lane < 16 ? 0x0000FFFFu : 0xFFFF0000u;
  out[lane] = __shfl_sync(mask, lane, lane < 16 ? 0 : 16);
}

TEST_CASE("disjoint masks of one warp make separate collectives", "[cudaemu][warp]") {
  std::vector<int> out(32);
  emu_launch("half_warps", 1, 32, 0, half_warps, out.data());
  for (int l = 0; l < 32; ++l) CHECK(out[l] == (l < 16 ? 0 : 16));
}

// ---- lanes that are missing ---------------------------------------------------------------

__global__ void lane_7_leaves(int* out) {
  if (threadIdx.x == 7) return;
  out[threadIdx.x] = __shfl_down_sync(kFull, static_cast<int>(threadIdx.x), 1);
}

__global__ void lane_9_at_barrier(int* out) {
  if (threadIdx.x == 9) {
    __syncthreads();
    return;
  }
  out[threadIdx.x] = __shfl_xor_sync(kFull, 1, 1);
  __syncthreads();
}

__global__ void mask_beyond_block(int* out) {
  out[threadIdx.x] = __shfl_down_sync(kFull, 1, 1);  // the block has 20 threads
}

__global__ void reads_outside_mask(int* out) {
  if (threadIdx.x < 4) out[threadIdx.x] = __shfl_down_sync(0xFu, 1, 2);
}

__global__ void leaves_itself_out(int* out) {
  out[threadIdx.x] = __ballot_sync(0x1u, 1);
}

std::string message_of(void (*kernel)(int*), unsigned threads) {
  std::vector<int> out(64);
  try {
    emu_launch("warp_kernel", 1, threads, 0, kernel, out.data());
  } catch (const DeviceError& e) {
    return e.what();
  }
  return "no error";
}

TEST_CASE("a lane missing from a warp collective is reported", "[cudaemu][warp]") {
  using Catch::Matchers::Contains;
  CHECK_THAT(message_of(lane_7_leaves, 32),
             Contains("__shfl_down_sync (mask 0xffffffff)") && Contains("lane 7") &&
                 Contains("has returned") && Contains("kernel 'warp_kernel'"));
  CHECK_THAT(message_of(lane_9_at_barrier, 32),
             Contains("lane 9") && Contains("waits at __syncthreads") &&
                 Contains("__shfl_xor_sync"));
  CHECK_THAT(message_of(mask_beyond_block, 20),
             Contains("do not exist") && Contains("lanes 0..19"));
  CHECK_THAT(message_of(reads_outside_mask, 32),
             Contains("lane 2 reads lane 4, which is not in the mask"));
  CHECK_THAT(message_of(leaves_itself_out, 2), Contains("which its mask leaves out"));
  // The launch after a failed one runs normally.
  std::vector<Shuffled> out(32);
  emu_launch("shuffles", 1, 32, 0, shuffles, out.data());
  CHECK(out[31].all == 31 * 32 / 2);
}

TEST_CASE("warp collectives from host code are refused", "[cudaemu][warp]") {
  CHECK_THROWS_AS(__shfl_sync(kFull, 1, 0), DeviceError);
  CHECK_THROWS_AS(__syncwarp(), DeviceError);
}

}  // namespace
}  // namespace cudaemu
}  // namespace streamgrad
