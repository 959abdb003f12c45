// Convolution on cuda streams through cuDNN (kernels/cuda/cuda_kernels.h, cudnn_conv2d).
//
// A plan is what one (pass, dtype, shapes, window, groups, TF32) needs before it can run:
// the four descriptors and the algorithm. cuDNN's heuristics (the _v7 queries) rank the
// algorithms without running them; the plan takes the first deterministic one that
// supports the problem, so a convolution gives the same bits every run, as every other
// streamgrad kernel does, and falls back to the first supported one only where no
// deterministic algorithm exists. Plans live in the device's PlanCache
// (kernels/plan_cache.h). Descriptors are never written after the plan is made, so two
// threads may run one plan at once.
//
// The legacy descriptor API is deprecated in cuDNN 9 but supported through 9.x; it keeps
// this file short, which matters for code first run on a GPU long after it was written.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/stream_handles.cuh"
#include "kernels/plan_cache.h"
#include "runtime/backend/cuda_settings.h"
#include "runtime/base/error.h"
#include "runtime/cuda/cuda_stream.h"
#include "runtime/memory/storage.h"

namespace streamgrad {
namespace kernels {
namespace cuda {
namespace {

const char* pass_name(ConvPass pass) {
  switch (pass) {
    case ConvPass::kForward:
      return "cudnn_conv2d";
    case ConvPass::kBackwardInput:
      return "cudnn_conv2d_backward_input";
    case ConvPass::kBackwardWeight:
      return "cudnn_conv2d_backward_weight";
  }
  return "cudnn_conv2d";
}

struct Problem {
  ConvPass pass;
  DType dt;
  ConvShape s;
  Window2d w;
  bool tf32;
  const Stream& stream;
};

void check_cudnn(cudnnStatus_t status, const char* what, const Problem& p) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  const ConvShape& s = p.s;
  throw DeviceError(absl::StrCat(
      pass_name(p.pass), ": ", what, " on ", p.stream.str(), " failed with ",
      cudnnGetErrorString(status), " for image [", s.n, ", ", s.c, ", ", s.h, ", ", s.w,
      "], weight [", s.o, ", ", s.c / s.groups, ", ", s.kh, ", ", s.kw, "], ", s.groups,
      " groups, ", dtype_name(p.dt), "; ", kLibraryFailureHint));
}

// cuDNN's handle of a stream (stream_handles.cuh).
using Handle = StreamHandle<cudnnHandle_t>;

Handle& handle_for(const Problem& p) {
  return handle_for_stream<Handle>(p.stream, [&](Handle& fresh) {
    check_cudnn(cudnnCreate(&fresh.handle), "cudnnCreate", p);
    check_cudnn(cudnnSetStream(fresh.handle, raw_cuda_stream(p.stream)), "cudnnSetStream", p);
  });
}

struct Plan {
  cudnnTensorDescriptor_t image = nullptr;   // x (forward, weight pass) or dx
  cudnnTensorDescriptor_t result = nullptr;  // y (forward) or dy
  cudnnFilterDescriptor_t filter = nullptr;  // w or dw
  cudnnConvolutionDescriptor_t conv = nullptr;
  int algo = 0;
  size_t workspace = 0;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  // Errors are ignored: a plan may be dropped at process exit, after the library.
  ~Plan() {
    if (conv != nullptr) (void)cudnnDestroyConvolutionDescriptor(conv);
    if (filter != nullptr) (void)cudnnDestroyFilterDescriptor(filter);
    if (result != nullptr) (void)cudnnDestroyTensorDescriptor(result);
    if (image != nullptr) (void)cudnnDestroyTensorDescriptor(image);
  }
};

int as_int(int64_t v) { return static_cast<int>(v); }  // cudnn_conv2d_supported checked

std::string key_of(const Problem& p) {
  const ConvShape& s = p.s;
  const Window2d& w = p.w;
  return absl::StrCat(static_cast<int>(p.pass), "/", static_cast<int>(p.dt), "/", s.n, ",", s.c,
                      ",", s.h, ",", s.w, "/", s.o, ",", s.kh, ",", s.kw, "/", s.groups, "/",
                      w.stride[0], ",", w.stride[1], ",", w.padding[0], ",", w.padding[1], ",",
                      w.dilation[0], ",", w.dilation[1], "/", p.tf32 ? 1 : 0);
}

// The first deterministic supported algorithm of a heuristics ranking, else the first
// supported one.
template <typename Perf>
int pick(const Perf* perf, int count, const Problem& p) {
  for (int i = 0; i < count; ++i) {
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].determinism == CUDNN_DETERMINISTIC) {
      return static_cast<int>(perf[i].algo);
    }
  }
  for (int i = 0; i < count; ++i) {
    if (perf[i].status == CUDNN_STATUS_SUCCESS) return static_cast<int>(perf[i].algo);
  }
  check_cudnn(CUDNN_STATUS_NOT_SUPPORTED, "choosing an algorithm", p);
  return 0;
}

void choose_algorithm(cudnnHandle_t h, Plan& plan, const Problem& p) {
  int returned = 0;
  switch (p.pass) {
    case ConvPass::kForward: {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      check_cudnn(cudnnGetConvolutionForwardAlgorithm_v7(h, plan.image, plan.filter, plan.conv,
                                                         plan.result,
                                                         CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                         &returned, perf),
                  "cudnnGetConvolutionForwardAlgorithm_v7", p);
      plan.algo = pick(perf, returned, p);
      check_cudnn(cudnnGetConvolutionForwardWorkspaceSize(
                      h, plan.image, plan.filter, plan.conv, plan.result,
                      static_cast<cudnnConvolutionFwdAlgo_t>(plan.algo), &plan.workspace),
                  "cudnnGetConvolutionForwardWorkspaceSize", p);
      return;
    }
    case ConvPass::kBackwardInput: {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      check_cudnn(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                      h, plan.filter, plan.result, plan.conv, plan.image,
                      CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, perf),
                  "cudnnGetConvolutionBackwardDataAlgorithm_v7", p);
      plan.algo = pick(perf, returned, p);
      check_cudnn(cudnnGetConvolutionBackwardDataWorkspaceSize(
                      h, plan.filter, plan.result, plan.conv, plan.image,
                      static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.algo), &plan.workspace),
                  "cudnnGetConvolutionBackwardDataWorkspaceSize", p);
      return;
    }
    case ConvPass::kBackwardWeight: {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      check_cudnn(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                      h, plan.image, plan.result, plan.conv, plan.filter,
                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned, perf),
                  "cudnnGetConvolutionBackwardFilterAlgorithm_v7", p);
      plan.algo = pick(perf, returned, p);
      check_cudnn(cudnnGetConvolutionBackwardFilterWorkspaceSize(
                      h, plan.image, plan.result, plan.conv, plan.filter,
                      static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan.algo), &plan.workspace),
                  "cudnnGetConvolutionBackwardFilterWorkspaceSize", p);
      return;
    }
  }
}

std::shared_ptr<const Plan> make_plan(cudnnHandle_t h, const Problem& p) {
  const ConvShape& s = p.s;
  const Window2d& w = p.w;
  const cudnnDataType_t type = p.dt == DType::kFloat32 ? CUDNN_DATA_FLOAT : CUDNN_DATA_DOUBLE;
  auto plan = std::make_shared<Plan>();
  check_cudnn(cudnnCreateTensorDescriptor(&plan->image), "cudnnCreateTensorDescriptor", p);
  check_cudnn(cudnnCreateTensorDescriptor(&plan->result), "cudnnCreateTensorDescriptor", p);
  check_cudnn(cudnnCreateFilterDescriptor(&plan->filter), "cudnnCreateFilterDescriptor", p);
  check_cudnn(cudnnCreateConvolutionDescriptor(&plan->conv), "cudnnCreateConvolutionDescriptor",
              p);
  check_cudnn(cudnnSetTensor4dDescriptor(plan->image, CUDNN_TENSOR_NCHW, type, as_int(s.n),
                                         as_int(s.c), as_int(s.h), as_int(s.w)),
              "cudnnSetTensor4dDescriptor (image)", p);
  check_cudnn(cudnnSetTensor4dDescriptor(plan->result, CUDNN_TENSOR_NCHW, type, as_int(s.n),
                                         as_int(s.o), as_int(s.oh), as_int(s.ow)),
              "cudnnSetTensor4dDescriptor (output)", p);
  check_cudnn(cudnnSetFilter4dDescriptor(plan->filter, type, CUDNN_TENSOR_NCHW, as_int(s.o),
                                         as_int(s.c / s.groups), as_int(s.kh), as_int(s.kw)),
              "cudnnSetFilter4dDescriptor", p);
  // Cross-correlation, as PyTorch's conv2d (no kernel flip); sums in the data's dtype.
  check_cudnn(cudnnSetConvolution2dDescriptor(
                  plan->conv, as_int(w.padding[0]), as_int(w.padding[1]), as_int(w.stride[0]),
                  as_int(w.stride[1]), as_int(w.dilation[0]), as_int(w.dilation[1]),
                  CUDNN_CROSS_CORRELATION, type),
              "cudnnSetConvolution2dDescriptor", p);
  check_cudnn(cudnnSetConvolutionGroupCount(plan->conv, as_int(s.groups)),
              "cudnnSetConvolutionGroupCount", p);
  // FMA math keeps float32 off the tensor cores, which would round the inputs to TF32.
  check_cudnn(cudnnSetConvolutionMathType(plan->conv, p.tf32 || p.dt != DType::kFloat32
                                                          ? CUDNN_DEFAULT_MATH
                                                          : CUDNN_FMA_MATH),
              "cudnnSetConvolutionMathType", p);
  int n = 0, c = 0, oh = 0, ow = 0;
  check_cudnn(cudnnGetConvolution2dForwardOutputDim(plan->conv, plan->image, plan->filter, &n,
                                                    &c, &oh, &ow),
              "cudnnGetConvolution2dForwardOutputDim", p);
  SG_INTERNAL_CHECK(n == s.n && c == s.o && oh == s.oh && ow == s.ow, pass_name(p.pass),
                    ": cuDNN gives a [", n, ", ", c, ", ", oh, ", ", ow,
                    "] output where window_output_size gives [", s.n, ", ", s.o, ", ", s.oh,
                    ", ", s.ow, "]");
  choose_algorithm(h, *plan, p);
  return plan;
}

template <typename T>
void run(cudnnHandle_t h, const Plan& plan, const Problem& p, void* a, const void* b,
         const void* c, void* workspace) {
  const T one = 1, zero = 0;
  switch (p.pass) {
    case ConvPass::kForward:
      check_cudnn(cudnnConvolutionForward(h, &one, plan.image, b, plan.filter, c, plan.conv,
                                          static_cast<cudnnConvolutionFwdAlgo_t>(plan.algo),
                                          workspace, plan.workspace, &zero, plan.result, a),
                  "cudnnConvolutionForward", p);
      return;
    case ConvPass::kBackwardInput:
      check_cudnn(cudnnConvolutionBackwardData(
                      h, &one, plan.filter, c, plan.result, b, plan.conv,
                      static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.algo), workspace,
                      plan.workspace, &zero, plan.image, a),
                  "cudnnConvolutionBackwardData", p);
      return;
    case ConvPass::kBackwardWeight:
      check_cudnn(cudnnConvolutionBackwardFilter(
                      h, &one, plan.image, c, plan.result, b, plan.conv,
                      static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan.algo), workspace,
                      plan.workspace, &zero, plan.filter, a),
                  "cudnnConvolutionBackwardFilter", p);
      return;
  }
}

}  // namespace

void cudnn_conv2d(const Stream& stream, ConvPass pass, DType dt, const ConvShape& s,
                  const Window2d& w, void* a, const void* b, const void* c) {
  const Problem p{pass, dt, s, w, dt == DType::kFloat32 && cudnn_allow_tf32(), stream};
  Handle& h = handle_for(p);
  std::lock_guard<std::mutex> lk(h.mu);
  PlanCache& cache = cudnn_conv_plan_cache(stream.device().index());
  const std::string key = key_of(p);
  std::shared_ptr<const void> found = cache.find(key);
  std::shared_ptr<const Plan> plan = std::static_pointer_cast<const Plan>(found);
  if (plan == nullptr) {
    plan = make_plan(h.handle, p);
    cache.insert(key, plan);
  }
  // Stream-ordered like matmul's scratch: handed out again only after this work.
  Storage workspace;
  void* ws = nullptr;  // most plans need none: an empty Storage has no data() to give
  if (plan->workspace > 0) {
    workspace = Storage::allocate(plan->workspace, stream);
    ws = workspace.data();
  }
  if (dt == DType::kFloat32) {
    run<float>(h.handle, *plan, p, a, b, c, ws);
  } else {
    run<double>(h.handle, *plan, p, a, b, c, ws);
  }
}

void cudnn_conv2d_backward(const Stream& stream, DType dt, const ConvShape& s,
                           const Window2d& w, void* grad_in, void* grad_weight,
                           const void* grad_out, const void* in, const void* weight) {
  cudnn_conv2d(stream, ConvPass::kBackwardInput, dt, s, w, grad_in, grad_out, weight);
  cudnn_conv2d(stream, ConvPass::kBackwardWeight, dt, s, w, grad_weight, grad_out, in);
}

}  // namespace cuda
}  // namespace kernels
}  // namespace streamgrad
