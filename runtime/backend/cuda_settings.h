// Settings of the cuda kernels that users choose, as in the reference framework:
//
//   set_matmul_allow_tf32(true);   // as torch.backends.cuda.matmul.allow_tf32 = True
//   bool on = matmul_allow_tf32();
//   set_cudnn_allow_tf32(true);    // as torch.backends.cudnn.allow_tf32 = True
//
// TF32: float32 matrix products on cuda may run on tensor cores with 10-bit mantissas
// (inputs rounded to TF32, sums in float32): several times faster on Ampere and later, but
// results differ from float32 products in the 4th significant digit. Off by default, as in
// PyTorch since 1.12, so a float32 matmul is a float32 matmul; STREAMGRAD_ALLOW_TF32=1
// turns it on from the environment. float64 and cpu products are never affected. Applies
// to products launched after the call.
// The cuDNN switch does the same for cuda convolutions (kernels/nn_kernels.h). PyTorch
// turns that one on by default; streamgrad keeps it off, like the matmul switch, so that a
// float32 convolution on cuda agrees with the cpu's to float32 rounding. Each convolution
// plan records the setting it was made with.
//
// Thread-safety: any thread (an atomic). Failure: a malformed STREAMGRAD_ALLOW_TF32 throws
// ValueError naming the variable at first use.
#ifndef STREAMGRAD_RUNTIME_BACKEND_CUDA_SETTINGS_H_
#define STREAMGRAD_RUNTIME_BACKEND_CUDA_SETTINGS_H_

namespace streamgrad {

void set_matmul_allow_tf32(bool allow);
bool matmul_allow_tf32();
void set_cudnn_allow_tf32(bool allow);
bool cudnn_allow_tf32();

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_BACKEND_CUDA_SETTINGS_H_
