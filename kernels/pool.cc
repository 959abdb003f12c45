// max_pool2d and max_pool2d_backward: the front door (kernels/nn_kernels.h). Checks here,
// then the implementation registered for the stream's device (kernels/host/pool.cc on cpu
// and sim, kernels/cuda/nn.cu on cuda); 16-bit planes are pooled in float32, a few planes
// at a time.
#include <cstdint>

#include "kernels/checks.h"
#include "kernels/dispatch/kernel_args.h"
#include "kernels/dispatch/launch.h"
#include "kernels/dispatch/registry.h"
#include "kernels/front.h"
#include "kernels/nn_kernels.h"
#include "kernels/widen.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace kernels {
namespace {

using dispatch::KernelId;
using dispatch::LaunchSpec;
using front::Operands;

void max_pool2d_views(const dispatch::Impl<KernelId::kMaxPool2d>& impl, const Stream& stream,
                      const View& values, const View& indices, const View& in,
                      const Window2d& w) {
  const char* name = "max_pool2d";
  cpu::check_contiguous(name, "in", in, 3);
  cpu::check_contiguous(name, "values", values, 3);
  cpu::check_contiguous(name, "indices", indices, 3);
  cpu::check_floating(name, "in", in);
  cpu::check_same_dtype(name, "values", values, "in", in);
  cpu::check_dtype(name, "indices", indices, DType::kInt64);
  cpu::check_same_sizes(name, "values", values, "indices", indices);
  SG_CHECK(values.sizes[0] == in.sizes[0], ValueError, name, ": values ",
           cpu::describe(values), " and in ", cpu::describe(in), " differ in planes");
  cpu::check_disjoint(name, "values", values, "in", in);
  cpu::check_disjoint(name, "indices", indices, "in", in);
  if (values.numel() == 0) return;
  impl.fn(stream, LaunchSpec(name, {&in}, {&values, &indices}), in.dtype,
          ImageShape{1, in.sizes[0], in.sizes[1], in.sizes[2], values.sizes[1], values.sizes[2]},
          w, values.data, static_cast<int64_t*>(indices.data), in.data);
}

void max_pool2d_backward_views(const dispatch::Impl<KernelId::kMaxPool2dBackward>& impl,
                               const Stream& stream, const View& grad_in, const View& grad_out,
                               const View& indices, const Window2d& w) {
  const char* name = "max_pool2d_backward";
  cpu::check_contiguous(name, "grad_in", grad_in, 3);
  cpu::check_contiguous(name, "grad_out", grad_out, 3);
  cpu::check_contiguous(name, "indices", indices, 3);
  cpu::check_output(name, "grad_in", grad_in);
  cpu::check_floating(name, "grad_out", grad_out);
  cpu::check_same_dtype(name, "grad_in", grad_in, "grad_out", grad_out);
  cpu::check_dtype(name, "indices", indices, DType::kInt64);
  cpu::check_same_sizes(name, "grad_out", grad_out, "indices", indices);
  SG_CHECK(grad_in.sizes[0] == grad_out.sizes[0], ValueError, name, ": grad_in ",
           cpu::describe(grad_in), " and grad_out ", cpu::describe(grad_out),
           " differ in planes");
  cpu::check_disjoint(name, "grad_in", grad_in, "grad_out", grad_out);
  cpu::check_disjoint(name, "grad_in", grad_in, "indices", indices);
  if (grad_in.numel() == 0) return;
  // The cuda kernel gathers per input element, so it needs the window (max_pool2d's).
  impl.fn(stream, LaunchSpec(name, {&grad_out, &indices}, {&grad_in}), grad_in.dtype,
          ImageShape{1, grad_in.sizes[0], grad_in.sizes[1], grad_in.sizes[2],
                     grad_out.sizes[1], grad_out.sizes[2]},
          w, grad_in.data, grad_out.data, static_cast<const int64_t*>(indices.data));
}

}  // namespace

void max_pool2d(const Stream& stream, const View& values, const View& indices, const View& in,
                const Window2d& w) {
  const char* name = "max_pool2d";
  const auto impl = dispatch::resolve<KernelId::kMaxPool2d>(name, stream);
  if (front::widens(impl.options, {&values, &in}) && values.dim() == 3 && in.dim() == 3 &&
      indices.dim() == 3 &&
      cpu::for_each_chunk(stream, in, 2, [&](int64_t, int64_t i, int64_t n) {
        max_pool2d(stream, cpu::batch_slice(values, i, n), cpu::batch_slice(indices, i, n),
                   cpu::batch_slice(in, i, n), w);
      })) {
    return;  // planes are independent: a few at a time
  }
  front::call(impl, stream, name, front::Chunking::kNone, Operands<2>{values, indices},
              Operands<1>{in}, [&](const Operands<2>& o, const Operands<1>& i, bool) {
                max_pool2d_views(impl, stream, o[0], o[1], i[0], w);
              });
}

void max_pool2d_backward(const Stream& stream, const View& grad_in, const View& grad_out,
                         const View& indices, const Window2d& w) {
  const char* name = "max_pool2d_backward";
  const auto impl = dispatch::resolve<KernelId::kMaxPool2dBackward>(name, stream);
  if (front::widens(impl.options, {&grad_in, &grad_out}) && grad_in.dim() == 3 &&
      grad_out.dim() == 3 && indices.dim() == 3 &&
      cpu::for_each_chunk(stream, grad_in, 2, [&](int64_t, int64_t i, int64_t n) {
        max_pool2d_backward(stream, cpu::batch_slice(grad_in, i, n),
                            cpu::batch_slice(grad_out, i, n), cpu::batch_slice(indices, i, n), w);
      })) {
    return;
  }
  front::call(impl, stream, name, front::Chunking::kNone, Operands<1>{grad_in},
              Operands<2>{grad_out, indices},
              [&](const Operands<1>& o, const Operands<2>& i, bool) {
                max_pool2d_backward_views(impl, stream, o[0], i[0], i[1], w);
              });
}

}  // namespace kernels
}  // namespace streamgrad
