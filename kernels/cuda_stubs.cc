// The cuda kernels of kernels/cuda/cuda_kernels.h in a build without nvcc: never reached
// (cpu::check_stream refuses cuda streams first), defined so that the kernels link.
#if !defined(SG_CUDA_KERNELS)

#include "kernels/cuda/cuda_kernels.h"
#include "runtime/error.h"

namespace streamgrad {
namespace kernels {
namespace cuda {
namespace {

[[noreturn]] void no_cuda(const char* kernel) {
  throw DeviceError(std::string(kernel) +
                    ": this build has no cuda kernels (nvcc was not found when it was "
                    "built); rebuild where the CUDA toolkit is installed");
}

}  // namespace

void uniform(const Stream&, DType, const cpu::Layout<1>&, void*, double, double, uint64_t,
             uint64_t) {
  no_cuda("uniform");
}
void normal(const Stream&, DType, const cpu::Layout<1>&, void*, double, double, uint64_t,
            uint64_t) {
  no_cuda("normal");
}
void matmul(const Stream&, const cpu::MatmulPlan&, void*, DType) { no_cuda("matmul"); }
void compare(const Stream&, Compare, DType, const cpu::Layout<3>&, void*, const void*,
             const void*) {
  no_cuda("compare");
}
void compare_scalar(const Stream&, Compare, DType, const cpu::Layout<2>&, void*, const void*,
                    double) {
  no_cuda("compare_scalar");
}
void where(const Stream&, DType, const cpu::Layout<4>&, void*, const void*, const void*,
           const void*) {
  no_cuda("where");
}
void index_read(const Stream&, DType, const IndexArgs&) { no_cuda("index_read"); }
void index_accumulate(const Stream&, DType, const IndexArgs&) { no_cuda("index_accumulate"); }
bool first_bad_index(const Stream&, const char*, const cpu::Layout<1>&, const int64_t*, int64_t,
                     int64_t*, int64_t*) {
  no_cuda("check_index_range");
}
void sgd_update(const Stream&, DType, const SgdHyper&, const std::vector<SgdItem>&) {
  no_cuda("sgd_update");
}
void adam_update(const Stream&, DType, const AdamHyper&, const std::vector<AdamItem>&) {
  no_cuda("adam_update");
}
void non_finite_check_and_unscale(const Stream&, DType, const std::vector<UnscaleItem>&, float*,
                                  double) {
  no_cuda("non_finite_check_and_unscale");
}
void im2col(const Stream&, DType, const ImageShape&, const Window2d&, void*, const void*) {
  no_cuda("im2col");
}
void col2im(const Stream&, DType, const ImageShape&, const Window2d&, void*, const void*) {
  no_cuda("col2im");
}
void max_pool2d(const Stream&, DType, const ImageShape&, const Window2d&, void*, int64_t*,
                const void*) {
  no_cuda("max_pool2d");
}
void max_pool2d_backward(const Stream&, DType, const ImageShape&, const Window2d&, void*,
                         const void*, const int64_t*) {
  no_cuda("max_pool2d_backward");
}
void batch_norm_forward(const Stream&, DType, const NcsShape&, double, void*, void*, void*,
                        const void*, const void*, const void*) {
  no_cuda("batch_norm");
}
void batch_norm_backward(const Stream&, DType, const NcsShape&, double, void*, void*, void*,
                         const void*, const void*, const void*, const void*, const void*) {
  no_cuda("batch_norm_backward");
}
void reduce(const Stream&, Reduce, DType, const cpu::Layout<2>&, const cpu::Layout<1>&, void*,
            const void*) {
  no_cuda("reduce");
}
void arg_reduce(const Stream&, bool, DType, const cpu::Layout<3>&, int64_t, int64_t, void*,
                int64_t*, const void*) {
  no_cuda("arg_reduce");
}
void cudnn_conv2d(const Stream&, ConvPass, DType, const ConvShape&, const Window2d&, void*,
                  const void*, const void*) {
  no_cuda("cudnn_conv2d");
}

}  // namespace cuda
}  // namespace kernels
}  // namespace streamgrad

#endif  // !SG_CUDA_KERNELS
