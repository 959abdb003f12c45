// matmul on the host: OpenBLAS gemm on streamgrad's threads (gemm.h; OpenBLAS itself on
// one), each operand as kernels/dispatch/matmul_plan.h decided: as it is, transposed, or
// packed into contiguous scratch inside the task.
#include <algorithm>
#include <vector>

#include "kernels/host/gemm.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/parallel.h"

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace {

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
void run_item(const MatmulPlan& p, void* out_base, int64_t i, Scratch<T>* s) {
  const Mat &a = p.a, &b = p.b, &c = p.c;
  const Bias bias = p.bias;
  const T* bv = static_cast<const T*>(bias.data);
  if (c.packed && s->c.empty()) s->c.resize(static_cast<size_t>(c.rows * c.cols));
  T* out = static_cast<T*>(out_base) + i * c.batch_stride;
  T* dst = c.packed ? s->c.data() : out;  // row-major with leading dimension c.ld
  // gemm adds to the bias (beta = 1); an empty sum (k == 0, which BLAS is not asked
  // about) leaves the bias, or zero without one.
  // Row by row with the choice outside the loops, so that each is a plain fill or copy
  // (linear's bias: 2 % of a GPT step as one loop with the choice inside).
  if (bv != nullptr || a.cols == 0) {
    for (int64_t r = 0; r < c.rows; ++r) {
      T* row = dst + r * c.ld;
      if (bv == nullptr || bias.by_row) {
        std::fill(row, row + c.cols, bv == nullptr ? T(0) : bv[r * bias.stride]);
      } else if (bias.stride == 1) {
        std::copy(bv, bv + c.cols, row);
      } else {
        for (int64_t j = 0; j < c.cols; ++j) row[j] = bv[j * bias.stride];
      }
    }
  }
  if (a.cols != 0) {
    gemm<T>(a.trans, b.trans, static_cast<int>(c.rows), static_cast<int>(c.cols),
                 static_cast<int>(a.cols), operand(a, i, &s->a), a.ld, operand(b, i, &s->b),
                 b.ld, bv == nullptr ? T(0) : T(1), dst, c.ld);
  }
  if (c.packed) unpack(c, s->c.data(), out);
}

// The items of a batch are shared out among the threads (each item one single-threaded
// gemm: cpu::gemm does not cut a product inside a parallel chunk); a single product is
// cut into blocks by cpu::gemm itself.
template <typename T>
void run(const MatmulPlan& p, void* out_base) {
  const int64_t per_item = std::max<int64_t>(1, p.c.rows * p.c.cols * p.a.cols);
  const int64_t grain = per_item >= kGemmGrain ? 1 : kGemmGrain / per_item;
  parallel_for(0, p.batch, grain, [&](int64_t begin, int64_t end) {
    Scratch<T> s;
    for (int64_t i = begin; i < end; ++i) run_item<T>(p, out_base, i, &s);
  });
}

}  // namespace

void matmul(const Stream& stream, const LaunchSpec& spec, const MatmulPlan& plan, void* o,
            DType dt) {
  dispatch::enqueue(
      stream, spec,
      [o, dt](const MatmulPlan& p) {
        if (dt == DType::kFloat32) {
          run<float>(p, o);
        } else {
          run<double>(p, o);
        }
      },
      plan);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad
