// matmul through OpenBLAS gemm on cpu and sim streams (kernels/host/gemm.h: on streamgrad's
// threads, OpenBLAS itself on one), through cuBLAS on cuda streams (kernels/cuda/matmul.cu);
// kernels/dispatch/matmul_plan.h decides how each operand reaches the gemm (as it is,
// transposed, or packed into contiguous scratch inside the task).
#include <algorithm>
#include <climits>
#include <vector>

#include "kernels/checks.h"
#include "kernels/host/gemm.h"
#include "kernels/widen.h"
#include "kernels/launch_kernel.h"
#include "kernels/dispatch/matmul_plan.h"
#include "kernels/host/parallel.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/kernels.h"
#include "runtime/error.h"

namespace streamgrad {
namespace kernels {
namespace {

using cpu::Bias;
using cpu::Mat;

template <typename T>
void pack(const Mat& m, const T* src, T* dst) {
  for (int64_t i = 0; i < m.rows; ++i) {
    for (int64_t j = 0; j < m.cols; ++j) {
      dst[i * m.cols + j] = src[i * m.row_stride + j * m.col_stride];
    }
  }
}

template <typename T>
void unpack(const Mat& m, const T* src, T* dst) {
  for (int64_t i = 0; i < m.rows; ++i) {
    for (int64_t j = 0; j < m.cols; ++j) {
      dst[i * m.row_stride + j * m.col_stride] = src[i * m.cols + j];
    }
  }
}

// Operand `m` of batch member `b`, packed into `scratch` when BLAS cannot read it. A
// broadcast operand (batch stride 0) is packed once.
template <typename T>
const T* operand(const Mat& m, int64_t b, std::vector<T>* scratch) {
  const T* p = static_cast<const T*>(m.base) + b * m.batch_stride;
  if (!m.packed) return p;
  if (scratch->empty() || m.batch_stride != 0) {
    scratch->resize(static_cast<size_t>(m.rows * m.cols));
    pack(m, p, scratch->data());
  }
  return scratch->data();
}

// Scratch for operands BLAS cannot read as they are: one per thread's share of a batch.
template <typename T>
struct Scratch {
  std::vector<T> a, b, c;
};

template <typename T>
void run_item(const cpu::MatmulPlan& p, void* out_base, int64_t i, Scratch<T>* s) {
  const Mat &a = p.a, &b = p.b, &c = p.c;
  const Bias bias = p.bias;
  const T* bv = static_cast<const T*>(bias.data);
  if (c.packed && s->c.empty()) s->c.resize(static_cast<size_t>(c.rows * c.cols));
  T* out = static_cast<T*>(out_base) + i * c.batch_stride;
  T* dst = c.packed ? s->c.data() : out;  // row-major with leading dimension c.ld
  // gemm adds to the bias (beta = 1); an empty sum (k == 0, which BLAS is not asked
  // about) leaves the bias, or zero without one.
  if (bv != nullptr || a.cols == 0) {
    for (int64_t r = 0; r < c.rows; ++r) {
      for (int64_t j = 0; j < c.cols; ++j) {
        dst[r * c.ld + j] = bv == nullptr ? T(0) : bv[(bias.by_row ? r : j) * bias.stride];
      }
    }
  }
  if (a.cols != 0) {
    cpu::gemm<T>(a.trans, b.trans, static_cast<int>(c.rows), static_cast<int>(c.cols),
                 static_cast<int>(a.cols), operand(a, i, &s->a), a.ld, operand(b, i, &s->b),
                 b.ld, bv == nullptr ? T(0) : T(1), dst, c.ld);
  }
  if (c.packed) unpack(c, s->c.data(), out);
}

// The items of a batch are shared out among the threads (each item one single-threaded
// gemm: cpu::gemm does not cut a product inside a parallel chunk); a single product is
// cut into blocks by cpu::gemm itself.
template <typename T>
void run(const cpu::MatmulPlan& p, void* out_base) {
  const int64_t per_item = std::max<int64_t>(1, p.c.rows * p.c.cols * p.a.cols);
  const int64_t grain = per_item >= cpu::kGemmGrain ? 1 : cpu::kGemmGrain / per_item;
  cpu::parallel_for(0, p.batch, grain, [&](int64_t begin, int64_t end) {
    Scratch<T> s;
    for (int64_t i = begin; i < end; ++i) run_item<T>(p, out_base, i, &s);
  });
}

}  // namespace

void matmul(const Stream& stream, const View& out, const View& a, const View& b,
            const View* bias) {
  // 16-bit a and b; out (and bias) of their dtype, or float32 (a product kept in float32
  // for a sum that follows).
  if (cpu::Widen::applies_mixed({&a, &b}, {&out, bias})) {
    // A large batch is multiplied in chunks of items, each widened on its own.
    if (out.dim() == 3 && a.dim() == 3 && b.dim() == 3 && a.sizes[0] == out.sizes[0] &&
        b.sizes[0] == out.sizes[0]) {
      const int64_t items = out.sizes[0];
      const int64_t chunk = cpu::batch_chunk(out.numel() / std::max<int64_t>(items, 1) +
                                             (a.numel() + b.numel()) / std::max<int64_t>(items, 1));
      if (chunk < items) {
        for (int64_t i = 0; i < items; i += chunk) {
          const int64_t n = std::min(chunk, items - i);
          matmul(stream, cpu::batch_slice(out, i, n), cpu::batch_slice(a, i, n),
                 cpu::batch_slice(b, i, n), bias);
        }
        return;
      }
    }
    cpu::Widen w(stream, bias != nullptr ? "linear" : "matmul");
    matmul(stream, w.out(out), w.in(a), w.in(b), w.in(bias));
    return w.finish();
  }
  const char* name = bias == nullptr ? "matmul" : "linear";
  cpu::check_floating_out_a_b(name, stream, out, a, b, /*has_cuda=*/true);
  const int64_t r = out.dim();
  SG_CHECK((r == 2 || r == 3) && a.dim() == r && b.dim() == r, ValueError, name,
           ": expected out, a and b all 2-D or all 3-D, got out ", cpu::describe(out),
           ", a ", cpu::describe(a), ", b ", cpu::describe(b));
  const int64_t m = a.sizes[r - 2], k = a.sizes[r - 1], n = b.sizes[r - 1];
  const bool batch_ok = r == 2 || (a.sizes[0] == out.sizes[0] && b.sizes[0] == out.sizes[0]);
  SG_CHECK(batch_ok && b.sizes[r - 2] == k && out.sizes[r - 2] == m && out.sizes[r - 1] == n,
           ValueError, name, ": cannot multiply a ", cpu::describe(a), " by b ",
           cpu::describe(b), " into out ", cpu::describe(out),
           "; expected [B,] M x K times [B,] K x N into [B,] M x N");
  SG_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX, ValueError, name,
           ": dims of a ", cpu::describe(a), " and b ", cpu::describe(b),
           " exceed BLAS's 32-bit sizes");
  cpu::check_disjoint(name, "out", out, "a", a);
  cpu::check_disjoint(name, "out", out, "b", b);
  Bias bs;
  if (bias != nullptr) {
    SG_CHECK(r == 2 && bias->dim() == 1 && bias->sizes[0] == n && bias->dtype == out.dtype,
             ValueError, name, ": bias ", cpu::describe(*bias), " must be 1-D of ", n,
             " elements of out's dtype, with a 2-D out ", cpu::describe(out));
    cpu::check_disjoint(name, "out", out, "bias", *bias);
    bs.data = bias->data;
    bs.stride = bias->strides[0];
  }
  if (out.numel() == 0) return;

  const cpu::MatmulPlan p = cpu::plan_matmul(out, a, b, bs);
  const DType dt = out.dtype;
  void* o = out.data;
  cpu::launch_kernel_or_cuda(
      stream, name, {&a, &b, bias}, {&out},
      [p, o, dt] {
        if (dt == DType::kFloat32) {
          run<float>(p, o);
        } else {
          run<double>(p, o);
        }
      },
      [stream, p, o, dt] { cuda::matmul(stream, p, o, dt); });
}

}  // namespace kernels
}  // namespace streamgrad
