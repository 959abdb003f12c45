#include "runtime/cudaemu/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/base/error.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define SG_EMU_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define SG_EMU_TSAN 1
#endif

#if !defined(__x86_64__)
#error "runtime/cudaemu's fiber switch is written for x86-64 (System V); port sg_cudaemu_switch"
#endif

// sg_cudaemu_switch(save, load): pushes the callee-saved registers, MXCSR and the x87
// control word, stores the stack pointer in *save, loads `load` and pops the same from it.
// sg_cudaemu_trampoline: where a fresh fiber "returns" to; calls r12(r13). Its CFI marks
// the end of the stack for unwinders; nothing ever returns to it.
asm(R"(
  .text
  .globl sg_cudaemu_switch
  .hidden sg_cudaemu_switch
  .type sg_cudaemu_switch, @function
sg_cudaemu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size sg_cudaemu_switch, .-sg_cudaemu_switch

  .globl sg_cudaemu_trampoline
  .hidden sg_cudaemu_trampoline
  .type sg_cudaemu_trampoline, @function
sg_cudaemu_trampoline:
  .cfi_startproc
  .cfi_undefined rip
  movq %r13, %rdi
  callq *%r12
  ud2
  .cfi_endproc
  .size sg_cudaemu_trampoline, .-sg_cudaemu_trampoline
)");

extern "C" void sg_cudaemu_switch(void** save, void* load);
extern "C" void sg_cudaemu_trampoline();

namespace streamgrad {
namespace cudaemu {
namespace internal {
namespace {

constexpr size_t kGuardBytes = 16 * 1024;
constexpr size_t kCanaryBytes = 64;
constexpr unsigned char kCanary = 0xC5;

#if defined(SG_EMU_ASAN) || defined(SG_EMU_TSAN)
constexpr size_t kStackBytes = 256 * 1024;
#else
constexpr size_t kStackBytes = 64 * 1024;
#endif

}  // namespace

size_t Fiber::stack_bytes() { return kStackBytes; }

Fiber::Fiber() {
  map_bytes_ = kGuardBytes + kStackBytes;
  void* m = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    throw OutOfMemoryError(absl::StrCat("cuda emulation: cannot map a ", map_bytes_,
                                        "-byte fiber stack: ", std::strerror(errno),
                                        "; launch fewer threads per block"),
                           map_bytes_, 0, 0);
  }
  map_ = static_cast<char*>(m);
  // Only the guard's failure to protect is tolerated: the canary still catches overflow.
  (void)mprotect(map_, kGuardBytes, PROT_NONE);
  lo_ = map_ + kGuardBytes;
  hi_ = map_ + map_bytes_;
#if defined(SG_EMU_TSAN)
  tsan_fiber_ = __tsan_create_fiber(0);
#endif
}

Fiber::~Fiber() {
#if defined(SG_EMU_TSAN)
  __tsan_destroy_fiber(tsan_fiber_);
#endif
  munmap(map_, map_bytes_);
}

void Fiber::reset(void (*entry)(void*), void* arg) {
  std::memset(lo_, kCanary, kCanaryBytes);
  entry_ = entry;
  arg_ = arg;
  // A fiber that ran before waits in main()'s loop for its next entry function: its
  // frames (and the sanitizers' view of them) stay as they are.
  if (parked_) return;
  // The frame sg_cudaemu_switch pops: MXCSR and control word, r15, r14, r13, r12, rbx,
  // rbp, then the return address. The slot after `ret` is 16-aligned, so the trampoline's
  // call gives main() the ABI's entry alignment.
  auto* top = reinterpret_cast<uint64_t*>(hi_);
  uint64_t* ret_slot = top - 3;
  ret_slot[0] = reinterpret_cast<uint64_t>(&sg_cudaemu_trampoline);
  ret_slot[1] = 0;
  ret_slot[2] = 0;
  uint64_t* frame = ret_slot - 7;
  const uint32_t mxcsr = 0x1F80;
  const uint16_t fpu_cw = 0x037F;
  frame[0] = 0;
  std::memcpy(&frame[0], &mxcsr, sizeof mxcsr);
  std::memcpy(reinterpret_cast<char*>(&frame[0]) + 4, &fpu_cw, sizeof fpu_cw);
  frame[1] = 0;                                        // r15
  frame[2] = 0;                                        // r14
  frame[3] = reinterpret_cast<uint64_t>(this);         // r13: main's argument
  frame[4] = reinterpret_cast<uint64_t>(&Fiber::main);  // r12: what the trampoline calls
  frame[5] = 0;                                        // rbx
  frame[6] = 0;                                        // rbp: ends frame-pointer walks
  sp_ = frame;
}

void Fiber::resume() {
  parked_ = false;  // main() sets it again when the entry function has returned
#if defined(SG_EMU_ASAN)
  __sanitizer_start_switch_fiber(&caller_fake_stack_, lo_, static_cast<size_t>(hi_ - lo_));
#endif
#if defined(SG_EMU_TSAN)
  tsan_caller_ = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(tsan_fiber_, 0);
#endif
  sg_cudaemu_switch(&caller_sp_, sp_);
#if defined(SG_EMU_ASAN)
  __sanitizer_finish_switch_fiber(caller_fake_stack_, nullptr, nullptr);
#endif
}

void Fiber::after_switch_in() {
#if defined(SG_EMU_ASAN)
  __sanitizer_finish_switch_fiber(fake_stack_, &caller_bottom_, &caller_size_);
#endif
}

void Fiber::suspend() {
#if defined(SG_EMU_ASAN)
  __sanitizer_start_switch_fiber(&fake_stack_, caller_bottom_, caller_size_);
#endif
#if defined(SG_EMU_TSAN)
  __tsan_switch_to_fiber(tsan_caller_, 0);
#endif
  sg_cudaemu_switch(&sp_, caller_sp_);
  after_switch_in();
}

void Fiber::main(void* self) {
  auto* f = static_cast<Fiber*>(self);
  f->after_switch_in();
  // Never returns: after each entry function the fiber parks here until reset() and
  // resume() give it the next, so its frames (and TSan's shadow stack of them) do not
  // pile up over the runs of a reused fiber.
  for (;;) {
    f->entry_(f->arg_);
    f->parked_ = true;
    f->suspend();
  }
}

bool Fiber::stack_intact() const {
  for (size_t i = 0; i < kCanaryBytes; ++i) {
    if (static_cast<unsigned char>(lo_[i]) != kCanary) return false;
  }
  return true;
}

FiberPool& FiberPool::for_this_thread() {
  static thread_local FiberPool pool;
  return pool;
}

Fiber* FiberPool::get(size_t i) {
  while (fibers_.size() <= i) fibers_.push_back(std::make_unique<Fiber>());
  return fibers_[i].get();
}

}  // namespace internal
}  // namespace cudaemu
}  // namespace streamgrad
