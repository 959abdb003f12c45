// cuBLAS, loaded on first use: the functions of cublas_v2.h that streamgrad calls, each
// forwarding to libcublas, which is dlopen()ed the first time any of them runs.
//
// Why: libcublas needs libcublasLt (half a gigabyte), and loading the pair costs every
// process about 0.6 s and 210 MB of memory before main(), whether or not it ever touches
// a GPU. Every tool, test and user program linked with the full library paid that at
// start-up; now only a process that multiplies matrices on a GPU does, once.
//
// Thread-safety: the library is opened once (a function-local static); each function's
// pointer likewise. Safe from any thread.
// Failure: when libcublas cannot be opened or lacks a function, every call returns
// CUBLAS_STATUS_NOT_INITIALIZED and cublasGetStatusString says what was tried and why it
// failed, which the callers' error messages carry (kernels/cuda/matmul.cu).
#include <cublas_v2.h>
#include <dlfcn.h>

#include <string>

#include "streamgrad_cuda_paths.h"

namespace {

struct Library {
  void* handle = nullptr;
  std::string error;  // why it could not be opened
};

const Library& library() {
  static const Library lib = [] {
    Library l;
    const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    // The toolkit this build was configured with first, then the loader's search path.
    for (const std::string& path : {std::string(STREAMGRAD_CUDA_LIBDIR) + "/" + soname, soname}) {
      l.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (l.handle != nullptr) return l;
      const char* why = dlerror();
      l.error += (l.error.empty() ? "" : "; ") + std::string(why != nullptr ? why : path);
    }
    l.error = "cuBLAS could not be loaded (" + l.error + ")";
    return l;
  }();
  return lib;
}

template <typename Fn>
Fn resolve(const char* name) {
  const Library& lib = library();
  if (lib.handle == nullptr) return nullptr;
  return reinterpret_cast<Fn>(dlsym(lib.handle, name));
}

}  // namespace

// Each resolves its real function once; a missing library or symbol is a status. Defined
// as extern "C" so that a signature differing from cublas_v2.h's is a compile error, not
// an overload.
extern "C" {

#define SG_CUBLAS_FORWARD(name, params, args)                                   \
  cublasStatus_t CUBLASWINAPI name params {                                    \
    static const auto real = resolve<decltype(&name)>(#name);                  \
    return real != nullptr ? real args : CUBLAS_STATUS_NOT_INITIALIZED;        \
  }

SG_CUBLAS_FORWARD(cublasCreate_v2, (cublasHandle_t* handle), (handle))
SG_CUBLAS_FORWARD(cublasDestroy_v2, (cublasHandle_t handle), (handle))
SG_CUBLAS_FORWARD(cublasSetStream_v2, (cublasHandle_t handle, cudaStream_t stream),
                  (handle, stream))
SG_CUBLAS_FORWARD(cublasSetWorkspace_v2,
                  (cublasHandle_t handle, void* workspace, size_t bytes),
                  (handle, workspace, bytes))
SG_CUBLAS_FORWARD(cublasSetMathMode, (cublasHandle_t handle, cublasMath_t mode),
                  (handle, mode))
SG_CUBLAS_FORWARD(cublasSgemm_v2,
                  (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                   int k, const float* alpha, const float* a, int lda, const float* b, int ldb,
                   const float* beta, float* c, int ldc),
                  (h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
SG_CUBLAS_FORWARD(cublasSgemmStridedBatched,
                  (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                   int k, const float* alpha, const float* a, int lda, long long int sa,
                   const float* b, int ldb, long long int sb, const float* beta, float* c,
                   int ldc, long long int sc, int batches),
                  (h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc,
                   batches))
SG_CUBLAS_FORWARD(cublasDgemmStridedBatched,
                  (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                   int k, const double* alpha, const double* a, int lda, long long int sa,
                   const double* b, int ldb, long long int sb, const double* beta, double* c,
                   int ldc, long long int sc, int batches),
                  (h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc,
                   batches))

#undef SG_CUBLAS_FORWARD

// Spelt out: cublas_api.h overloads it in C++ (a legacy cudaDataType compute type), so
// decltype(&cublasGemmStridedBatchedEx) names no one function.
cublasStatus_t CUBLASWINAPI cublasGemmStridedBatchedEx(
    cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const void* alpha, const void* a, cudaDataType at, int lda, long long int sa, const void* b,
    cudaDataType bt, int ldb, long long int sb, const void* beta, void* c, cudaDataType ct,
    int ldc, long long int sc, int batches, cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  using Fn = cublasStatus_t(CUBLASWINAPI*)(
      cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
      const void*, cudaDataType, int, long long int, const void*, cudaDataType, int,
      long long int, const void*, void*, cudaDataType, int, long long int, int,
      cublasComputeType_t, cublasGemmAlgo_t);
  static const auto real = resolve<Fn>("cublasGemmStridedBatchedEx");
  return real != nullptr ? real(h, ta, tb, m, n, k, alpha, a, at, lda, sa, b, bt, ldb, sb, beta,
                                c, ct, ldc, sc, batches, compute, algo)
                         : CUBLAS_STATUS_NOT_INITIALIZED;
}

const char* CUBLASWINAPI cublasGetStatusName(cublasStatus_t status) {
  static const auto real = resolve<decltype(&cublasGetStatusName)>("cublasGetStatusName");
  return real != nullptr ? real(status) : "CUBLAS_STATUS_NOT_INITIALIZED";
}

const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
  static const auto real = resolve<decltype(&cublasGetStatusString)>("cublasGetStatusString");
  return real != nullptr ? real(status) : library().error.c_str();
}

}  // extern "C"
