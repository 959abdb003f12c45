// The kernels of the dispatch table (registry.h) and each one's implementation signature.
//
// Every implementation is `void(const Stream&, const LaunchSpec&, args...)` with the
// arguments listed here: what the front door (kernels/*.cc) derives from the checked views.
// Adding a kernel adds one line to SG_KERNEL_LIST; the compiler then checks every
// registration and call against it.
//
// Thread-safety: compile-time declarations; kernel_id_name is a pure function.
// Failure: none.
#ifndef STREAMGRAD_KERNELS_DISPATCH_KERNEL_IDS_H_
#define STREAMGRAD_KERNELS_DISPATCH_KERNEL_IDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/dispatch/kernel_args.h"
#include "kernels/dispatch/matmul_plan.h"
#include "kernels/dispatch/strided.h"
#include "kernels/foreach.h"
#include "kernels/op_codes.h"
#include "kernels/window.h"
#include "runtime/backend/stream.h"
#include "runtime/base/dtype.h"

namespace streamgrad {
namespace kernels {
namespace dispatch {

struct LaunchSpec;

// X(id, name, argument types...). kTestOnly exists for tests/kernels/front_door_test: it
// lets a test register and miss implementations without touching a real kernel.
#define SG_KERNEL_LIST(X)                                                                  \
  X(kUnary, "unary", Unary, DType, const cpu::Layout<2>&, void*, const void*)              \
  X(kUnaryScalar, "unary_scalar", UnaryScalar, DType, const cpu::Layout<2>&, void*,        \
    const void*, double)                                                                   \
  X(kBinary, "binary", Binary, DType, const cpu::Layout<3>&, void*, const void*,           \
    const void*)                                                                           \
  X(kAxpy, "axpy", DType, const cpu::Layout<3>&, void*, const void*, const void*, double)  \
  X(kFill, "fill", DType, const cpu::Layout<1>&, void*, double)                            \
  X(kCopy, "copy", DType, DType, const cpu::Layout<2>&, void*, const void*)                \
  X(kArange, "arange", DType, const cpu::Layout<1>&, void*, double, double)                \
  X(kUniform, "uniform", DType, const cpu::Layout<1>&, void*, double, double, uint64_t,    \
    uint64_t)                                                                              \
  X(kNormal, "normal", DType, const cpu::Layout<1>&, void*, double, double, uint64_t,      \
    uint64_t)                                                                              \
  X(kCompare, "compare", Compare, DType, const cpu::Layout<3>&, void*, const void*,        \
    const void*)                                                                           \
  X(kCompareScalar, "compare_scalar", Compare, DType, const cpu::Layout<2>&, void*,        \
    const void*, double)                                                                   \
  X(kWhere, "where", DType, const cpu::Layout<4>&, void*, const void*, const void*,        \
    const void*)                                                                           \
  X(kReduce, "reduce", Reduce, DType, const cpu::Layout<2>&, const cpu::Layout<1>&, void*, \
    const void*)                                                                           \
  X(kArgReduce, "arg_reduce", bool, DType, const cpu::Layout<3>&, int64_t, int64_t, void*, \
    int64_t*, const void*)                                                                 \
  X(kCumsum, "cumsum", DType, const cpu::Layout<2>&, int64_t, int64_t, int64_t, void*,     \
    const void*)                                                                           \
  X(kSort, "sort", DType, const SortArgs&, void*, int64_t*, const void*)                 \
  X(kMultinomial, "multinomial", DType, const MultinomialArgs&, int64_t*, const void*)     \
  X(kMatmul, "matmul", const cpu::MatmulPlan&, void*, DType)                             \
  X(kIndexRead, "index_read", DType, const IndexArgs&)                                     \
  X(kIndexAccumulate, "index_accumulate", DType, const IndexArgs&)                         \
  X(kCheckIndexRange, "check_index_range", const cpu::Layout<1>&, const int64_t*, int64_t, \
    int64_t, const std::string&)                                                           \
  X(kIndexLinear, "index_linear", const cpu::Layout<2>&, int64_t*, const int64_t*, int64_t, \
    int64_t, bool)                                                                         \
  X(kJoin, "join", DType, const std::vector<JoinPiece>&)                                   \
  X(kSgdUpdate, "sgd_update", DType, const SgdHyper&, const std::vector<SgdItem>&)         \
  X(kAdamUpdate, "adam_update", DType, const AdamHyper&, const std::vector<AdamItem>&)     \
  X(kNonFiniteCheckAndUnscale, "non_finite_check_and_unscale", DType,                      \
    const std::vector<UnscaleItem>&, float*, double)                                       \
  X(kIm2col, "im2col", DType, const ImageShape&, const Window2d&, void*, const void*)      \
  X(kCol2im, "col2im", DType, const ImageShape&, const Window2d&, void*, const void*)      \
  X(kMaxPool2d, "max_pool2d", DType, const ImageShape&, const Window2d&, void*, int64_t*,  \
    const void*)                                                                           \
  X(kMaxPool2dBackward, "max_pool2d_backward", DType, const ImageShape&, const Window2d&,  \
    void*, const void*, const int64_t*)                                                    \
  X(kBatchNorm, "batch_norm", DType, DType, const NcsShape&, double, void*, void*, void*,  \
    const void*, const void*, const void*, const RunningUpdate&)                           \
  X(kBatchNormBackward, "batch_norm_backward", DType, DType, const NcsShape&, double,      \
    void*, void*, void*, const void*, const void*, const void*, const void*, const void*)  \
  X(kLayerNorm, "layer_norm", DType, const NormRows&, double, void*, void*, void*,         \
    const void*, const void*, const void*)                                                 \
  X(kLayerNormBackward, "layer_norm_backward", DType, const NormRows&, void*, void*,       \
    void*, const void*, const void*, const void*, const void*, const void*)                \
  X(kAttention, "attention", DType, const AttentionShape&, void*, void*, const void*,       \
    const void*, const void*, const void*)                                                 \
  X(kAttentionBackward, "attention_backward", DType, const AttentionShape&, void*, void*,  \
    void*, const void*, const void*, const void*, const void*, const void*, const void*,   \
    const void*)                                                                           \
  X(kConv2d, "conv2d", ConvPass, DType, const ConvShape&, const Window2d&, void*,          \
    const void*, const void*)                                                              \
  X(kConv2dBackward, "conv2d_backward", DType, const ConvShape&, const Window2d&, void*,   \
    void*, const void*, const void*, const void*)                                          \
  X(kTestOnly, "test_only", int*)

enum class KernelId : int {
#define SG_KERNEL_ENUM(id, name, ...) id,
  SG_KERNEL_LIST(SG_KERNEL_ENUM)
#undef SG_KERNEL_ENUM
  kNumKernels
};

const char* kernel_id_name(KernelId id);

template <KernelId K>
struct KernelSig;

#define SG_KERNEL_SIG(id, name, ...)                                 \
  template <>                                                        \
  struct KernelSig<KernelId::id> {                                   \
    using Fn = void(const Stream&, const LaunchSpec&, __VA_ARGS__);  \
  };
SG_KERNEL_LIST(SG_KERNEL_SIG)
#undef SG_KERNEL_SIG

}  // namespace dispatch
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_DISPATCH_KERNEL_IDS_H_
