// The kernels' dispatch table: kernel id x device type -> implementation.
//
//   // kernels/host/register_host.cc, at static initialisation:
//   register_impl<KernelId::kBinary>(DeviceType::kCpu, &host::binary);
//   // the front door (kernels/elementwise.cc), once per call:
//   const Impl<KernelId::kBinary> impl = resolve<KernelId::kBinary>("add", stream);
//   impl.fn(stream, spec, op, dtype, layout, out, a, b);
//
// Each kernel id has one implementation signature (kernel_ids.h): the stream, the launch's
// name and byte ranges (LaunchSpec, kernels/dispatch/launch.h) and the checked arguments
// (layouts, pointers, dtype). An implementation enqueues its work on the stream through
// enqueue() and nothing else: the front door has already validated the views, declared
// what the launch reads and writes, and widened 16-bit views where the implementation
// asked for float32 (ImplOptions::native_16bit false).
// Implementations register themselves from static initialisers of alwayslink libraries:
// the host loops for cpu and sim (//kernels/host:registered), the cuda kernels for cuda
// (//kernels/cuda:registered, linked where nvcc exists). The cuda library also calls
// note_backend_linked(kCuda), so that a missing entry can say whether the build lacks
// cuda kernels altogether or only this one.
//
// Thread-safety: any thread may register or resolve at any time; entries are atomics
// (release on store, acquire on load) pointing at immutable, never freed records.
// Failure: resolve() throws DeviceError naming the kernel (the caller's launch name) and
// the device, and what to do; registering a (kernel, device) pair twice, or a kernel id out
// of range, is an InternalError.
#ifndef STREAMGRAD_KERNELS_DISPATCH_REGISTRY_H_
#define STREAMGRAD_KERNELS_DISPATCH_REGISTRY_H_

#include "kernels/dispatch/kernel_ids.h"
#include "runtime/backend/stream.h"
#include "runtime/base/device.h"

namespace streamgrad {
namespace kernels {
namespace dispatch {

struct ImplOptions {
  // The implementation computes float16 and bfloat16 views itself. When false, the front
  // door hands it float32 copies of 16-bit views and rounds the outputs back (widen.h).
  bool native_16bit = false;
};

template <KernelId K>
struct Impl {
  typename KernelSig<K>::Fn* fn;
  ImplOptions options;
};

namespace internal {

using ErasedFn = void (*)();
struct Entry {
  ErasedFn fn;
  ImplOptions options;
};
void set(KernelId id, DeviceType device, ErasedFn fn, ImplOptions options);
// nullptr when nothing is registered.
const Entry* get(KernelId id, DeviceType device);
[[noreturn]] void throw_missing(KernelId id, const char* name, const Stream& stream);

}  // namespace internal

template <KernelId K>
void register_impl(DeviceType device, typename KernelSig<K>::Fn* fn, ImplOptions options = {}) {
  internal::set(K, device, reinterpret_cast<internal::ErasedFn>(fn), options);
}

// The implementation of K for `stream`'s device type. `name` is the caller's launch name
// ("add", "argmax"), which the error names.
template <KernelId K>
Impl<K> resolve(const char* name, const Stream& stream) {
  const internal::Entry* e = internal::get(K, stream.device().type());
  if (e == nullptr) internal::throw_missing(K, name, stream);
  return Impl<K>{reinterpret_cast<typename KernelSig<K>::Fn*>(e->fn), e->options};
}

bool has_impl(KernelId id, DeviceType device);

// Called by a device's kernel library when it registers (see the banner).
void note_backend_linked(DeviceType device);

}  // namespace dispatch
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_DISPATCH_REGISTRY_H_
