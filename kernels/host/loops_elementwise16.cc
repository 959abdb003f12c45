// The element-wise loops of one instruction-set level for float16 and bfloat16 (unary_16,
// unary_scalar_16, binary_16, axpy_16, which loops_elementwise.cc's entry points call for
// those dtypes): compiled once per level with -DSG_CPU_LEVEL=<namespace> (loops.h).
#include "kernels/functors/convert.h"
#include "kernels/host/elementwise_rows.h"
#include "runtime/base/half.h"

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace SG_CPU_LEVEL {
namespace {

// Computed in float, as the widening rule says (kernels.h): a row goes in blocks of
// kMathBlock values, each block's inputs widened into float buffers (exactly), the float
// row loop run over those and its results rounded into out, so the bits are those of
// widening the whole call, without its copies: the rule's copies in and out took 9.5 ms
// of a bfloat16 ResNet step's 35.6 on one thread (bench/RESULTS.md). Out exactly an input
// is safe (a block is read before it is written); other overlap, undefined (kernels.h),
// is whatever the blocks make of it, as it was when the call was widened whole.

template <typename H>
SG_INLINE void widen_block(float* __restrict t, const H* __restrict x, int64_t sx, int64_t m) {
  if (sx == 1) {
    for (int64_t i = 0; i < m; ++i) t[i] = convert<float>(x[i]);
  } else {
    for (int64_t i = 0; i < m; ++i) t[i] = convert<float>(x[i * sx]);
  }
}

template <typename H>
SG_INLINE void round_block(H* __restrict o, int64_t so, const float* __restrict r, int64_t m) {
  if (so == 1) {
    for (int64_t i = 0; i < m; ++i) o[i] = convert<H>(r[i]);
  } else {
    for (int64_t i = 0; i < m; ++i) o[i * so] = convert<H>(r[i]);
  }
}

template <typename H, typename Op>
void map1_16(const Layout<2>& l, void* out, const void* in, int64_t begin, int64_t end, Op op) {
  H* const o0 = static_cast<H*>(out);
  const H* const x0 = static_cast<const H*>(in);
  for_each_row_range(l, begin, end, [&](const int64_t* off, int64_t n, const int64_t* step) {
    H* o = o0 + off[0];
    const H* x = x0 + off[1];
    float t[kMathBlock], r[kMathBlock];
    for (int64_t base = 0; base < n; base += kMathBlock) {
      const int64_t m = n - base < kMathBlock ? n - base : kMathBlock;
      widen_block(t, x + base * step[1], step[1], m);
      if constexpr (kSplitFor<Op, float>) {
        row1_math(r, t, m, op);
      } else if constexpr (kLongChain<Op, float>) {
        row1_disjoint_chain(r, t, m, op);
      } else {
        row1_disjoint(r, t, m, op);
      }
      round_block(o + base * step[0], step[0], r, m);
    }
  });
}

template <typename H, typename Op>
void map2_16(const Layout<3>& l, void* out, const void* a, const void* b, int64_t begin,
             int64_t end, Op op) {
  H* const o0 = static_cast<H*>(out);
  const H* const a0 = static_cast<const H*>(a);
  const H* const b0 = static_cast<const H*>(b);
  for_each_row_range(l, begin, end, [&](const int64_t* off, int64_t n, const int64_t* step) {
    H* o = o0 + off[0];
    const H* x = a0 + off[1];
    const H* y = b0 + off[2];
    float ta[kMathBlock], tb[kMathBlock], r[kMathBlock];
    const int64_t unit[3] = {1, 1, 1};
    for (int64_t base = 0; base < n; base += kMathBlock) {
      const int64_t m = n - base < kMathBlock ? n - base : kMathBlock;
      widen_block(ta, x + base * step[1], step[1], m);
      widen_block(tb, y + base * step[2], step[2], m);
      if constexpr (kSplitFor<Op, float>) {
        row2_math(r, ta, tb, m, unit, op);
      } else if constexpr (kLongChain<Op, float>) {
        row2_disjoint_chain(r, ta, tb, m, op);
      } else {
        row2_disjoint(r, ta, tb, m, op);
      }
      round_block(o + base * step[0], step[0], r, m);
    }
  });
}

}  // namespace

void unary_16(Unary op, DType dt, const Layout<2>& l, void* out, const void* in, int64_t b,
              int64_t e) {
  if (dt == DType::kFloat16) {
    return with_unary(op, [&](auto f) { map1_16<Half>(l, out, in, b, e, f); });
  }
  with_unary(op, [&](auto f) { map1_16<BFloat16>(l, out, in, b, e, f); });
}

void unary_scalar_16(UnaryScalar op, DType dt, const Layout<2>& l, void* out, const void* in,
                     float scalar, int64_t b, int64_t e) {
  if (dt == DType::kFloat16) {
    return with_unary_scalar(op, scalar,
                             [&](auto f) { map1_16<Half>(l, out, in, b, e, f); });
  }
  with_unary_scalar(op, scalar, [&](auto f) { map1_16<BFloat16>(l, out, in, b, e, f); });
}

void binary_16(Binary op, DType dt, const Layout<3>& l, void* out, const void* a,
               const void* pb, int64_t b, int64_t e) {
  if (dt == DType::kFloat16) {
    return with_binary(op, [&](auto f) { map2_16<Half>(l, out, a, pb, b, e, f); });
  }
  with_binary(op, [&](auto f) { map2_16<BFloat16>(l, out, a, pb, b, e, f); });
}

void axpy_16(DType dt, const Layout<3>& l, void* out, const void* a, const void* pb,
             float alpha, int64_t b, int64_t e) {
  const AxpyOp<float> f{alpha};
  if (dt == DType::kFloat16) return map2_16<Half>(l, out, a, pb, b, e, f);
  map2_16<BFloat16>(l, out, a, pb, b, e, f);
}

}  // namespace SG_CPU_LEVEL
}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad
