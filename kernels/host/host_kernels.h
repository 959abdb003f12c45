// The host implementations of the dispatch table's kernels (kernels/dispatch/kernel_ids.h),
// which register_host.cc registers for cpu and sim streams. Each has the table's signature
// for its id and enqueues the loops of the level in use (loops.h) on the stream.
//
// Thread-safety: as launch(). Failure: none beyond launch()'s; the front door has checked
// every argument.
#ifndef STREAMGRAD_KERNELS_HOST_HOST_KERNELS_H_
#define STREAMGRAD_KERNELS_HOST_HOST_KERNELS_H_

#include <cstdint>

#include "kernels/dispatch/kernel_ids.h"
#include "kernels/dispatch/launch.h"

namespace streamgrad {
namespace kernels {
namespace cpu {

using dispatch::LaunchSpec;

void unary(const Stream& stream, const LaunchSpec& spec, Unary op, DType dt,
           const Layout<2>& l, void* out, const void* in);
void unary_scalar(const Stream& stream, const LaunchSpec& spec, UnaryScalar op, DType dt,
                  const Layout<2>& l, void* out, const void* in, double scalar);
void binary(const Stream& stream, const LaunchSpec& spec, Binary op, DType dt,
            const Layout<3>& l, void* out, const void* a, const void* b);
void axpy(const Stream& stream, const LaunchSpec& spec, DType dt, const Layout<3>& l,
          void* out, const void* a, const void* b, double alpha);
void fill(const Stream& stream, const LaunchSpec& spec, DType dt, const Layout<1>& l,
          void* out, double value);
// A 2-D transposing copy runs in cache-sized tiles on one thread.
void copy(const Stream& stream, const LaunchSpec& spec, DType to, DType from,
          const Layout<2>& l, void* out, const void* in);
void arange(const Stream& stream, const LaunchSpec& spec, DType dt, const Layout<1>& l,
            void* out, double start, double step);

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_HOST_HOST_KERNELS_H_
