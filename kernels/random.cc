// uniform and normal: the front door. Counter-based, so element i is a pure function of
// (seed, offset + i) and the same on every device, thread count and layout of out
// (kernels/host/random.cc on cpu and sim, kernels/cuda/elementwise.cu on cuda, with the
// generator of kernels/functors/random_ops.h on both).
#include <cmath>

#include "kernels/checks.h"
#include "kernels/dispatch/launch.h"
#include "kernels/dispatch/registry.h"
#include "kernels/dispatch/strided.h"
#include "kernels/front.h"
#include "kernels/kernels.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace kernels {
namespace {

using cpu::Layout;
using dispatch::KernelId;
using dispatch::LaunchSpec;
using front::Operands;

Layout<1> check_random(const char* name, const View& out) {
  cpu::check_output(name, "out", out);
  cpu::check_floating(name, "out", out);
  return cpu::make_layout<1>(out.sizes, {out.strides.data()});
}

}  // namespace

void uniform(const Stream& stream, const View& out, double low, double high, uint64_t seed,
             uint64_t offset) {
  const char* name = "uniform";
  const auto impl = dispatch::resolve<KernelId::kUniform>(name, stream);
  front::call(impl, stream, name, front::Chunking::kNone, Operands<1>{out}, Operands<0>{},
              [&](const Operands<1>& o, const Operands<0>&, bool) {
                const Layout<1> l = check_random(name, o[0]);
                SG_CHECK(std::isfinite(low) && std::isfinite(high) && low <= high, ValueError,
                         name, ": expected finite low <= high, got [", low, ", ", high, ")");
                if (l.numel == 0) return;
                impl.fn(stream, LaunchSpec(name, {}, {&o[0]}), o[0].dtype, l, o[0].data, low,
                        high, seed, offset);
              });
}

void normal(const Stream& stream, const View& out, double mean, double stddev, uint64_t seed,
            uint64_t offset) {
  const char* name = "normal";
  const auto impl = dispatch::resolve<KernelId::kNormal>(name, stream);
  front::call(impl, stream, name, front::Chunking::kNone, Operands<1>{out}, Operands<0>{},
              [&](const Operands<1>& o, const Operands<0>&, bool) {
                const Layout<1> l = check_random(name, o[0]);
                SG_CHECK(std::isfinite(mean) && std::isfinite(stddev) && stddev >= 0,
                         ValueError, name, ": expected finite mean and std >= 0, got mean ",
                         mean, ", std ", stddev);
                if (l.numel == 0) return;
                impl.fn(stream, LaunchSpec(name, {}, {&o[0]}), o[0].dtype, l, o[0].data, mean,
                        stddev, seed, offset);
              });
}

}  // namespace kernels
}  // namespace streamgrad
