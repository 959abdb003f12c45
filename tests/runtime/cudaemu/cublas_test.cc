// cuBLAS of the interpreted CUDA device (//runtime/cudaemu:cublas): validation as cuBLAS
// documents it, strided-batched gemm against a naive loop, and stream order.
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/base/half.h"
#include "tests/runtime/cudaemu/cudart_test_util.h"

namespace streamgrad {
namespace cudaemu_test {
namespace {

#define BLAS_OK(expr) REQUIRE((expr) == CUBLAS_STATUS_SUCCESS)

// Device memory holding `values` (copied synchronously).
template <typename T>
T* device_copy(const std::vector<T>& values) {
  T* p = nullptr;
  CUDA_OK(cudaMalloc(&p, values.size() * sizeof(T)));
  CUDA_OK(cudaMemcpy(p, values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

template <typename T>
std::vector<T> host_copy(const T* p, size_t n) {
  std::vector<T> out(n);
  CUDA_OK(cudaMemcpy(out.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
  return out;
}

template <typename T>
std::vector<T> ramp(size_t n, double scale, double offset) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>(std::sin(scale * i + offset));
  return v;
}

// The column-major definition: C_b = alpha op(A_b) op(B_b) + beta C_b (beta == 0: C unread).
template <typename T>
void naive(bool ta, bool tb, int m, int n, int k, T alpha, const std::vector<T>& a, int lda,
           long long sa, const std::vector<T>& b, int ldb, long long sb, T beta,
           std::vector<T>& c, int ldc, long long sc, int batch) {
  for (int i = 0; i < batch; ++i) {
    for (int col = 0; col < n; ++col) {
      for (int row = 0; row < m; ++row) {
        double acc = 0;
        for (int l = 0; l < k; ++l) {
          const double av = ta ? a[i * sa + row * lda + l] : a[i * sa + l * lda + row];
          const double bv = tb ? b[i * sb + l * ldb + col] : b[i * sb + col * ldb + l];
          acc += av * bv;
        }
        T& out = c[i * sc + col * ldc + row];
        out = static_cast<T>(alpha * acc + (beta == T(0) ? 0.0 : beta * double(out)));
      }
    }
  }
}

struct HandleScope {
  HandleScope() { BLAS_OK(cublasCreate(&h)); }
  ~HandleScope() { cublasDestroy(h); }
  cublasHandle_t h = nullptr;
};

TEST_CASE("cublas: status names and strings", "[cublas]") {
  CHECK(std::string(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE)) ==
        "CUBLAS_STATUS_INVALID_VALUE");
  CHECK(std::string(cublasGetStatusName(CUBLAS_STATUS_SUCCESS)) == "CUBLAS_STATUS_SUCCESS");
  CHECK(std::string(cublasGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED)).find("handle") !=
        std::string::npos);
  CHECK(std::string(cublasGetStatusName(static_cast<cublasStatus_t>(99))) ==
        "CUBLAS_STATUS_UNKNOWN");
  CHECK(CUBLAS_STATUS_INVALID_VALUE == 7);
  CHECK(CUBLAS_STATUS_EXECUTION_FAILED == 13);
  CHECK(CUBLAS_TF32_TENSOR_OP_MATH == 3);
}

TEST_CASE("cublas: handles, streams, workspace and math mode", "[cublas]") {
  Fresh fresh;
  CHECK(cublasCreate(nullptr) == CUBLAS_STATUS_INVALID_VALUE);
  cublasHandle_t h = nullptr;
  BLAS_OK(cublasCreate(&h));
  cudaStream_t s = nullptr, got = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  BLAS_OK(cublasSetStream(h, s));
  BLAS_OK(cublasGetStream(h, &got));
  CHECK(got == s);

  void* ws = nullptr;
  CUDA_OK(cudaMalloc(&ws, 4096));
  BLAS_OK(cublasSetWorkspace(h, ws, 4096));
  BLAS_OK(cublasSetWorkspace(h, nullptr, 0));  // back to the default pool
  CHECK(cublasSetWorkspace(h, static_cast<char*>(ws) + 16, 1024) ==
        CUBLAS_STATUS_INVALID_VALUE);                                   // not 256-aligned
  CHECK(cublasSetWorkspace(h, nullptr, 1024) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(cublasSetWorkspace(h, ws, 8192) == CUBLAS_STATUS_INVALID_VALUE);  // past the end
  alignas(256) static char host[512];
  CHECK(cublasSetWorkspace(h, host, 512) == CUBLAS_STATUS_INVALID_VALUE);  // not device

  BLAS_OK(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH));
  cublasMath_t mode = CUBLAS_DEFAULT_MATH;
  BLAS_OK(cublasGetMathMode(h, &mode));
  CHECK(mode == CUBLAS_TF32_TENSOR_OP_MATH);
  BLAS_OK(cublasSetMathMode(
      h, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                   CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  CHECK(cublasSetMathMode(h, static_cast<cublasMath_t>(7)) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(cublasSetMathMode(h, static_cast<cublasMath_t>(-1)) == CUBLAS_STATUS_INVALID_VALUE);

  BLAS_OK(cublasDestroy(h));
  // A destroyed or never-created handle is not initialised.
  CHECK(cublasDestroy(h) == CUBLAS_STATUS_NOT_INITIALIZED);
  CHECK(cublasSetStream(h, s) == CUBLAS_STATUS_NOT_INITIALIZED);
  CHECK(cublasSetWorkspace(nullptr, ws, 4096) == CUBLAS_STATUS_NOT_INITIALIZED);
  CHECK(cublasSetMathMode(nullptr, CUBLAS_DEFAULT_MATH) == CUBLAS_STATUS_NOT_INITIALIZED);
  CHECK(cublasGetStream(nullptr, &got) == CUBLAS_STATUS_NOT_INITIALIZED);
  CUDA_OK(cudaFree(ws));
  CUDA_OK(cudaStreamDestroy(s));
}

TEST_CASE("cublas: gemm arguments are validated before anything runs", "[cublas]") {
  Fresh fresh;
  HandleScope hs;
  const cublasHandle_t h = hs.h;
  std::vector<float> host(64, 1.0f);
  float* a = device_copy(host);
  float* b = device_copy(host);
  float* c = device_copy(host);
  const float one = 1, zero = 0;
  const auto N = CUBLAS_OP_N, T = CUBLAS_OP_T;
  auto gemm = [&](cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, int lda,
                  int ldb, int ldc, int batch) {
    return cublasSgemmStridedBatched(h, ta, tb, m, n, k, &one, a, lda, 0, b, ldb, 0, &zero, c,
                                     ldc, 0, batch);
  };
  // m = 3, n = 4, k = 5: A is 3 x 5 (lda >= 3), B 5 x 4 (ldb >= 5), C 3 x 4 (ldc >= 3).
  BLAS_OK(gemm(N, N, 3, 4, 5, 3, 5, 3, 1));
  CHECK(gemm(N, N, 3, 4, 5, 2, 5, 3, 1) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(gemm(N, N, 3, 4, 5, 3, 4, 3, 1) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(gemm(N, N, 3, 4, 5, 3, 5, 2, 1) == CUBLAS_STATUS_INVALID_VALUE);
  // Transposed: A stored 5 x 3 (lda >= 5), B stored 4 x 5 (ldb >= 4).
  BLAS_OK(gemm(T, T, 3, 4, 5, 5, 4, 3, 1));
  CHECK(gemm(T, N, 3, 4, 5, 3, 5, 3, 1) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(gemm(N, T, 3, 4, 5, 3, 3, 3, 1) == CUBLAS_STATUS_INVALID_VALUE);
  BLAS_OK(gemm(N, T, 3, 4, 5, 3, 4, 3, 1));
  // lda and ldb minima differ, so trading them is caught.
  CHECK(gemm(N, N, 3, 4, 5, 5, 3, 3, 1) == CUBLAS_STATUS_INVALID_VALUE);
  // Minimum 1 even for empty matrices.
  CHECK(gemm(N, N, 0, 4, 5, 0, 5, 1, 1) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(gemm(N, N, 0, 4, 5, 1, 5, 0, 1) == CUBLAS_STATUS_INVALID_VALUE);
  BLAS_OK(gemm(N, N, 0, 4, 5, 1, 5, 1, 1));
  CHECK(gemm(N, N, -1, 4, 5, 3, 5, 3, 1) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(gemm(N, N, 3, -1, 5, 3, 5, 3, 1) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(gemm(N, N, 3, 4, -1, 3, 5, 3, 1) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(gemm(N, N, 3, 4, 5, 3, 5, 3, -1) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(gemm(static_cast<cublasOperation_t>(9), N, 3, 4, 5, 5, 5, 3, 1) ==
        CUBLAS_STATUS_INVALID_VALUE);
  CHECK(gemm(N, CUBLAS_OP_CONJG, 3, 4, 5, 3, 5, 3, 1) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(cublasSgemmStridedBatched(h, N, N, 3, 4, 5, nullptr, a, 3, 0, b, 5, 0, &zero, c, 3, 0,
                                  1) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(cublasSgemmStridedBatched(h, N, N, 3, 4, 5, &one, nullptr, 3, 0, b, 5, 0, &zero, c, 3,
                                  0, 1) == CUBLAS_STATUS_INVALID_VALUE);
  CHECK(cublasSgemmStridedBatched(nullptr, N, N, 3, 4, 5, &one, a, 3, 0, b, 5, 0, &zero, c, 3,
                                  0, 1) == CUBLAS_STATUS_NOT_INITIALIZED);
  const double done = 1, dzero = 0;
  CHECK(cublasDgemmStridedBatched(nullptr, N, N, 1, 1, 1, &done, nullptr, 1, 0, nullptr, 1, 0,
                                  &dzero, nullptr, 1, 0, 1) == CUBLAS_STATUS_NOT_INITIALIZED);
  CHECK(cublasDgemmStridedBatched(h, N, N, 1, 1, 1, &done, nullptr, 0, 0, nullptr, 1, 0,
                                  &dzero, nullptr, 1, 0, 1) == CUBLAS_STATUS_INVALID_VALUE);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaFree(a));
  CUDA_OK(cudaFree(b));
  CUDA_OK(cudaFree(c));
}

template <typename T>
void check_gemm(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, int pad, T alpha,
                T beta, bool broadcast_a, int batch, bool nan_c) {
  auto lead = [pad](int rows) { return std::max(rows, 1) + pad; };
  const int lda = lead(ta ? k : m), ldb = lead(tb ? n : k), ldc = lead(m);
  const long long sa = broadcast_a ? 0 : static_cast<long long>(lda) * (ta ? m : k) + 3;
  const long long sb = static_cast<long long>(ldb) * (tb ? k : n) + 1;
  const long long sc = static_cast<long long>(ldc) * n + 2;
  std::vector<T> a = ramp<T>((broadcast_a ? 1 : batch) * (sa ? sa : lda * (ta ? m : k)), 0.37,
                             0.1);
  std::vector<T> b = ramp<T>(batch * sb, 0.53, 0.7);
  std::vector<T> c = ramp<T>(batch * sc, 0.29, 1.3);
  if (nan_c) c.assign(c.size(), std::numeric_limits<T>::quiet_NaN());
  T* da = device_copy(a);
  T* db = device_copy(b);
  T* dc = device_copy(c);
  cublasStatus_t st;
  const auto opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  if constexpr (std::is_same<T, float>::value) {
    st = cublasSgemmStridedBatched(h, opa, opb, m, n, k, &alpha, da, lda, sa, db, ldb, sb,
                                   &beta, dc, ldc, sc, batch);
  } else {
    st = cublasDgemmStridedBatched(h, opa, opb, m, n, k, &alpha, da, lda, sa, db, ldb, sb,
                                   &beta, dc, ldc, sc, batch);
  }
  REQUIRE(st == CUBLAS_STATUS_SUCCESS);
  std::vector<T> got = host_copy(dc, c.size());
  std::vector<T> want = c;
  naive<T>(ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, want, ldc, sc, batch);
  const double tol = std::is_same<T, float>::value ? 1e-4 : 1e-12;
  for (int i = 0; i < batch; ++i) {
    for (int col = 0; col < n; ++col) {
      for (int row = 0; row < m; ++row) {
        const size_t at = i * sc + col * ldc + row;
        INFO("batch " << i << " row " << row << " col " << col);
        REQUIRE(std::isfinite(static_cast<double>(got[at])));
        REQUIRE(std::abs(double(got[at]) - double(want[at])) <= tol * (1 + std::abs(want[at])));
      }
    }
  }
  // Outside the matrices (padding rows, gaps between batch members) nothing is written.
  for (size_t at = 0; at < c.size(); ++at) {
    const long long in_batch = static_cast<long long>(at % sc);
    if (at / sc < static_cast<size_t>(batch) && in_batch < static_cast<long long>(ldc) * n &&
        in_batch % ldc < m) {
      continue;
    }
    if (!nan_c) REQUIRE(got[at] == c[at]);
  }
  CUDA_OK(cudaFree(da));
  CUDA_OK(cudaFree(db));
  CUDA_OK(cudaFree(dc));
}

TEST_CASE("cublas: strided-batched gemm matches the definition", "[cublas]") {
  Fresh fresh;
  HandleScope hs;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      INFO("ta " << ta << " tb " << tb);
      check_gemm<float>(hs.h, ta, tb, 5, 7, 3, 0, 1.0f, 0.0f, false, 1, false);
      check_gemm<float>(hs.h, ta, tb, 13, 9, 11, 2, 0.5f, 2.0f, false, 3, false);
      check_gemm<double>(hs.h, ta, tb, 7, 5, 9, 1, -1.5, 0.25, false, 2, false);
      check_gemm<double>(hs.h, ta, tb, 4, 6, 5, 3, 2.0, 1.0, true, 4, false);  // A broadcast
    }
  }
  // beta == 0 never reads C: NaN there does not come out.
  check_gemm<float>(hs.h, false, true, 6, 4, 5, 1, 1.0f, 0.0f, false, 2, true);
  check_gemm<double>(hs.h, true, false, 3, 8, 2, 0, 0.75, 0.0, true, 3, true);
  // k == 0: C = beta C.
  check_gemm<double>(hs.h, false, false, 3, 4, 0, 0, 1.0, 0.5, false, 2, false);
}

// cublasGemmStridedBatchedEx with 16-bit A and B of type H (`at`), C of H or float: the
// definition on the widened values, in double, rounded once into a 16-bit C.
template <typename H, typename C>
void check_gemm_ex(cublasHandle_t h, cudaDataType at, cudaDataType ct, bool ta, bool tb, int m,
                   int n, int k, int pad, float alpha, float beta, int batch) {
  const int lda = (ta ? k : m) + pad, ldb = (tb ? n : k) + pad, ldc = m + pad;
  const long long sa = static_cast<long long>(lda) * (ta ? m : k) + 3;
  const long long sb = static_cast<long long>(ldb) * (tb ? k : n) + 1;
  const long long sc = static_cast<long long>(ldc) * n + 2;
  const std::vector<float> af = ramp<float>(batch * sa, 0.37, 0.1);
  const std::vector<float> bf = ramp<float>(batch * sb, 0.53, 0.7);
  const std::vector<float> cf = ramp<float>(batch * sc, 0.29, 1.3);
  auto to_h = [](const std::vector<float>& v) {
    std::vector<H> out;
    for (float x : v) out.push_back(H::from_float(x));
    return out;
  };
  auto to_f = [](const std::vector<H>& v) {
    std::vector<double> out;
    for (H x : v) out.push_back(x.to_float());
    return out;
  };
  const std::vector<H> a = to_h(af), b = to_h(bf);
  std::vector<C> c;
  for (float x : cf) {
    if constexpr (std::is_same<C, float>::value) {
      c.push_back(x);
    } else {
      c.push_back(C::from_float(x));
    }
  }
  std::vector<double> want(c.size());
  for (size_t i = 0; i < c.size(); ++i) {
    if constexpr (std::is_same<C, float>::value) {
      want[i] = c[i];
    } else {
      want[i] = c[i].to_float();
    }
  }
  naive<double>(ta, tb, m, n, k, alpha, to_f(a), lda, sa, to_f(b), ldb, sb, beta, want, ldc, sc,
                batch);
  H* da = device_copy(a);
  H* db = device_copy(b);
  C* dc = device_copy(c);
  BLAS_OK(cublasGemmStridedBatchedEx(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                     tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, da, at,
                                     lda, sa, db, at, ldb, sb, &beta, dc, ct, ldc, sc, batch,
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  const std::vector<C> got = host_copy(dc, c.size());
  // A 16-bit C is one rounding of float sums: within one unit in its last place.
  const double tol = std::is_same<C, float>::value ? 1e-5
                     : std::is_same<C, Half>::value ? 1.0 / 1024 : 1.0 / 128;
  for (size_t e = 0; e < c.size(); ++e) {
    const long long in_batch = static_cast<long long>(e % sc);
    const bool inside = e / sc < static_cast<size_t>(batch) &&
                        in_batch < static_cast<long long>(ldc) * n && in_batch % ldc < m;
    double g;
    if constexpr (std::is_same<C, float>::value) {
      g = got[e];
    } else {
      g = got[e].to_float();
    }
    INFO("element " << e << (inside ? " inside" : " outside") << " the matrices");
    if (inside) {
      REQUIRE(std::abs(g - want[e]) <= tol * (1 + std::abs(want[e])));
    } else {
      REQUIRE(std::memcmp(&got[e], &c[e], sizeof(C)) == 0);  // never written
    }
  }
  CUDA_OK(cudaFree(da));
  CUDA_OK(cudaFree(db));
  CUDA_OK(cudaFree(dc));
}

TEST_CASE("cublas: 16-bit gemm (Ex) sums in float into a 16-bit or float C", "[cublas]") {
  Fresh fresh;
  HandleScope hs;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      INFO("ta " << ta << " tb " << tb);
      check_gemm_ex<Half, Half>(hs.h, CUDA_R_16F, CUDA_R_16F, ta, tb, 5, 7, 33, 1, 1.0f, 0.0f, 2);
      check_gemm_ex<Half, float>(hs.h, CUDA_R_16F, CUDA_R_32F, ta, tb, 4, 3, 9, 0, 0.5f, 2.0f, 3);
      check_gemm_ex<BFloat16, BFloat16>(hs.h, CUDA_R_16BF, CUDA_R_16BF, ta, tb, 6, 2, 17, 2, 1.0f,
                                        1.0f, 2);
      check_gemm_ex<BFloat16, float>(hs.h, CUDA_R_16BF, CUDA_R_32F, ta, tb, 3, 5, 8, 1, 1.0f, 0.0f,
                                     1);
    }
  }
  // 1 + eps/2 + eps/2 comes out 1 + eps: the sum is kept in float, not in the 16-bit type.
  const std::vector<Half> x = {Half::from_float(1.0f), Half::from_float(1.0f / 2048),
                               Half::from_float(1.0f / 2048)};
  const std::vector<Half> ones(3, Half::from_float(1.0f));
  Half* dx = device_copy(x);
  Half* d1 = device_copy(ones);
  Half* dy = device_copy(std::vector<Half>(1, Half{}));
  const float one = 1, zero = 0;
  BLAS_OK(cublasGemmStridedBatchedEx(hs.h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 3, &one, dx,
                                     CUDA_R_16F, 1, 0, d1, CUDA_R_16F, 3, 0, &zero, dy, CUDA_R_16F,
                                     1, 0, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  CHECK(host_copy(dy, 1)[0].to_float() == 1.0f + 1.0f / 1024);
  // What it does not take, it refuses before running anything.
  auto ex = [&](cudaDataType a, cudaDataType b, cudaDataType c, cublasComputeType_t compute,
                int lda) {
    return cublasGemmStridedBatchedEx(hs.h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 3, &one, dx, a, lda,
                                      0, d1, b, 3, 0, &zero, dy, c, 1, 0, 1, compute,
                                      CUBLAS_GEMM_DEFAULT);
  };
  CHECK(ex(CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, 1) ==
        CUBLAS_STATUS_NOT_SUPPORTED);
  CHECK(ex(CUDA_R_16F, CUDA_R_16BF, CUDA_R_16F, CUBLAS_COMPUTE_32F, 1) ==
        CUBLAS_STATUS_NOT_SUPPORTED);
  CHECK(ex(CUDA_R_16F, CUDA_R_16F, CUDA_R_64F, CUBLAS_COMPUTE_32F, 1) ==
        CUBLAS_STATUS_NOT_SUPPORTED);
  CHECK(ex(CUDA_R_16F, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_16F, 1) ==
        CUBLAS_STATUS_NOT_SUPPORTED);
  CHECK(ex(CUDA_R_16F, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, 0) ==
        CUBLAS_STATUS_INVALID_VALUE);
  CHECK(cublasGemmStridedBatchedEx(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 3, &one, dx,
                                   CUDA_R_16F, 1, 0, d1, CUDA_R_16F, 3, 0, &zero, dy, CUDA_R_16F,
                                   1, 0, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) ==
        CUBLAS_STATUS_NOT_INITIALIZED);
  CHECK(host_copy(dy, 1)[0].to_float() == 1.0f + 1.0f / 1024);
  CUDA_OK(cudaFree(dx));
  CUDA_OK(cudaFree(d1));
  CUDA_OK(cudaFree(dy));
}

TEST_CASE("cublas: gemm on a stream follows a copy enqueued before it", "[cublas]") {
  Fresh fresh;
  HandleScope hs;
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  BLAS_OK(cublasSetStream(hs.h, s));
  const std::vector<float> a = ramp<float>(6, 0.4, 0.2), b = ramp<float>(6, 0.9, 0.5);
  float *da = nullptr, *db = nullptr, *dc = nullptr;
  CUDA_OK(cudaMalloc(&da, 6 * sizeof(float)));
  CUDA_OK(cudaMalloc(&db, 6 * sizeof(float)));
  CUDA_OK(cudaMalloc(&dc, 4 * sizeof(float)));
  CUDA_OK(cudaMemcpyAsync(da, a.data(), 6 * sizeof(float), cudaMemcpyHostToDevice, s));
  CUDA_OK(cudaMemcpyAsync(db, b.data(), 6 * sizeof(float), cudaMemcpyHostToDevice, s));
  const float one = 1, zero = 0;
  BLAS_OK(cublasSgemmStridedBatched(hs.h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, da, 2, 0,
                                    db, 3, 0, &zero, dc, 2, 0, 1));
  std::vector<float> got(4);
  CUDA_OK(cudaMemcpyAsync(got.data(), dc, 4 * sizeof(float), cudaMemcpyDeviceToHost, s));
  CUDA_OK(cudaStreamSynchronize(s));
  std::vector<float> want(4, 0.0f);
  naive<float>(false, false, 2, 2, 3, 1.0f, a, 2, 0, b, 3, 0, 0.0f, want, 2, 0, 1);
  for (int i = 0; i < 4; ++i) CHECK(got[i] == Approx(want[i]));
  CUDA_OK(cudaFree(da));
  CUDA_OK(cudaFree(db));
  CUDA_OK(cudaFree(dc));
  CUDA_OK(cudaStreamDestroy(s));
}

// A copy on one stream and the gemm on the handle's stream: without cudaStreamWaitEvent the
// adversarial scheduler runs the gemm first and it reads the old (zero) operand.
float gemm_after_copy_on_other_stream(bool wait) {
  Fresh fresh;  // adversarial: newest work first
  HandleScope hs;
  cudaStream_t copy = nullptr, compute = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  BLAS_OK(cublasSetStream(hs.h, compute));
  float* da = device_copy(std::vector<float>{0.0f});
  float* db = device_copy(std::vector<float>{3.0f});
  float* dc = device_copy(std::vector<float>{0.0f});
  const float two = 2.0f, one = 1, zero = 0;
  CUDA_OK(cudaMemcpyAsync(da, &two, sizeof(float), cudaMemcpyHostToDevice, copy));
  cudaEvent_t copied = nullptr;
  CUDA_OK(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
  CUDA_OK(cudaEventRecord(copied, copy));
  if (wait) CUDA_OK(cudaStreamWaitEvent(compute, copied, 0));
  BLAS_OK(cublasSgemmStridedBatched(hs.h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, da, 1, 0,
                                    db, 1, 0, &zero, dc, 1, 0, 1));
  CUDA_OK(cudaStreamSynchronize(compute));
  CUDA_OK(cudaStreamSynchronize(copy));
  const float got = host_copy(dc, 1)[0];
  CUDA_OK(cudaEventDestroy(copied));
  CUDA_OK(cudaFree(da));
  CUDA_OK(cudaFree(db));
  CUDA_OK(cudaFree(dc));
  CUDA_OK(cudaStreamDestroy(copy));
  CUDA_OK(cudaStreamDestroy(compute));
  return got;
}

TEST_CASE("cublas: a copy on another stream needs the wait", "[cublas]") {
  CHECK(gemm_after_copy_on_other_stream(true) == 6.0f);
  CHECK(gemm_after_copy_on_other_stream(false) == 0.0f);  // the race, made certain
}

TEST_CASE("cublas: a handle without a stream uses the legacy default stream", "[cublas]") {
  Fresh fresh;
  HandleScope hs;
  float* da = device_copy(std::vector<float>{0.0f});
  float* dc = device_copy(std::vector<float>{0.0f});
  const float four = 4.0f, one = 1, zero = 0;
  CUDA_OK(cudaMemcpyAsync(da, &four, sizeof(float), cudaMemcpyHostToDevice, 0));
  BLAS_OK(cublasSgemmStridedBatched(hs.h, CUBLAS_OP_N, CUBLAS_OP_T, 1, 1, 1, &one, da, 1, 0,
                                    da, 1, 0, &zero, dc, 1, 0, 1));
  CHECK(host_copy(dc, 1)[0] == 16.0f);  // cudaMemcpy on stream 0 waits for the gemm
  // A destroyed stream refuses the work.
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreate(&s));
  BLAS_OK(cublasSetStream(hs.h, s));
  CUDA_OK(cudaStreamDestroy(s));
  CHECK(cublasSgemmStridedBatched(hs.h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, da, 1, 0, da,
                                  1, 0, &zero, dc, 1, 0, 1) == CUBLAS_STATUS_EXECUTION_FAILED);
  (void)cudaGetLastError();
  CUDA_OK(cudaFree(da));
  CUDA_OK(cudaFree(dc));
}

}  // namespace
}  // namespace cudaemu_test
}  // namespace streamgrad
