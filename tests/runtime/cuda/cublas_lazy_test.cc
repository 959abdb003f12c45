// cuBLAS opened on first use (third_party/cuda/cublas_lazy.cc): a process that links it
// does not load libcublas until a cuBLAS function runs; then the call reaches the real
// library, and without a GPU cublasCreate returns an error status instead of crashing.
// No GPU needed; SKIPPED where @local_cuda has no real toolkit (none, or the interpreted
// device, whose cuBLAS is the project's own).
#include <cublas_v2.h>
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <string>

namespace {

bool cublas_loaded() {
  const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  void* h = dlopen(soname.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return false;
  dlclose(h);
  return true;
}

TEST_CASE("libcublas is loaded by the first cuBLAS call, not at start-up", "[cuda][cublas]") {
  // Catch2 runs this case first and alone in its process (the only case of the binary).
  CHECK_FALSE(cublas_loaded());
  CHECK(std::string(cublasGetStatusName(CUBLAS_STATUS_SUCCESS)) == "CUBLAS_STATUS_SUCCESS");
  CHECK(std::string(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE)) ==
        "CUBLAS_STATUS_INVALID_VALUE");
  CHECK(cublas_loaded());
  cublasHandle_t handle = nullptr;
  const cublasStatus_t created = cublasCreate(&handle);
  INFO("cublasCreate: " << cublasGetStatusName(created) << " ("
                        << cublasGetStatusString(created) << ")");
  if (created == CUBLAS_STATUS_SUCCESS) {  // a GPU is present
    CHECK(cublasDestroy(handle) == CUBLAS_STATUS_SUCCESS);
  } else {
    CHECK(created == CUBLAS_STATUS_NOT_INITIALIZED);
  }
}

}  // namespace
