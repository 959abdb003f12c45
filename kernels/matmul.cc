// matmul and linear: the front door. Checks here and the plan of
// kernels/dispatch/matmul_plan.h (how each operand reaches the gemm), then the
// implementation registered for the stream's device: OpenBLAS gemm on cpu and sim
// (kernels/host/matmul.cc), cuBLAS on cuda (kernels/cuda/matmul.cu). 16-bit a and b are
// multiplied in float32, into an out (and with a bias) of their dtype or of float32: on
// the host widened first (widen.h), on cuda by cuBLAS itself (float32 sums, one rounding).
#include <algorithm>
#include <climits>

#include "kernels/checks.h"
#include "kernels/dispatch/launch.h"
#include "kernels/dispatch/matmul_plan.h"
#include "kernels/dispatch/registry.h"
#include "kernels/front.h"
#include "kernels/kernels.h"
#include "kernels/widen.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace kernels {
namespace {

using cpu::Bias;
using dispatch::KernelId;
using dispatch::LaunchSpec;
using front::Ptrs;

void matmul_views(const dispatch::Impl<KernelId::kMatmul>& impl, const Stream& stream,
                  const char* name, const View& out, const View& a, const View& b,
                  const View* bias) {
  // 16-bit a and b reach here only where the implementation takes them (cuda's), and then
  // may be multiplied into a float32 out (a product kept in float32 for a sum that
  // follows); everywhere else out, a and b share one dtype.
  if (is_reduced_floating(a.dtype) && out.dtype == DType::kFloat32) {
    cpu::check_output(name, "out", out);
    cpu::check_view(name, "a", a);
    cpu::check_view(name, "b", b);
    cpu::check_same_dtype(name, "a", a, "b", b);
  } else {
    cpu::check_floating_out_a_b(name, out, a, b);
  }
  const int64_t r = out.dim();
  SG_CHECK((r == 2 || r == 3) && a.dim() == r && b.dim() == r, ValueError, name,
           ": expected out, a and b all 2-D or all 3-D, got out ", cpu::describe(out),
           ", a ", cpu::describe(a), ", b ", cpu::describe(b));
  const int64_t m = a.sizes[r - 2], k = a.sizes[r - 1], n = b.sizes[r - 1];
  const bool batch_ok = r == 2 || (a.sizes[0] == out.sizes[0] && b.sizes[0] == out.sizes[0]);
  SG_CHECK(batch_ok && b.sizes[r - 2] == k && out.sizes[r - 2] == m && out.sizes[r - 1] == n,
           ValueError, name, ": cannot multiply a ", cpu::describe(a), " by b ",
           cpu::describe(b), " into out ", cpu::describe(out),
           "; expected [B,] M x K times [B,] K x N into [B,] M x N");
  SG_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX, ValueError, name,
           ": dims of a ", cpu::describe(a), " and b ", cpu::describe(b),
           " exceed BLAS's 32-bit sizes");
  cpu::check_disjoint(name, "out", out, "a", a);
  cpu::check_disjoint(name, "out", out, "b", b);
  Bias bs;
  if (bias != nullptr) {
    SG_CHECK(r == 2 && bias->dim() == 1 && bias->sizes[0] == n && bias->dtype == out.dtype,
             ValueError, name, ": bias ", cpu::describe(*bias), " must be 1-D of ", n,
             " elements of out's dtype, with a 2-D out ", cpu::describe(out));
    cpu::check_disjoint(name, "out", out, "bias", *bias);
    bs.data = bias->data;
    bs.stride = bias->strides[0];
  }
  if (out.numel() == 0) return;

  impl.fn(stream, LaunchSpec(name, {&a, &b, bias}, {&out}), cpu::plan_matmul(out, a, b, bs),
          out.data, out.dtype);
}

}  // namespace

void matmul(const Stream& stream, const View& out, const View& a, const View& b,
            const View* bias) {
  const char* name = bias == nullptr ? "matmul" : "linear";
  const auto impl = dispatch::resolve<KernelId::kMatmul>(name, stream);
  // 16-bit a and b; out (and bias) of their dtype, or float32 (a product kept in float32
  // for a sum that follows). A large batch is multiplied in chunks of items, each widened
  // on its own.
  if (front::widens_mixed(impl.options, {&a, &b}, {&out, bias}) && out.dim() == 3 &&
      a.dim() == 3 && b.dim() == 3 && a.sizes[0] == out.sizes[0] &&
      b.sizes[0] == out.sizes[0]) {
    const int64_t items = out.sizes[0];
    const int64_t chunk = cpu::batch_chunk(stream, out.numel() / std::max<int64_t>(items, 1) +
                                           (a.numel() + b.numel()) / std::max<int64_t>(items, 1));
    if (chunk < items) {
      for (int64_t i = 0; i < items; i += chunk) {
        const int64_t n = std::min(chunk, items - i);
        matmul(stream, cpu::batch_slice(out, i, n), cpu::batch_slice(a, i, n),
               cpu::batch_slice(b, i, n), bias);
      }
      return;
    }
  }
  front::call_mixed(impl, stream, name, Ptrs<1>{&out}, Ptrs<3>{&a, &b, bias}, {&out, bias},
                    [&](const Ptrs<1>& o, const Ptrs<3>& i, bool) {
                      matmul_views(impl, stream, name, *o[0], *i[0], *i[1], i[2]);
                    });
}

}  // namespace kernels
}  // namespace streamgrad
