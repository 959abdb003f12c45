// Settings of the cpu kernels that users and benchmarks choose: how many threads a large
// kernel may use, which instruction-set level the kernels' loops run at, and whether
// convolutions use oneDNN.
//
//   set_num_threads(4);            // as torch::set_num_threads
//   int n = get_num_threads();
//   cpu_capability()               // CpuCapability::kAvx512 on an AVX-512 machine
//   set_cpu_capability(CpuCapability::kAvx2);   // lower than the machine only (tests, benches)
//   set_onednn_enabled(false);     // as torch.backends.mkldnn.enabled = False
//   set_thread_spin_us(0);         // idle kernel threads sleep at once (OMP_WAIT_POLICY=passive)
//
// Threads: kernels over more than 64K elements split their work over up to
// get_num_threads() threads (the caller plus a pool of workers, kernels/host/parallel.h);
// results are bitwise the same for every thread count. The count governs BLAS too: matmul
// shares a batch, or the blocks of a large product, among the same threads, each block a
// single-threaded OpenBLAS gemm; OpenBLAS's own thread count stays 1 (kernels/host/gemm.h:
// its idle threads busy-wait for ~0.1 s after each call). One default for both:
// STREAMGRAD_NUM_THREADS, else OPENBLAS_NUM_THREADS, else OMP_NUM_THREADS (what set
// OpenBLAS's threads before, as OMP_NUM_THREADS sets libtorch's; a value that is not a
// count in [1, kMaxThreads] is skipped, as OpenBLAS ignores it), else the hardware threads
// this process may run on, at most kDefaultMaxThreads.
// Capability: every hot per-element loop is compiled for each level and the level is picked
// once, at first use, from what the CPU supports; STREAMGRAD_CPU_CAPABILITY=default|avx2|
// avx512 picks a lower one (a level the CPU lacks falls back to the CPU's best, with a
// warning). Element-wise results and sums are bitwise the same at every level.
// The level applies to kernels launched after the call (work queued on a sim stream keeps
// the level it was launched with); the thread count to kernels that start running after it.
// oneDNN: float32 conv2d on cpu and sim runs oneDNN's convolution (kernels/nn_kernels.h,
// with the thread count at the launch) where it is enabled (the default; STREAMGRAD_ONEDNN=0
// turns it off), unfold and matmul where not; the two agree to rounding, not bitwise. The switch applies to conv2d calls made after
// it; a recorded graph's backward uses the path its forward took.
//
// Spin: an idle kernel thread (a pool worker with nothing queued, or a caller waiting for
// the last chunks of its split) spins for get_thread_spin_us() microseconds before it
// sleeps, as OpenMP's threads spin before they sleep. Waking a sleeping thread costs tens
// of microseconds on a virtual machine, and at times far more (a two-thread ResNet step
// took 1.4 to 2.4 times as long with 200 us of spin as with 2 ms, bench/RESULTS.md), which
// a training step's gaps between kernels (up to about 2 ms) would pay again and again.
// The default, kDefaultSpinUs, covers those gaps; a process that shares its processors
// with others may want less (0: sleep at once; the test suite runs at 200 us, .bazelrc).
// STREAMGRAD_THREAD_SPIN_US sets the starting value. Never spins while there are more
// threads than processors.
//
// Thread-safety: every function may be called from any thread (atomics).
// Failure: set_num_threads outside [1, kMaxThreads], set_thread_spin_us outside
// [0, kMaxSpinUs] and set_cpu_capability above
// machine_cpu_capability() throw ValueError; malformed environment values throw
// ValueError naming the variable at first use (runtime/backend/config.h).
#ifndef STREAMGRAD_RUNTIME_BACKEND_CPU_SETTINGS_H_
#define STREAMGRAD_RUNTIME_BACKEND_CPU_SETTINGS_H_

namespace streamgrad {

// Ordered: a level includes everything below it.
enum class CpuCapability : int {
  kDefault = 0,  // baseline x86-64 (SSE2), or the only level off x86
  kAvx2 = 1,     // AVX2 + FMA (the kernels keep FMA contraction off: same results)
  kAvx512 = 2,   // AVX-512 F, BW, DQ and VL
};

constexpr int kMaxThreads = 256;
constexpr int kDefaultMaxThreads = 16;
constexpr int kDefaultSpinUs = 2000;
constexpr int kMaxSpinUs = 1000000;

// "default", "avx2", "avx512".
const char* cpu_capability_name(CpuCapability c);
// The best level this CPU and OS support (OS support of the wide registers included).
CpuCapability machine_cpu_capability();
// The level kernels launched now use.
CpuCapability cpu_capability();
void set_cpu_capability(CpuCapability c);

int get_num_threads();
void set_num_threads(int n);

int get_thread_spin_us();
void set_thread_spin_us(int us);

bool onednn_enabled();
void set_onednn_enabled(bool on);

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_BACKEND_CPU_SETTINGS_H_
