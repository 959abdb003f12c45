// The cuDNN stand-in's handles, descriptors, output dims, problem validation and status
// strings (include/cudnn.h says which argument gets which status).
#include <new>

#include "runtime/cudaemu/cudnn_internal.h"

namespace streamgrad {
namespace cudaemu {
namespace dnn {

// Never destroyed: plans may release descriptors from static destructors.
LiveSet<cudnnContext>& handles() {
  static auto* live = new LiveSet<cudnnContext>();
  return *live;
}
LiveSet<cudnnTensorStruct>& tensors() {
  static auto* live = new LiveSet<cudnnTensorStruct>();
  return *live;
}
LiveSet<cudnnFilterStruct>& filters() {
  static auto* live = new LiveSet<cudnnFilterStruct>();
  return *live;
}
LiveSet<cudnnConvolutionStruct>& convolutions() {
  static auto* live = new LiveSet<cudnnConvolutionStruct>();
  return *live;
}

namespace {

bool valid_type(cudnnDataType_t t) {
  return t >= CUDNN_DATA_FLOAT && t <= CUDNN_DATA_FAST_FLOAT_FOR_FP8;
}

// NCHW_VECT_C packs 4 or 32 int8 channels into one element; nothing else may use it.
bool valid_layout(cudnnTensorFormat_t f, cudnnDataType_t t) {
  if (f == CUDNN_TENSOR_NCHW || f == CUDNN_TENSOR_NHWC) return true;
  return f == CUDNN_TENSOR_NCHW_VECT_C &&
         (t == CUDNN_DATA_INT8x4 || t == CUDNN_DATA_UINT8x4 || t == CUDNN_DATA_INT8x32);
}

template <typename D, typename H>
cudnnStatus_t create(LiveSet<D>& live, H* out) {
  if (out == nullptr) return CUDNN_STATUS_BAD_PARAM;
  D* d = new (std::nothrow) D();
  if (d == nullptr) return CUDNN_STATUS_INTERNAL_ERROR;
  live.add(d);
  *out = d;
  return CUDNN_STATUS_SUCCESS;
}

template <typename D>
cudnnStatus_t destroy(LiveSet<D>& live, D* d) {
  if (d == nullptr) return CUDNN_STATUS_SUCCESS;  // as cuDNN: destroying null is a no-op
  if (!live.remove(d)) return CUDNN_STATUS_BAD_PARAM;
  delete d;
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace

cudnnStatus_t read(cudnnTensorDescriptor_t d, cudnnTensorStruct* out) {
  if (!tensors().contains(d)) return CUDNN_STATUS_BAD_PARAM;
  std::lock_guard<std::mutex> lk(d->mu);
  if (!d->set) return CUDNN_STATUS_BAD_PARAM;
  // Field by field: the struct holds a mutex, which does not copy.
  out->set = true;
  out->format = d->format;
  out->type = d->type;
  out->n = d->n, out->c = d->c, out->h = d->h, out->w = d->w;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t read(cudnnFilterDescriptor_t d, cudnnFilterStruct* out) {
  if (!filters().contains(d)) return CUDNN_STATUS_BAD_PARAM;
  std::lock_guard<std::mutex> lk(d->mu);
  if (!d->set) return CUDNN_STATUS_BAD_PARAM;
  // Field by field: the struct holds a mutex, which does not copy.
  out->set = true;
  out->type = d->type;
  out->format = d->format;
  out->k = d->k, out->c = d->c, out->h = d->h, out->w = d->w;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t read(cudnnConvolutionDescriptor_t d, cudnnConvolutionStruct* out) {
  if (!convolutions().contains(d)) return CUDNN_STATUS_BAD_PARAM;
  std::lock_guard<std::mutex> lk(d->mu);
  if (!d->set) return CUDNN_STATUS_BAD_PARAM;
  // Field by field: the struct holds a mutex, which does not copy.
  out->set = true;
  out->pad_h = d->pad_h, out->pad_w = d->pad_w, out->u = d->u, out->v = d->v;
  out->dil_h = d->dil_h, out->dil_w = d->dil_w;
  out->mode = d->mode;
  out->compute = d->compute;
  out->groups = d->groups;
  out->math = d->math;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t output_dims(cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t image,
                          cudnnFilterDescriptor_t filter, ConvGeom* g) {
  cudnnConvolutionStruct cv;
  cudnnTensorStruct x;
  cudnnFilterStruct f;
  cudnnStatus_t st;
  if ((st = read(conv, &cv)) != CUDNN_STATUS_SUCCESS) return st;
  if ((st = read(image, &x)) != CUDNN_STATUS_SUCCESS) return st;
  if ((st = read(filter, &f)) != CUDNN_STATUS_SUCCESS) return st;
  if (x.c != f.c * cv.groups || f.k % cv.groups != 0) return CUDNN_STATUS_BAD_PARAM;
  const int span_h = (f.h - 1) * cv.dil_h + 1, span_w = (f.w - 1) * cv.dil_w + 1;
  // A filter wider than the padded image leaves no output.
  if (span_h > x.h + 2 * cv.pad_h || span_w > x.w + 2 * cv.pad_w) return CUDNN_STATUS_BAD_PARAM;
  g->n = x.n, g->c = x.c, g->h = x.h, g->w = x.w;
  g->k = f.k, g->kh = f.h, g->kw = f.w;
  g->oh = 1 + (x.h + 2 * cv.pad_h - span_h) / cv.u;
  g->ow = 1 + (x.w + 2 * cv.pad_w - span_w) / cv.v;
  g->groups = cv.groups, g->cpg = f.c, g->kpg = f.k / cv.groups;
  g->pad_h = cv.pad_h, g->pad_w = cv.pad_w, g->u = cv.u, g->v = cv.v;
  g->dil_h = cv.dil_h, g->dil_w = cv.dil_w;
  g->flip = cv.mode == CUDNN_CONVOLUTION;
  g->type = x.type;
  g->math = cv.math;
  if (x.type != f.type) return CUDNN_STATUS_BAD_PARAM;
  if (x.format != CUDNN_TENSOR_NCHW || f.format != CUDNN_TENSOR_NCHW) {
    return CUDNN_STATUS_NOT_SUPPORTED;
  }
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t problem(cudnnTensorDescriptor_t image, cudnnFilterDescriptor_t filter,
                      cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t result,
                      ConvGeom* g) {
  cudnnStatus_t st = output_dims(conv, image, filter, g);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  cudnnTensorStruct y;
  cudnnConvolutionStruct cv;
  if ((st = read(result, &y)) != CUDNN_STATUS_SUCCESS) return st;
  if ((st = read(conv, &cv)) != CUDNN_STATUS_SUCCESS) return st;
  if (y.type != g->type || y.n != g->n || y.c != g->k) return CUDNN_STATUS_BAD_PARAM;
  if (y.h != g->oh || y.w != g->ow) return CUDNN_STATUS_NOT_SUPPORTED;
  if (y.format != CUDNN_TENSOR_NCHW) return CUDNN_STATUS_NOT_SUPPORTED;
  if (g->type != CUDNN_DATA_FLOAT && g->type != CUDNN_DATA_DOUBLE) {
    return CUDNN_STATUS_NOT_SUPPORTED;
  }
  if (cv.compute != g->type) return CUDNN_STATUS_NOT_SUPPORTED;
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace dnn
}  // namespace cudaemu
}  // namespace streamgrad

namespace dnn = streamgrad::cudaemu::dnn;

extern "C" {

cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
  int device = 0;
  if (handle != nullptr && cudaGetDevice(&device) != cudaSuccess) {
    return CUDNN_STATUS_NOT_INITIALIZED;
  }
  return dnn::create(dnn::handles(), handle);
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  if (handle == nullptr) return CUDNN_STATUS_BAD_PARAM;
  return dnn::destroy(dnn::handles(), handle);
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId) {
  if (!dnn::handles().contains(handle)) return CUDNN_STATUS_BAD_PARAM;
  std::lock_guard<std::mutex> lk(handle->mu);
  handle->stream = streamId;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t* streamId) {
  if (!dnn::handles().contains(handle) || streamId == nullptr) return CUDNN_STATUS_BAD_PARAM;
  std::lock_guard<std::mutex> lk(handle->mu);
  *streamId = handle->stream;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* tensorDesc) {
  return dnn::create(dnn::tensors(), tensorDesc);
}
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t tensorDesc) {
  return dnn::destroy(dnn::tensors(), tensorDesc);
}
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* filterDesc) {
  return dnn::create(dnn::filters(), filterDesc);
}
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t filterDesc) {
  return dnn::destroy(dnn::filters(), filterDesc);
}
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* convDesc) {
  return dnn::create(dnn::convolutions(), convDesc);
}
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t convDesc) {
  return dnn::destroy(dnn::convolutions(), convDesc);
}

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t tensorDesc,
                                         cudnnTensorFormat_t format, cudnnDataType_t dataType,
                                         int n, int c, int h, int w) {
  if (!dnn::tensors().contains(tensorDesc)) return CUDNN_STATUS_BAD_PARAM;
  if (n < 1 || c < 1 || h < 1 || w < 1) return CUDNN_STATUS_BAD_PARAM;
  if (!dnn::valid_type(dataType) || !dnn::valid_layout(format, dataType)) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  std::lock_guard<std::mutex> lk(tensorDesc->mu);
  tensorDesc->set = true;
  tensorDesc->format = format;
  tensorDesc->type = dataType;
  tensorDesc->n = n, tensorDesc->c = c, tensorDesc->h = h, tensorDesc->w = w;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t filterDesc,
                                         cudnnDataType_t dataType, cudnnTensorFormat_t format,
                                         int k, int c, int h, int w) {
  if (!dnn::filters().contains(filterDesc)) return CUDNN_STATUS_BAD_PARAM;
  if (k < 1 || c < 1 || h < 1 || w < 1) return CUDNN_STATUS_BAD_PARAM;
  if (!dnn::valid_type(dataType) || !dnn::valid_layout(format, dataType)) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  std::lock_guard<std::mutex> lk(filterDesc->mu);
  filterDesc->set = true;
  filterDesc->type = dataType;
  filterDesc->format = format;
  filterDesc->k = k, filterDesc->c = c, filterDesc->h = h, filterDesc->w = w;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t convDesc, int pad_h,
                                              int pad_w, int u, int v, int dilation_h,
                                              int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t computeType) {
  if (!dnn::convolutions().contains(convDesc)) return CUDNN_STATUS_BAD_PARAM;
  if (pad_h < 0 || pad_w < 0 || u < 1 || v < 1 || dilation_h < 1 || dilation_w < 1) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  if ((mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION) ||
      !dnn::valid_type(computeType)) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  std::lock_guard<std::mutex> lk(convDesc->mu);
  convDesc->set = true;
  convDesc->pad_h = pad_h, convDesc->pad_w = pad_w, convDesc->u = u, convDesc->v = v;
  convDesc->dil_h = dilation_h, convDesc->dil_w = dilation_w;
  convDesc->mode = mode;
  convDesc->compute = computeType;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t convDesc,
                                            int groupCount) {
  if (!dnn::convolutions().contains(convDesc) || groupCount < 1) return CUDNN_STATUS_BAD_PARAM;
  std::lock_guard<std::mutex> lk(convDesc->mu);
  convDesc->groups = groupCount;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc,
                                          cudnnMathType_t mathType) {
  if (!dnn::convolutions().contains(convDesc)) return CUDNN_STATUS_BAD_PARAM;
  if (mathType < CUDNN_DEFAULT_MATH || mathType > CUDNN_FMA_MATH) return CUDNN_STATUS_BAD_PARAM;
  std::lock_guard<std::mutex> lk(convDesc->mu);
  convDesc->math = mathType;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t convDesc,
                                                    const cudnnTensorDescriptor_t inputTensorDesc,
                                                    const cudnnFilterDescriptor_t filterDesc,
                                                    int* n, int* c, int* h, int* w) {
  if (n == nullptr || c == nullptr || h == nullptr || w == nullptr) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  dnn::ConvGeom g;
  const cudnnStatus_t st = dnn::output_dims(convDesc, inputTensorDesc, filterDesc, &g);
  // Only the dims matter here: a layout the convolutions refuse still has an output size.
  if (st != CUDNN_STATUS_SUCCESS && st != CUDNN_STATUS_NOT_SUPPORTED) return st;
  *n = g.n, *c = g.k, *h = g.oh, *w = g.ow;
  return CUDNN_STATUS_SUCCESS;
}

const char* cudnnGetErrorString(cudnnStatus_t status) {
  switch (status) {
    case CUDNN_STATUS_SUCCESS:
      return "CUDNN_STATUS_SUCCESS: the call succeeded";
    case CUDNN_STATUS_NOT_INITIALIZED:
      return "CUDNN_STATUS_NOT_INITIALIZED: no device for the handle";
    case CUDNN_STATUS_BAD_PARAM:
      return "CUDNN_STATUS_BAD_PARAM: an argument, handle or descriptor is invalid or they "
             "do not fit together";
    case CUDNN_STATUS_BAD_PARAM_NULL_POINTER:
      return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER: a required pointer is null";
    case CUDNN_STATUS_NOT_SUPPORTED:
      return "CUDNN_STATUS_NOT_SUPPORTED: this combination of layout, types, shapes and "
             "algorithm is not implemented";
    case CUDNN_STATUS_INTERNAL_ERROR:
      return "CUDNN_STATUS_INTERNAL_ERROR: an internal operation failed";
    case CUDNN_STATUS_EXECUTION_FAILED:
      return "CUDNN_STATUS_EXECUTION_FAILED: the work could not be put on the stream";
  }
  return "CUDNN_STATUS_UNKNOWN: not a cuDNN status";
}

}  // extern "C"
