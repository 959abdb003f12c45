// What the cuDNN stand-in's sources (cudnn_descriptors.cc, cudnn_conv.cc,
// cudnn_reference.cc) share: the handle and descriptor structs behind include/cudnn.h's
// opaque types, the registries of live ones, the geometry of one convolution problem with
// its validation, and the reference loops.
//
// Thread-safety: the registries may be used from any thread; a descriptor's fields are
// read and written under its own lock. Failure: statuses, never exceptions (the reference
// loops allocate, and std::bad_alloc there becomes the device's sticky error).
#ifndef STREAMGRAD_RUNTIME_CUDAEMU_CUDNN_INTERNAL_H_
#define STREAMGRAD_RUNTIME_CUDAEMU_CUDNN_INTERNAL_H_

#include <cudnn.h>

#include <mutex>

#include "runtime/cudaemu/live_set.h"

struct cudnnContext {
  std::mutex mu;  // guards stream
  cudaStream_t stream = nullptr;
};

struct cudnnTensorStruct {
  std::mutex mu;
  bool set = false;
  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int n = 0, c = 0, h = 0, w = 0;
};

struct cudnnFilterStruct {
  std::mutex mu;
  bool set = false;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
  int k = 0, c = 0, h = 0, w = 0;
};

struct cudnnConvolutionStruct {
  std::mutex mu;
  bool set = false;  // by cudnnSetConvolution2dDescriptor; groups and math have defaults
  int pad_h = 0, pad_w = 0, u = 1, v = 1, dil_h = 1, dil_w = 1;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  int groups = 1;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

namespace streamgrad {
namespace cudaemu {
namespace dnn {

LiveSet<cudnnContext>& handles();
LiveSet<cudnnTensorStruct>& tensors();
LiveSet<cudnnFilterStruct>& filters();
LiveSet<cudnnConvolutionStruct>& convolutions();

// Copies of the descriptors' fields: BAD_PARAM for a null, unknown or unset one.
cudnnStatus_t read(cudnnTensorDescriptor_t d, cudnnTensorStruct* out);
cudnnStatus_t read(cudnnFilterDescriptor_t d, cudnnFilterStruct* out);
cudnnStatus_t read(cudnnConvolutionDescriptor_t d, cudnnConvolutionStruct* out);

// One NCHW convolution: image [n, c, h, w], filter [k, c / groups, kh, kw], result
// [n, k, oh, ow].
struct ConvGeom {
  int n = 0, c = 0, h = 0, w = 0;
  int k = 0, kh = 0, kw = 0, oh = 0, ow = 0;
  int groups = 1, cpg = 0, kpg = 0;  // channels and filters per group
  int pad_h = 0, pad_w = 0, u = 1, v = 1, dil_h = 1, dil_w = 1;
  bool flip = false;  // CUDNN_CONVOLUTION: the filter is applied mirrored
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

// The output dims of image, filter and convolution (cudnnGetConvolution2dForwardOutputDim).
cudnnStatus_t output_dims(cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t image,
                          cudnnFilterDescriptor_t filter, ConvGeom* g);
// output_dims, then the result descriptor, types, formats and compute type checked.
cudnnStatus_t problem(cudnnTensorDescriptor_t image, cudnnFilterDescriptor_t filter,
                      cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t result,
                      ConvGeom* g);

// The reference loops: out = alpha * op + beta * out, where beta == 0 never reads out.
template <typename T>
void forward(const ConvGeom& g, const T* x, const T* w, T* y, T alpha, T beta);
template <typename T>
void backward_data(const ConvGeom& g, const T* w, const T* dy, T* dx, T alpha, T beta);
template <typename T>
void backward_filter(const ConvGeom& g, const T* x, const T* dy, T* dw, T alpha, T beta);

}  // namespace dnn
}  // namespace cudaemu
}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_CUDAEMU_CUDNN_INTERNAL_H_
