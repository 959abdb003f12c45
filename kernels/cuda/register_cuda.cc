// Registers the cuda kernels (cuda_kernels.h) in the dispatch table for cuda streams, from
// a static initialiser: //kernels/cuda:registered is alwayslink and is linked only where
// nvcc exists, so a build without the toolkit has no cuda entries and the front door
// refuses cuda streams with one DeviceError naming the kernel (no stubs). Each kernel runs
// as the launch's work (SG_AS_TASK): it enqueues on the stream's raw handle from the
// launching thread. fill and copy take every dtype; matmul, batch norm and the
// element-wise unary, unary_scalar, binary and axpy take float16 and bfloat16 themselves
// (kNative16), computing in float32; the other arithmetic kernels compute them in float32
// on copies the front door makes.
//
// Thread-safety: runs once, before main. Failure: a duplicate registration is an
// InternalError at start-up.
#include <string>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/dispatch/launch.h"
#include "kernels/dispatch/registry.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace kernels {
namespace cuda {
namespace {

using dispatch::ImplOptions;
using dispatch::KernelId;
using dispatch::register_impl;

constexpr DeviceType kCuda = DeviceType::kCuda;
constexpr ImplOptions kNative16{/*native_16bit=*/true};

// The table's shapes for the kernels that cuda_kernels.h offers in other terms.
void check_index_range(const Stream& stream, const cpu::Layout<1>& l, const int64_t* index,
                       int64_t low, int64_t limit, const std::string& context) {
  int64_t at = 0, v = 0;
  if (first_bad_index_in(stream, "check_index_range", l, index, low, limit, &at, &v)) {
    throw IndexError(index_range_message(context, low, limit, at, v));
  }
}

// One copy kernel per piece, all inside the one launch.
void join(const Stream& stream, DType dt, const std::vector<JoinPiece>& pieces) {
  for (const JoinPiece& p : pieces) copy(stream, dt, dt, p.layout, p.out, p.in);
}

bool register_cuda() {
  dispatch::note_backend_linked(kCuda);
  register_impl<KernelId::kUnary>(kCuda, SG_AS_TASK(unary), kNative16);
  register_impl<KernelId::kUnaryScalar>(kCuda, SG_AS_TASK(unary_scalar), kNative16);
  register_impl<KernelId::kBinary>(kCuda, SG_AS_TASK(binary), kNative16);
  register_impl<KernelId::kAxpy>(kCuda, SG_AS_TASK(axpy), kNative16);
  register_impl<KernelId::kFill>(kCuda, SG_AS_TASK(fill), kNative16);
  register_impl<KernelId::kCopy>(kCuda, SG_AS_TASK(copy), kNative16);
  register_impl<KernelId::kArange>(kCuda, SG_AS_TASK(arange));
  register_impl<KernelId::kUniform>(kCuda, SG_AS_TASK(uniform));
  register_impl<KernelId::kNormal>(kCuda, SG_AS_TASK(normal));
  register_impl<KernelId::kCompare>(kCuda, SG_AS_TASK(compare));
  register_impl<KernelId::kCompareScalar>(kCuda, SG_AS_TASK(compare_scalar));
  register_impl<KernelId::kWhere>(kCuda, SG_AS_TASK(where));
  register_impl<KernelId::kReduce>(kCuda, SG_AS_TASK(reduce));
  register_impl<KernelId::kArgReduce>(kCuda, SG_AS_TASK(arg_reduce));
  register_impl<KernelId::kCumsum>(kCuda, SG_AS_TASK(cumsum));
  register_impl<KernelId::kSort>(kCuda, SG_AS_TASK(sort));
  register_impl<KernelId::kMultinomial>(kCuda, SG_AS_TASK(multinomial));
  register_impl<KernelId::kIndexRead>(kCuda, SG_AS_TASK(index_read));
  register_impl<KernelId::kIndexAccumulate>(kCuda, SG_AS_TASK(index_accumulate));
  register_impl<KernelId::kCheckIndexRange>(kCuda, SG_AS_TASK(check_index_range));
  register_impl<KernelId::kIndexLinear>(kCuda, SG_AS_TASK(index_linear));
  register_impl<KernelId::kMatmul>(kCuda, SG_AS_TASK(matmul), kNative16);
  register_impl<KernelId::kJoin>(kCuda, SG_AS_TASK(join), kNative16);
  register_impl<KernelId::kSgdUpdate>(kCuda, SG_AS_TASK(sgd_update));
  register_impl<KernelId::kAdamUpdate>(kCuda, SG_AS_TASK(adam_update));
  register_impl<KernelId::kNonFiniteCheckAndUnscale>(kCuda,
                                                      SG_AS_TASK(non_finite_check_and_unscale));
  register_impl<KernelId::kIm2col>(kCuda, SG_AS_TASK(im2col));
  register_impl<KernelId::kCol2im>(kCuda, SG_AS_TASK(col2im));
  register_impl<KernelId::kMaxPool2d>(kCuda, SG_AS_TASK(max_pool2d));
  register_impl<KernelId::kMaxPool2dBackward>(kCuda, SG_AS_TASK(max_pool2d_backward));
  register_impl<KernelId::kBatchNorm>(kCuda, SG_AS_TASK(batch_norm_forward), kNative16);
  register_impl<KernelId::kBatchNormBackward>(kCuda, SG_AS_TASK(batch_norm_backward), kNative16);
  register_impl<KernelId::kLayerNorm>(kCuda, SG_AS_TASK(layer_norm_forward));
  register_impl<KernelId::kLayerNormBackward>(kCuda, SG_AS_TASK(layer_norm_backward));
  register_impl<KernelId::kAttention>(kCuda, SG_AS_TASK(attention_forward));
  register_impl<KernelId::kAttentionBackward>(kCuda, SG_AS_TASK(attention_backward));
  register_impl<KernelId::kConv2d>(kCuda, SG_AS_TASK(cudnn_conv2d));
  register_impl<KernelId::kConv2dBackward>(kCuda, SG_AS_TASK(cudnn_conv2d_backward));
  return true;
}

const bool registered = register_cuda();

}  // namespace
}  // namespace cuda
}  // namespace kernels
}  // namespace streamgrad
