// The level tables that loops.cc hands out under ThreadSanitizer: each entry announces the
// memory its call reads and writes (tsan_announce.h) and then calls the same entry of the
// level's own table, which that build compiles without TSan's instrumentation (.bazelrc).
// One audited file instead of an announcement inside every loop: a new entry in Loops or
// NnLoops fails to compile here until it says what it touches (the static_asserts), and
// tests/kernels:loops_tsan_test races every operand of every entry against a plain access
// and expects TSan's report.
//
// What each entry touches is what loops.h says of it; the announcement is made before the
// call, which does not synchronise with anything, so TSan sees the same happens-before as
// for the real accesses. Outside TSan builds the tables are compiled (so they stay
// correct) but not used.
//
// Thread-safety: the tables are constant. Failure: none of their own.
#include <cstddef>
#include <cstdint>

#include "kernels/functors/optim_ops.h"
#include "kernels/host/loops.h"
#include "kernels/host/tsan_announce.h"

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace {

// One operand of a Layout<N> call: its base, element size and whether it is written.
struct Operand {
  const void* base;
  size_t size;
  bool writes;
};

// The rows of flat indices [begin, end) of every operand, as the loops will walk them.
template <int N>
void announce_rows(const Layout<N>& l, int64_t begin, int64_t end, const Operand (&ops)[N]) {
  for_each_row_range(l, begin, end, [&](const int64_t* off, int64_t n, const int64_t* step) {
    for (int k = 0; k < N; ++k) {
      const char* at = static_cast<const char*>(ops[k].base) +
                       off[k] * static_cast<int64_t>(ops[k].size);
      announce(at, n, step[k], ops[k].size, ops[k].writes);
    }
  });
}

constexpr bool kRead = false, kWrite = true;

// A new entry in either table must be announced below: these fail until it is (the
// tables' initialisers would otherwise leave it null without a word).
static_assert(sizeof(Loops) == 10 * sizeof(void*),
              "Loops changed: announce the new entry in announced_loops.cc");
static_assert(sizeof(NnLoops) == 10 * sizeof(void*),
              "NnLoops changed: announce the new entry in announced_loops.cc");

// A contiguous operand of n elements of `size` bytes that the call reads, or writes (an
// operand read and written, as an accumulator, is announced as written: TSan reports a
// write against any other thread's access, so a read announced too would add nothing).
void reads(const void* p, int64_t n, size_t size) { announce(p, n, 1, size, kRead); }
void writes(const void* p, int64_t n, size_t size) { announce(p, n, 1, size, kWrite); }

// The level is a parameter rather than read from B: B is defined in another file, so its
// fields are not constants here, and the table must be (no order of initialisation).
template <const Loops& B, CpuCapability L>
struct Announced {
  static void unary(Unary op, DType dt, const Layout<2>& l, void* out, const void* in,
                    int64_t b, int64_t e) {
    const size_t s = element_size(dt);
    announce_rows<2>(l, b, e, {{out, s, kWrite}, {in, s, kRead}});
    B.unary(op, dt, l, out, in, b, e);
  }
  static void unary_scalar(UnaryScalar op, DType dt, const Layout<2>& l, void* out,
                           const void* in, double scalar, int64_t b, int64_t e) {
    const size_t s = element_size(dt);
    announce_rows<2>(l, b, e, {{out, s, kWrite}, {in, s, kRead}});
    B.unary_scalar(op, dt, l, out, in, scalar, b, e);
  }
  static void binary(Binary op, DType dt, const Layout<3>& l, void* out, const void* a,
                     const void* c, int64_t b, int64_t e) {
    const size_t s = element_size(dt);
    announce_rows<3>(l, b, e, {{out, s, kWrite}, {a, s, kRead}, {c, s, kRead}});
    B.binary(op, dt, l, out, a, c, b, e);
  }
  static void axpy(DType dt, const Layout<3>& l, void* out, const void* a, const void* c,
                   double alpha, int64_t b, int64_t e) {
    const size_t s = element_size(dt);
    announce_rows<3>(l, b, e, {{out, s, kWrite}, {a, s, kRead}, {c, s, kRead}});
    B.axpy(dt, l, out, a, c, alpha, b, e);
  }
  static void fill(DType dt, const Layout<1>& l, void* out, double value, int64_t b,
                   int64_t e) {
    announce_rows<1>(l, b, e, {{out, element_size(dt), kWrite}});
    B.fill(dt, l, out, value, b, e);
  }
  static void copy(DType to, DType from, const Layout<2>& l, void* out, const void* in,
                   int64_t b, int64_t e) {
    announce_rows<2>(l, b, e, {{out, element_size(to), kWrite}, {in, element_size(from), kRead}});
    B.copy(to, from, l, out, in, b, e);
  }
  static double sum_block(DType dt, const void* p, int64_t n) {
    reads(p, n, element_size(dt));
    return B.sum_block(dt, p, n);
  }
  static void extreme(bool is_max, DType dt, const void* p, int64_t n, void* acc) {
    reads(p, n, element_size(dt));
    writes(acc, 1, element_size(dt));
    B.extreme(is_max, dt, p, n, acc);
  }
  static void columns(Reduce op, DType dt, void* acc, const void* row, int64_t n) {
    writes(acc, n, op == Reduce::kSum ? sizeof(double) : element_size(dt));
    reads(row, n, element_size(dt));
    B.columns(op, dt, acc, row, n);
  }
  static constexpr Loops kTable = {L, unary, unary_scalar, binary, axpy, fill,
                                   copy,    sum_block, extreme, columns};
};

template <const NnLoops& B>
struct AnnouncedNn {
  static void max_pool_2x2(DType dt, const void* top, const void* bottom, int64_t ow,
                           void* values, int64_t* indices, int64_t first, int64_t width) {
    const size_t s = element_size(dt);
    reads(top, 2 * ow, s);
    reads(bottom, 2 * ow, s);
    writes(values, ow, s);
    writes(indices, ow, sizeof(int64_t));
    B.max_pool_2x2(dt, top, bottom, ow, values, indices, first, width);
  }
  static double centred_squares(DType dt, const void* p, int64_t n, double mean) {
    reads(p, n, element_size(dt));
    return B.centred_squares(dt, p, n, mean);
  }
  static void grad_sums(DType dt, const void* g, const void* x, int64_t n, double mean,
                        double* sum_g, double* sum_gc) {
    const size_t s = element_size(dt);
    reads(g, n, s);
    reads(x, n, s);
    writes(sum_g, 1, sizeof(double));
    writes(sum_gc, 1, sizeof(double));
    B.grad_sums(dt, g, x, n, mean, sum_g, sum_gc);
  }
  static void batch_norm_apply(DType dt, void* out, const void* in, int64_t n,
                               const double* c) {
    const size_t s = element_size(dt);
    writes(out, n, s);
    reads(in, n, s);
    reads(c, 4, sizeof(double));
    B.batch_norm_apply(dt, out, in, n, c);
  }
  static void batch_norm_input_grad(DType dt, void* out, const void* g, const void* x,
                                    int64_t n, const double* c) {
    const size_t s = element_size(dt);
    writes(out, n, s);
    reads(g, n, s);
    reads(x, n, s);
    reads(c, 5, sizeof(double));
    B.batch_norm_input_grad(dt, out, g, x, n, c);
  }
  static void layer_norm_apply(DType dt, void* out, const void* in, const void* weight,
                               const void* bias, int64_t n, double mean, double rstd) {
    const size_t s = element_size(dt);
    writes(out, n, s);
    reads(in, n, s);
    reads(weight, n, s);  // null: nothing (announce skips it)
    reads(bias, n, s);
    B.layer_norm_apply(dt, out, in, weight, bias, n, mean, rstd);
  }
  static void layer_norm_input_grad(DType dt, void* out, const void* gw, const void* x,
                                    int64_t n, const double* c) {
    const size_t s = element_size(dt);
    writes(out, n, s);
    reads(gw, n, s);
    reads(x, n, s);
    reads(c, 4, sizeof(double));
    B.layer_norm_input_grad(dt, out, gw, x, n, c);
  }
  static void layer_norm_param_block(DType dt, double* acc_w, double* acc_b, const void* g,
                                     const void* x, const void* mean, const void* rstd,
                                     int64_t rows, int64_t n) {
    const size_t s = element_size(dt);
    writes(acc_w, n, sizeof(double));
    writes(acc_b, n, sizeof(double));
    reads(g, rows * n, s);
    reads(x, rows * n, s);
    reads(mean, rows, s);
    reads(rstd, rows, s);
    B.layer_norm_param_block(dt, acc_w, acc_b, g, x, mean, rstd, rows, n);
  }
  static void scaled_grad_sums(DType dt, void* gw, const void* g, const void* weight,
                               const void* x, int64_t n, double mean, double* sum_gw,
                               double* sum_gwc) {
    const size_t s = element_size(dt);
    writes(gw, n, s);
    reads(g, n, s);
    reads(weight, n, s);
    reads(x, n, s);
    writes(sum_gw, 1, sizeof(double));
    writes(sum_gwc, 1, sizeof(double));
    B.scaled_grad_sums(dt, gw, g, weight, x, n, mean, sum_gw, sum_gwc);
  }
  static void adam_row(DType dt, const void* op, void* p, const void* g, void* m, void* v,
                       int64_t n, double inv_sqrt_bias2, double neg_step) {
    const size_t s = element_size(dt);
    const size_t op_size =
        dt == DType::kFloat32 ? sizeof(AdamUpdate<float>) : sizeof(AdamUpdate<double>);
    reads(op, 1, op_size);
    writes(p, n, s);
    reads(g, n, s);
    writes(m, n, s);
    writes(v, n, s);
    B.adam_row(dt, op, p, g, m, v, n, inv_sqrt_bias2, neg_step);
  }
  static constexpr NnLoops kTable = {
      max_pool_2x2,     centred_squares,       grad_sums,
      batch_norm_apply, batch_norm_input_grad, layer_norm_apply,
      layer_norm_input_grad, layer_norm_param_block, scaled_grad_sums,
      adam_row};
};

}  // namespace

const Loops& announced_loops_for(CpuCapability c) {
  using L = CpuCapability;
  switch (c) {
#if defined(__x86_64__)
    case L::kAvx512: return Announced<level_avx512::kLoops, L::kAvx512>::kTable;
    case L::kAvx2: return Announced<level_avx2::kLoops, L::kAvx2>::kTable;
#endif
    default: return Announced<level_default::kLoops, L::kDefault>::kTable;
  }
}

const NnLoops& announced_nn_loops_for(CpuCapability c) {
  switch (c) {
#if defined(__x86_64__)
    case CpuCapability::kAvx512: return AnnouncedNn<level_avx512::kNnLoops>::kTable;
    case CpuCapability::kAvx2: return AnnouncedNn<level_avx2::kNnLoops>::kTable;
#endif
    default: return AnnouncedNn<level_default::kNnLoops>::kTable;
  }
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad
