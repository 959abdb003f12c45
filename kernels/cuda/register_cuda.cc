// Registers the cuda kernels (cuda_kernels.h) in the dispatch table for cuda streams, from
// a static initialiser: //kernels/cuda:registered is alwayslink and is linked only where
// nvcc exists, so a build without the toolkit has no cuda entries and the front door
// refuses cuda streams with one DeviceError naming the kernel (no stubs). Each kernel runs
// as the launch's work (SG_AS_TASK): it enqueues on the stream's raw handle from the
// launching thread. fill and copy take every dtype; the arithmetic kernels compute float16
// and bfloat16 in float32, which the front door arranges.
//
// Thread-safety: runs once, before main. Failure: a duplicate registration is an
// InternalError at start-up.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/dispatch/launch.h"
#include "kernels/dispatch/registry.h"

namespace streamgrad {
namespace kernels {
namespace cuda {
namespace {

using dispatch::ImplOptions;
using dispatch::KernelId;
using dispatch::register_impl;

constexpr DeviceType kCuda = DeviceType::kCuda;
constexpr ImplOptions kNative16{/*native_16bit=*/true};

bool register_cuda() {
  dispatch::note_backend_linked(kCuda);
  register_impl<KernelId::kUnary>(kCuda, SG_AS_TASK(unary));
  register_impl<KernelId::kUnaryScalar>(kCuda, SG_AS_TASK(unary_scalar));
  register_impl<KernelId::kBinary>(kCuda, SG_AS_TASK(binary));
  register_impl<KernelId::kAxpy>(kCuda, SG_AS_TASK(axpy));
  register_impl<KernelId::kFill>(kCuda, SG_AS_TASK(fill), kNative16);
  register_impl<KernelId::kCopy>(kCuda, SG_AS_TASK(copy), kNative16);
  register_impl<KernelId::kArange>(kCuda, SG_AS_TASK(arange));
  return true;
}

const bool registered = register_cuda();

}  // namespace
}  // namespace cuda
}  // namespace kernels
}  // namespace streamgrad
