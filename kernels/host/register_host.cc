// Registers the host implementations (host_kernels.h) in the dispatch table for cpu and
// sim streams, from a static initialiser: the library is alwayslink, so every binary that
// links the kernels has them. Which of them take 16-bit views as they are is decided here
// (ImplOptions::native_16bit): copy and fill convert every dtype; the element-wise
// arithmetic (unary, unary_scalar, binary, axpy) widens float16 and bfloat16 block by
// block inside its own loops (loops_elementwise16.cc); the other arithmetic kernels compute
// them in float32 on copies the front door makes.
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
    register_impl<KernelId::kUnary>(d, &unary, kNative16);
    register_impl<KernelId::kUnaryScalar>(d, &unary_scalar, kNative16);
    register_impl<KernelId::kBinary>(d, &binary, kNative16);
    register_impl<KernelId::kAxpy>(d, &axpy, kNative16);
    register_impl<KernelId::kFill>(d, &fill, kNative16);
    register_impl<KernelId::kCopy>(d, &copy, kNative16);
    register_impl<KernelId::kArange>(d, &arange);
    register_impl<KernelId::kUniform>(d, &uniform);
    register_impl<KernelId::kNormal>(d, &normal);
    register_impl<KernelId::kCompare>(d, &compare);
    register_impl<KernelId::kCompareScalar>(d, &compare_scalar);
    register_impl<KernelId::kWhere>(d, &where, kNative16);
    register_impl<KernelId::kReduce>(d, &reduce);
    register_impl<KernelId::kArgReduce>(d, &arg_reduce);
    register_impl<KernelId::kCumsum>(d, &cumsum);
    register_impl<KernelId::kSort>(d, &sort);
    register_impl<KernelId::kMultinomial>(d, &multinomial);
    register_impl<KernelId::kIndexRead>(d, &index_read, kNative16);
    register_impl<KernelId::kIndexAccumulate>(d, &index_accumulate);
    register_impl<KernelId::kCheckIndexRange>(d, &check_index_range);
    register_impl<KernelId::kIndexLinear>(d, &index_linear);
    register_impl<KernelId::kMatmul>(d, &matmul);
    register_impl<KernelId::kJoin>(d, &join, kNative16);
    register_impl<KernelId::kSgdUpdate>(d, &sgd_update);
    register_impl<KernelId::kAdamUpdate>(d, &adam_update);
    register_impl<KernelId::kNonFiniteCheckAndUnscale>(d, &non_finite_check_and_unscale);
    register_impl<KernelId::kIm2col>(d, &im2col, kNative16);
    register_impl<KernelId::kCol2im>(d, &col2im);
    register_impl<KernelId::kConv2d>(d, &onednn_conv2d);
    register_impl<KernelId::kConv2dBackward>(d, &onednn_conv2d_backward);
    register_impl<KernelId::kMaxPool2d>(d, &max_pool2d);
    register_impl<KernelId::kMaxPool2dBackward>(d, &max_pool2d_backward);
    register_impl<KernelId::kBatchNorm>(d, &batch_norm_forward, kNative16);
    register_impl<KernelId::kBatchNormBackward>(d, &batch_norm_backward, kNative16);
    register_impl<KernelId::kLayerNorm>(d, &layer_norm_forward);
    register_impl<KernelId::kLayerNormBackward>(d, &layer_norm_backward);
    register_impl<KernelId::kAttention>(d, &attention_forward);
    register_impl<KernelId::kAttentionBackward>(d, &attention_backward);
  }
  return true;
}

const bool registered = register_host();

}  // namespace
}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad
