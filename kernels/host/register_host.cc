// Registers the host implementations (host_kernels.h) in the dispatch table for cpu and
// sim streams, from a static initialiser: the library is alwayslink, so every binary that
// links the kernels has them. Which of them take 16-bit views as they are is decided here
// (ImplOptions::native_16bit): copy and fill convert every dtype; the arithmetic kernels
// compute float16 and bfloat16 in float32, which the front door arranges.
//
// Thread-safety: runs once, before main. Failure: a duplicate registration is an
// InternalError at start-up.
#include "kernels/dispatch/registry.h"
#include "kernels/host/host_kernels.h"

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace {

using dispatch::ImplOptions;
using dispatch::KernelId;
using dispatch::register_impl;

constexpr ImplOptions kNative16{/*native_16bit=*/true};

bool register_host() {
  for (DeviceType d : {DeviceType::kCpu, DeviceType::kSim}) {
    register_impl<KernelId::kUnary>(d, &unary);
    register_impl<KernelId::kUnaryScalar>(d, &unary_scalar);
    register_impl<KernelId::kBinary>(d, &binary);
    register_impl<KernelId::kAxpy>(d, &axpy);
    register_impl<KernelId::kFill>(d, &fill, kNative16);
    register_impl<KernelId::kCopy>(d, &copy, kNative16);
    register_impl<KernelId::kArange>(d, &arange);
  }
  return true;
}

const bool registered = register_host();

}  // namespace
}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad
