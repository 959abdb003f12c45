#include "runtime/cudaemu/block_runner.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/base/error.h"
#include "runtime/cudaemu/launch_state.h"

namespace streamgrad {
namespace cudaemu {
namespace {

std::mutex g_options_mu;
LaunchOptions g_options;

void check_options(const LaunchOptions& o, const char* what) {
  SG_CHECK(o.max_dynamic_shared_bytes <= kMaxOptInSharedBytes, ValueError, what,
           ": max_dynamic_shared_bytes ", o.max_dynamic_shared_bytes, " is over the ",
           kMaxOptInSharedBytes, " bytes a block can opt in to; ask for at most that");
}

SG_EMU_TLS internal::Launch* tl_launch = nullptr;

uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::string dims(unsigned x, unsigned y, unsigned z) {
  return absl::StrCat("(", x, ", ", y, ", ", z, ")");
}

std::string launch_title(const char* name, dim3 grid, dim3 block) {
  return absl::StrCat("cuda emulation: launch of kernel '", name, "' with grid ",
                      dims(grid.x, grid.y, grid.z), " and block ",
                      dims(block.x, block.y, block.z));
}

// The launch shapes and shared memory a device refuses, checked before anything runs.
void check_launch_shape(const std::string& launch, dim3 grid, dim3 block, size_t shared_bytes,
                        const LaunchOptions& options) {
  SG_CHECK(uint64_t(grid.x) * grid.y * grid.z != 0, DeviceError, launch,
           ": zero blocks; a launch needs at least one block (skip the launch when there is "
           "no work)");
  SG_CHECK(uint64_t(block.x) * block.y * block.z != 0, DeviceError, launch,
           ": zero threads per block; a block needs at least one thread");
  SG_CHECK(uint64_t(block.x) * block.y * block.z <= 1024, DeviceError, launch, ": ",
           uint64_t(block.x) * block.y * block.z,
           " threads per block, over the limit of 1024; use smaller blocks and more of them");
  SG_CHECK(block.x <= 1024 && block.y <= 1024 && block.z <= 64, DeviceError, launch,
           ": a block dimension is over the device limits (1024, 1024, 64)");
  SG_CHECK(grid.x <= 0x7FFFFFFFu && grid.y <= 65535 && grid.z <= 65535, DeviceError, launch,
           ": a grid dimension is over the device limits (2^31 - 1, 65535, 65535); loop over "
           "the rest in the kernel (a grid-stride loop)");
  SG_CHECK(shared_bytes <= options.max_dynamic_shared_bytes, DeviceError, launch, " asks for ",
           shared_bytes, " bytes of dynamic shared memory, over the ",
           options.max_dynamic_shared_bytes, " bytes allowed (",
           kDefaultSharedBytes, " without opting in); raise LaunchOptions::"
           "max_dynamic_shared_bytes (cudaFuncSetAttribute with "
           "cudaFuncAttributeMaxDynamicSharedMemorySize on a GPU), at most ",
           kMaxOptInSharedBytes);
}

}  // namespace

LaunchOptions emu_launch_options() {
  std::lock_guard<std::mutex> lock(g_options_mu);
  return g_options;
}

void set_emu_launch_options(const LaunchOptions& options) {
  check_options(options, "set_emu_launch_options");
  std::lock_guard<std::mutex> lock(g_options_mu);
  g_options = options;
}

namespace {

struct KernelLog {
  std::mutex mu;
  std::unordered_set<const char*> seen;  // the spellings already noted, by address
  std::set<std::string> names;
};

KernelLog& kernel_log() {
  // Never destroyed: the exit handler below reads it after static destructors may run.
  static KernelLog* log = [] {
    auto* l = new KernelLog();
    if (std::getenv("STREAMGRAD_CUDAEMU_KERNEL_LOG") != nullptr) {
      std::atexit([] {
        const char* path = std::getenv("STREAMGRAD_CUDAEMU_KERNEL_LOG");
        KernelLog& k = kernel_log();
        std::lock_guard<std::mutex> lock(k.mu);
        std::string text;
        for (const std::string& n : k.names) text += n + "\n";
        // One append per process: small writes to an O_APPEND file do not interleave.
        if (FILE* f = std::fopen(path, "a")) {
          std::fwrite(text.data(), 1, text.size(), f);
          std::fclose(f);
        }
      });
    }
    return l;
  }();
  return *log;
}

}  // namespace

void note_kernel(const char* name) {
  KernelLog& k = kernel_log();
  std::lock_guard<std::mutex> lock(k.mu);
  // Every launch calls this with its call site's literal: only a new one costs a string.
  if (!k.seen.insert(name).second) return;
  const std::string n(name);
  k.names.insert(n.substr(0, n.find('<')));
}

std::vector<std::string> launched_kernels() {
  KernelLog& k = kernel_log();
  std::lock_guard<std::mutex> lock(k.mu);
  return {k.names.begin(), k.names.end()};
}

void check_launch(const char* name, dim3 grid, dim3 block, size_t shared_bytes,
                  const LaunchOptions& options) {
  check_launch_shape(launch_title(name, grid, block), grid, block, shared_bytes, options);
}

namespace internal {

Launch* running_launch() { return tl_launch; }

Launch::Launch(const char* name, dim3 grid, dim3 block, size_t shared_bytes,
               const LaunchOptions& options, void (*invoke)(void*), void* ctx)
    : name_(name), grid_(grid), block_(block), shared_bytes_(shared_bytes), options_(options),
      invoke_(invoke), ctx_(ctx) {
  const std::string launch = launch_title(name, grid, block);
  check_options(options, launch.c_str());
  if (Launch* outer = tl_launch; outer != nullptr) {
    throw DeviceError(absl::StrCat(launch, " from inside ", outer->where(outer->current()),
                                   ": kernels cannot launch kernels here (dynamic parallelism"
                                   " is not emulated); launch from host code"));
  }
  check_launch_shape(launch, grid, block, shared_bytes, options);
  threads_per_block_ = block.x * block.y * block.z;
  threads_.resize(threads_per_block_);
  for (unsigned i = 0; i < threads_per_block_; ++i) {
    EmuThread& t = threads_[i];
    t.linear = i;
    t.idx = uint3{i % block.x, (i / block.x) % block.y, i / (block.x * block.y)};
  }
  warps_.resize((threads_per_block_ + 31) / 32);
  if (shared_bytes > 0) dynamic_.reset(new unsigned char[shared_bytes]);
}

void Launch::run() {
  struct Restore {
    ~Restore() {
      tl_launch = nullptr;
      threadIdx = uint3{0, 0, 0};
      blockIdx = uint3{0, 0, 0};
      blockDim = dim3();
      gridDim = dim3();
    }
  } restore;
  tl_launch = this;
  blockDim = block_;
  gridDim = grid_;
  for (unsigned z = 0; z < grid_.z; ++z) {
    for (unsigned y = 0; y < grid_.y; ++y) {
      for (unsigned x = 0; x < grid_.x; ++x) {
        blockIdx = uint3{x, y, z};
        run_block();
        if (error_) {
          abandon();
          std::rethrow_exception(error_);
        }
      }
    }
  }
}

void Launch::thread_main(void* thread) {
  auto* t = static_cast<EmuThread*>(thread);
  Launch* l = tl_launch;
  try {
    l->invoke_(l->ctx_);
  } catch (const Cancel&) {
  } catch (...) {
    l->record(std::current_exception(), *t);
  }
  t->state = State::kDone;
}

void Launch::record(std::exception_ptr e, const EmuThread& t) {
  if (error_) return;  // the first error wins; fail() has recorded its own already
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    try {
      err.rethrower()(absl::StrCat(err.what(), " (in ", where(t), ")"));
    } catch (...) {
      error_ = std::current_exception();
    }
  } catch (...) {
    error_ = e;
  }
}

// Threads that never block (most kernels: no barrier, no warp collective) run one after
// another on one stack, in the same order as if each had its own: a switch per run of
// them instead of two per thread, which were most of a small launch's time.
void Launch::runner(void* launch) {
  auto* l = static_cast<Launch*>(launch);
  Fiber* f = l->current_->fiber;
  for (;;) {
    EmuThread& t = *l->current_;
    thread_main(&t);
    l->check_stack(t);
    if (l->error_ || l->scan_ + 1 >= l->order_.size()) break;
    EmuThread& next = l->threads_[l->order_[l->scan_ + 1]];
    if (next.started) break;
    ++l->scan_;
    l->begin(next, f);
  }
  // Parks right after this: the scheduler hands it out again only once it has.
  l->free_fibers_.push_back(f);
}

void Launch::begin(EmuThread& t, Fiber* f) {
  t.fiber = f;
  t.started = true;
  current_ = &t;
  threadIdx = t.idx;
}

Fiber* Launch::take_fiber() {
  if (!free_fibers_.empty()) {
    Fiber* f = free_fibers_.back();
    free_fibers_.pop_back();
    return f;
  }
  return FiberPool::for_this_thread().get(fibers_taken_++);
}

void Launch::run_block() {
  for (EmuThread& t : threads_) {
    t.state = State::kReady;
    t.started = t.cancel = false;
    t.fiber = nullptr;
  }
  for (auto& w : warps_) w.clear();
  // Shared memory starts each block as 0xFF bytes (NaN, -1): a read before any write
  // gives an implausible value, not a convenient zero.
  for (SharedAlloc& s : shared_) std::memset(s.data.get(), 0xFF, s.bytes);
  if (dynamic_) std::memset(dynamic_.get(), 0xFF, shared_bytes_);
  for (unsigned phase = 0;; ++phase) {
    order_for_phase(phase);
    for (bool ran = true; ran;) {
      ran = false;
      // The runner moves scan_ on past the threads it runs after the one resumed here.
      for (scan_ = 0; scan_ < order_.size(); ++scan_) {
        EmuThread& t = threads_[order_[scan_]];
        if (t.state != State::kReady) continue;
        resume(t);
        ran = true;
        if (error_) return;
      }
    }
    if (!next_phase()) break;
  }
}

void Launch::resume(EmuThread& t) {
  if (t.started) {
    current_ = &t;
    threadIdx = t.idx;
  } else {
    Fiber* f = take_fiber();
    f->reset(&Launch::runner, this);
    begin(t, f);
  }
  t.fiber->resume();
  current_ = nullptr;
}

// When a thread returns, not per switch: the canary is on a page of the stack that nothing
// else touches (checking it on every switch was a tenth of a launch's time), and threads
// that share a stack find it in cache.
void Launch::check_stack(const EmuThread& t) {
  if (!t.fiber->stack_intact() && !error_) {
    error_ = std::make_exception_ptr(DeviceError(absl::StrCat(
        "cuda emulation: ", where(t), " overflowed its ", Fiber::stack_bytes(),
        "-byte fiber stack; keep large arrays out of kernel locals (use shared or global "
        "memory)")));
  }
}

void Launch::abandon() {
  for (EmuThread& t : threads_) {
    if (!t.started) continue;  // nothing on its stack
    t.cancel = true;
    while (t.state != State::kDone) resume(t);
  }
}

void Launch::order_for_phase(unsigned phase) {
  order_.resize(threads_per_block_);
  std::iota(order_.begin(), order_.end(), 0u);
  if (options_.order == ThreadOrder::kReverse) {
    std::reverse(order_.begin(), order_.end());
  } else if (options_.order == ThreadOrder::kShuffled) {
    const uint64_t block =
        blockIdx.x + uint64_t(grid_.x) * (blockIdx.y + uint64_t(grid_.y) * blockIdx.z);
    uint64_t state = options_.seed ^ (block * 0xD1B54A32D192ED03ull) ^ (uint64_t(phase) << 32);
    for (size_t i = order_.size(); i > 1; --i) {
      std::swap(order_[i - 1], order_[splitmix64(&state) % i]);
    }
  }
}

bool Launch::next_phase() {
  unsigned live = 0, at_barrier = 0;
  const EmuThread *done = nullptr, *barrier = nullptr, *in_warp = nullptr, *other_kind = nullptr;
  for (const EmuThread& t : threads_) {
    if (t.state == State::kDone) {
      if (done == nullptr) done = &t;
      continue;
    }
    ++live;
    if (t.state == State::kWarp && in_warp == nullptr) in_warp = &t;
    if (t.state == State::kBarrier) {
      ++at_barrier;
      if (barrier == nullptr) barrier = &t;
      if (t.barrier != barrier->barrier && other_kind == nullptr) other_kind = &t;
    }
  }
  if (live == 0) return false;
  std::string problem;
  if (in_warp != nullptr) {
    problem = missing_lane(*in_warp);
  } else if (done != nullptr) {
    problem = absl::StrCat(
        where(*barrier), " waits at __syncthreads, but thread ",
        dims(done->idx.x, done->idx.y, done->idx.z), " has returned without reaching it: a "
        "divergent barrier (hangs or corrupts shared memory on a GPU); every thread of the "
        "block must reach each __syncthreads, so move it out of branches and loops whose "
        "condition differs between threads, and out of the path after an early return");
  } else if (other_kind != nullptr) {
    problem = absl::StrCat(where(*barrier), " and thread ",
                           dims(other_kind->idx.x, other_kind->idx.y, other_kind->idx.z),
                           " wait at different kinds of __syncthreads (plain, _count, _and, "
                           "_or); every thread must call the same one");
  }
  if (!problem.empty()) {
    error_ = std::make_exception_ptr(DeviceError("cuda emulation: " + problem));
    return false;
  }
  int passed = 0;
  for (const EmuThread& t : threads_) passed += t.predicate;
  int result = 0;
  if (barrier->barrier == Barrier::kCount) result = passed;
  if (barrier->barrier == Barrier::kAnd) result = passed == static_cast<int>(live);
  if (barrier->barrier == Barrier::kOr) result = passed > 0;
  for (EmuThread& t : threads_) {
    t.state = State::kReady;
    t.barrier_result = result;
  }
  return true;
}

EmuThread& Launch::current() {
  if (current_ == nullptr) {
    throw DeviceError("cuda emulation: a device builtin (__syncthreads, a warp collective, "
                      "shared memory) was called from host code; call it inside a kernel "
                      "run by emu_launch");
  }
  return *current_;
}

std::string Launch::where(const EmuThread& t) const {
  return absl::StrCat("kernel '", name_, "' block ", dims(blockIdx.x, blockIdx.y, blockIdx.z),
                      " thread ", dims(t.idx.x, t.idx.y, t.idx.z));
}

void Launch::fail(const std::string& what) {
  DeviceError e(absl::StrCat("cuda emulation: ", where(current()), ": ", what));
  if (!error_) error_ = std::make_exception_ptr(e);
  throw e;
}

void Launch::wait(EmuThread& t, State s) {
  if (t.cancel) throw Cancel{};
  t.state = s;
  t.fiber->suspend();
  if (t.cancel) throw Cancel{};
}

int Launch::sync_threads(Barrier kind, int predicate) {
  EmuThread& t = current();
  t.barrier = kind;
  t.predicate = predicate != 0;
  wait(t, State::kBarrier);
  return t.barrier_result;
}

void* Launch::block_shared(const void* key, size_t bytes, const char* name) {
  current();
  for (SharedAlloc& s : shared_) {
    if (s.key == key) return s.data.get();
  }
  static_shared_bytes_ += bytes;
  if (static_shared_bytes_ > kDefaultSharedBytes) {
    fail(absl::StrCat("shared array '", name, "' (", bytes, " bytes) brings the kernel's static "
                      "shared memory to ", static_shared_bytes_, " bytes, over the ",
                      kDefaultSharedBytes, "-byte limit; use dynamic shared memory with an "
                      "opt-in, or smaller arrays"));
  }
  if (static_shared_bytes_ + shared_bytes_ > options_.max_dynamic_shared_bytes &&
      static_shared_bytes_ + shared_bytes_ > kDefaultSharedBytes) {
    fail(absl::StrCat("static shared memory (", static_shared_bytes_, " bytes) and dynamic (",
                      shared_bytes_, " bytes) together are over the ",
                      options_.max_dynamic_shared_bytes, " bytes the launch allows"));
  }
  // Each array is its own heap block, so ASan also sees accesses past it through a
  // decayed pointer.
  shared_.push_back(SharedAlloc{key, bytes, std::unique_ptr<unsigned char[]>(
                                                new unsigned char[bytes == 0 ? 1 : bytes])});
  std::memset(shared_.back().data.get(), 0xFF, bytes);
  return shared_.back().data.get();
}

void* Launch::dynamic_shared(size_t* bytes) {
  current();
  *bytes = shared_bytes_;
  return dynamic_.get();
}

void run_launch(const char* name, dim3 grid, dim3 block, size_t shared_bytes,
                const LaunchOptions& options, void (*invoke)(void*), void* ctx) {
  // On the heap, not this thread's stack: while a block's threads run, the thread is on a
  // fiber's stack, and LeakSanitizer, scanning at exit while a sim worker is inside a
  // launch, would miss the launch on the thread's own stack and report what it owns as
  // leaked. From the heap it is reached through tl_launch (thread-local storage is scanned).
  auto launch = std::make_unique<Launch>(name, grid, block, shared_bytes, options, invoke, ctx);
  launch->run();
}

namespace {
Launch& launch_for(const char* builtin) {
  Launch* l = tl_launch;
  if (l == nullptr) {
    throw DeviceError(absl::StrCat("cuda emulation: ", builtin, " called from host code; call "
                                   "it inside a kernel run by emu_launch"));
  }
  return *l;
}
}  // namespace

int sync_threads(Barrier kind, int predicate) {
  return launch_for("__syncthreads").sync_threads(kind, predicate);
}

void* block_shared(const void* key, size_t bytes, const char* name) {
  return launch_for("SG_SHARED_ARRAY").block_shared(key, bytes, name);
}

void* dynamic_shared(size_t* bytes) {
  return launch_for("sg_dynamic_shared").dynamic_shared(bytes);
}

void shared_index_error(const char* name, long long index, size_t size) {
  launch_for("a shared array index")
      .fail(absl::StrCat("index ", index, " of shared array '", name, "' is outside [0, ", size,
                         "); size the array for the block (blockDim) or guard the index"));
}

std::string where() {
  Launch* l = tl_launch;
  return l != nullptr && l->in_kernel() ? l->where(l->current()) : std::string("host code");
}

}  // namespace internal
}  // namespace cudaemu
}  // namespace streamgrad
