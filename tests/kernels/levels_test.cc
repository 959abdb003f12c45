// Every instruction-set level this machine has (kernels/host/loops.h) gives the element-wise
// kernels the same bits as applying the kernels/functors/elementwise_ops.h functor to each element
// in plain scalar code: odd lengths 0..67 and large ones, unaligned starts, in place (out
// is a, b or both), strided and broadcast operands, float32 and float64, inputs with NaN,
// infinities, signed zeros and subnormals. elementwise_test checks the functors' math
// against independent formulas; this test checks the vector loops around them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernels/host/loops.h"
#include "kernels/functors/elementwise_ops.h"
#include "kernels/kernels.h"
#include "tests/kernels/level_test_util.h"

namespace streamgrad {
namespace {

namespace k = kernels;
using k::Binary;
using k::Unary;
using k::UnaryScalar;
using testing::Buffer;
using testing::Shape;

TEST_CASE("the level setting picks that level's loops", "[levels]") {
  for (CpuCapability level : testing::machine_levels()) {
    INFO("level " << cpu_capability_name(level));
    testing::CapabilityScope scope(level);
    CHECK(k::cpu::loops().level == level);
    // Each level's loops are its own code, not another level's.
    if (level != CpuCapability::kDefault) {
      CHECK(k::cpu::loops().binary != k::cpu::loops_for(CpuCapability::kDefault).binary);
    }
  }
  WARN("levels on this machine: " << testing::machine_levels().size());
}

// levels_portable_math_test runs this file with STREAMGRAD_CPU_MATH=portable: every level
// must then give the bits of SLEEF's functions without FMA instead.
TEST_CASE("the transcendental functions' flavour follows STREAMGRAD_CPU_MATH", "[levels]") {
  const char* v = std::getenv("STREAMGRAD_CPU_MATH");
  const bool portable = v != nullptr && std::string(v) == "portable";
  WARN("SLEEF flavour: " << (k::math::fma_flavour() ? "fma" : "portable"));
  if (portable) CHECK_FALSE(k::math::fma_flavour());
}

template <typename T>
std::function<T(T)> unary_fn(Unary op) {
  switch (op) {
    case Unary::kNeg: return k::NegOp{};
    case Unary::kExp: return k::ExpOp{};
    case Unary::kLog: return k::LogOp{};
    case Unary::kSqrt: return k::SqrtOp{};
    case Unary::kTanh: return k::TanhOp{};
    case Unary::kSigmoid: return k::SigmoidOp{};
    case Unary::kRelu: return k::ReluOp{};
    case Unary::kAbs: return k::AbsOp{};
    case Unary::kSign: return k::SignOp{};
    case Unary::kReciprocal: return k::ReciprocalOp{};
    case Unary::kSquare: return k::SquareOp{};
    case Unary::kErf: return k::ErfOp{};
    case Unary::kSin: return k::SinOp{};
    case Unary::kCos: return k::CosOp{};
    case Unary::kLog1p: return k::Log1pOp{};
    case Unary::kRsqrt: return k::RsqrtOp{};
    case Unary::kSilu: return k::SiluOp{};
    case Unary::kGelu: return k::GeluOp{};
    case Unary::kGeluTanh: return k::GeluTanhOp{};
  }
  return {};
}

template <typename T>
std::function<T(T)> scalar_fn(UnaryScalar op, T s) {
  switch (op) {
    case UnaryScalar::kAdd: return k::AddScalarOp<T>{s};
    case UnaryScalar::kMul: return k::MulScalarOp<T>{s};
    case UnaryScalar::kPow: return k::PowScalarOp<T>{s};
    case UnaryScalar::kRSub: return k::RSubScalarOp<T>{s};
    case UnaryScalar::kRDiv: return k::RDivScalarOp<T>{s};
    case UnaryScalar::kGe: return k::GeScalarOp<T>{s};
    case UnaryScalar::kClampMin: return k::ClampMinScalarOp<T>{s};
    case UnaryScalar::kClampMax: return k::ClampMaxScalarOp<T>{s};
  }
  return {};
}

template <typename T>
std::function<T(T, T)> binary_fn(Binary op) {
  switch (op) {
    case Binary::kAdd: return k::AddOp{};
    case Binary::kSub: return k::SubOp{};
    case Binary::kMul: return k::MulOp{};
    case Binary::kDiv: return k::DivOp{};
    case Binary::kPow: return k::PowOp{};
    case Binary::kReluBackward: return k::ReluBackwardOp{};
    case Binary::kTanhBackward: return k::TanhBackwardOp{};
    case Binary::kSigmoidBackward: return k::SigmoidBackwardOp{};
    case Binary::kGeluBackward: return k::GeluBackwardOp{};
    case Binary::kGeluTanhBackward: return k::GeluTanhBackwardOp{};
    case Binary::kSiluBackward: return k::SiluBackwardOp{};
  }
  return {};
}

// The lengths a case runs: all of 0..67 (every vector tail at every width) for the main
// placements, a sample of them for the others; the bias of the MLP's hidden layer; and,
// for the main placements, the edges of the 4 KB blocks whose stores the disjoint rows
// prefetch (1024 and 1025 floats, 512 and 513 doubles) and a long one (parallel_test
// covers lengths above the parallel threshold, where the split is the same code at every
// level).
std::vector<int64_t> lengths(bool all = true) {
  std::vector<int64_t> n;
  for (int64_t i = 0; i <= 67; ++i) {
    if (all || i < 2 || i % 16 <= 1 || i == 67) n.push_back(i);
  }
  n.push_back(256);
  if (all) {
    for (int64_t i : {512, 513, 1024, 1025}) n.push_back(i);
    n.push_back(40001);
  }
  return n;
}

// mixed_values(size, seed), made once per process: every op of a case (GENERATE runs the
// case's body once per op) reads the same inputs, and under ThreadSanitizer making them
// was a quarter of this test's time.
template <typename T>
const std::vector<T>& inputs(size_t size, uint32_t seed) {
  static std::map<std::pair<size_t, uint32_t>, std::vector<T>> made;
  auto it = made.find({size, seed});
  if (it == made.end()) {
    it = made.emplace(std::make_pair(size, seed), testing::mixed_values<T>(size, seed)).first;
  }
  return it->second;
}

// A buffer for 1-D views of n elements at these offsets and strides: up to the furthest
// element any of them reaches, and 8 more that no view covers (they must stay as they were).
size_t buffer_size(int64_t n, std::initializer_list<std::pair<int64_t, int64_t>> offset_stride) {
  int64_t end = 0;
  for (const auto& [offset, stride] : offset_stride) end = std::max(end, offset + stride * n);
  return static_cast<size_t>(end + 8);
}

// One operand layout of a 1-D case: where each view starts and steps in a buffer.
struct Placement {
  const char* what;
  int64_t out_offset, out_stride;
  int64_t in_offset, in_stride;  // in a separate buffer unless `in_place`
  bool in_place;
  bool all_lengths;
};

const Placement kUnaryPlacements[] = {
    {"contiguous, aligned", 0, 1, 0, 1, false, false},
    {"contiguous, unaligned", 1, 1, 3, 1, false, true},
    {"in place, unaligned", 1, 1, 1, 1, true, true},
    {"strided", 2, 3, 1, 2, false, false},
    {"broadcast input", 0, 1, 5, 0, false, false},
};

// Every placement and length of a one-input case: `kernel(stream, out, in)` at every level
// must give fn's bits at out's elements and leave the rest of out's buffer alone.
template <typename T>
void check_unary_case(
    const std::function<void(const Stream&, const k::View&, const k::View&)>& kernel,
    const std::function<T(T)>& fn, uint32_t seed) {
  const Device cpu("cpu");
  const Stream s(cpu);
  for (const Placement& p : kUnaryPlacements) {
    for (int64_t n : lengths(p.all_lengths)) {
      INFO(p.what << ", n " << n);
      const size_t size =
          buffer_size(n, {{p.out_offset, p.out_stride}, {p.in_offset, p.in_stride}});
      const std::vector<T>& input = inputs<T>(size, seed + static_cast<uint32_t>(n));
      const Shape os({n}, {p.out_stride}, p.out_offset);
      const Shape is({n}, {p.in_stride}, p.in_offset);
      // The expected buffer: the sentinel (or, in place, the input) outside out's elements.
      std::vector<T> want = p.in_place ? input : std::vector<T>(size, T(-777));
      for (int64_t i = 0; i < n; ++i) {
        want[p.out_offset + i * p.out_stride] = fn(input[p.in_offset + i * p.in_stride]);
      }
      const Buffer<T> in(cpu, input);
      testing::expect_bits_at_every_level<T>(
          p.in_place ? input : std::vector<T>(size, T(-777)), want, [&](const Buffer<T>& out) {
            kernel(s, out.view(os), p.in_place ? out.view(is) : in.view(is));
          });
    }
  }
}

TEMPLATE_TEST_CASE("unary ops: every level gives the functor's bits", "[levels]", float,
                   double) {
  using T = TestType;
  const Unary op = GENERATE(Unary::kNeg, Unary::kExp, Unary::kLog, Unary::kSqrt, Unary::kTanh,
                            Unary::kSigmoid, Unary::kRelu, Unary::kAbs, Unary::kSign,
                            Unary::kReciprocal, Unary::kSquare, Unary::kErf, Unary::kSin,
                            Unary::kCos, Unary::kLog1p, Unary::kRsqrt, Unary::kSilu,
                            Unary::kGelu, Unary::kGeluTanh);
  INFO("op " << static_cast<int>(op));
  check_unary_case<T>(
      [op](const Stream& s, const k::View& o, const k::View& i) { k::unary(s, op, o, i); },
      unary_fn<T>(op), 11);
}

TEMPLATE_TEST_CASE("unary_scalar ops: every level gives the functor's bits", "[levels]",
                   float, double) {
  using T = TestType;
  const UnaryScalar op = GENERATE(UnaryScalar::kAdd, UnaryScalar::kMul, UnaryScalar::kPow,
                                  UnaryScalar::kRSub, UnaryScalar::kRDiv, UnaryScalar::kGe,
                                  UnaryScalar::kClampMin, UnaryScalar::kClampMax);
  const double scalar = GENERATE(2.0, -0.3);
  const T st = static_cast<T>(scalar);
  INFO("op " << static_cast<int>(op) << " " << scalar);
  // x ^ 2 is the square (one rounding), as kernels.h's unary_scalar computes it.
  const auto fn = op == UnaryScalar::kPow && st == T(2) ? std::function<T(T)>(k::SquareOp{})
                                                         : scalar_fn<T>(op, st);
  check_unary_case<T>(
      [op, scalar](const Stream& s, const k::View& o, const k::View& i) {
        k::unary_scalar(s, op, o, i, scalar);
      },
      fn, 23);
}

// Where the two inputs of a binary case live: in their own buffers, or in out's.
struct Placement2 {
  const char* what;
  Shape out, a, b;
  bool a_is_out, b_is_out;
  bool all_lengths = false;
};

std::vector<Placement2> placements2(int64_t n) {
  return {
      {"contiguous, unaligned", Shape({n}, {1}, 1), Shape({n}, {1}, 3), Shape({n}, {1}, 2),
       false, false, true},
      {"out is a", Shape({n}, {1}, 1), Shape({n}, {1}, 1), Shape({n}, {1}, 0), true, false,
       true},
      {"out is b", Shape({n}, {1}, 2), Shape({n}, {1}, 0), Shape({n}, {1}, 2), false, true},
      {"out is a and b", Shape({n}, {1}, 1), Shape({n}, {1}, 1), Shape({n}, {1}, 1), true,
       true},
      {"b broadcast", Shape({n}, {1}, 0), Shape({n}, {1}, 1), Shape({n}, {0}, 4), false, false},
      {"b broadcast, out is a", Shape({n}, {1}, 3), Shape({n}, {1}, 3), Shape({n}, {0}, 1),
       true, false},
      {"a broadcast", Shape({n}, {1}, 2), Shape({n}, {0}, 7), Shape({n}, {1}, 0), false, false},
      {"a broadcast, out is b", Shape({n}, {1}, 0), Shape({n}, {0}, 2), Shape({n}, {1}, 0),
       false, true},
      {"strided", Shape({n}, {3}, 1), Shape({n}, {2}, 0), Shape({n}, {1}, 5), false, false},
  };
}

template <typename T>
void check_binary_case(const std::function<void(const Stream&, const k::View&, const k::View&,
                                                const k::View&)>& kernel,
                       const std::function<T(T, T)>& fn, uint32_t seed) {
  const Device cpu("cpu");
  const Stream s(cpu);
  for (int64_t n : lengths()) {
    const bool sample = n < 2 || n % 16 <= 1 || n == 67 || n == 256;
    for (const Placement2& p : placements2(n)) {
      if (!p.all_lengths && !sample) continue;
      INFO(p.what << ", n " << n);
      const size_t size = buffer_size(n, {{p.out.offset, p.out.strides[0]},
                                          {p.a.offset, p.a.strides[0]},
                                          {p.b.offset, p.b.strides[0]}});
      const std::vector<T>& va = inputs<T>(size, seed + static_cast<uint32_t>(n));
      const std::vector<T>& vb = inputs<T>(size, seed + 1000 + static_cast<uint32_t>(n));
      // Out's buffer starts as a's data when out is a (as b's when out is only b).
      const std::vector<T> start =
          p.a_is_out ? va : p.b_is_out ? vb : std::vector<T>(size, T(-777));
      std::vector<T> want = start;
      const std::vector<T>& ha = p.a_is_out ? start : va;
      const std::vector<T>& hb = p.b_is_out ? start : vb;
      // want is a copy: the inputs are read as they were before any element was written.
      const auto at = [](const Shape& v, int64_t i) { return v.offset + i * v.strides[0]; };
      for (int64_t i = 0; i < n; ++i) want[at(p.out, i)] = fn(ha[at(p.a, i)], hb[at(p.b, i)]);
      const Buffer<T> a(cpu, va), b(cpu, vb);
      testing::expect_bits_at_every_level<T>(start, want, [&](const Buffer<T>& out) {
        kernel(s, out.view(p.out), p.a_is_out ? out.view(p.a) : a.view(p.a),
               p.b_is_out ? out.view(p.b) : b.view(p.b));
      });
    }
  }
}

TEMPLATE_TEST_CASE("binary ops: every level gives the functor's bits", "[levels]", float,
                   double) {
  using T = TestType;
  const Binary op = GENERATE(Binary::kAdd, Binary::kSub, Binary::kMul, Binary::kDiv,
                             Binary::kPow, Binary::kReluBackward, Binary::kTanhBackward,
                             Binary::kSigmoidBackward, Binary::kGeluBackward,
                             Binary::kGeluTanhBackward, Binary::kSiluBackward);
  INFO("op " << static_cast<int>(op));
  check_binary_case<T>(
      [op](const Stream& s, const k::View& o, const k::View& a, const k::View& b) {
        k::binary(s, op, o, a, b);
      },
      binary_fn<T>(op), 31);
}

TEMPLATE_TEST_CASE("axpy: every level gives a + alpha * b rounded twice", "[levels]", float,
                   double) {
  using T = TestType;
  // -1e-3 rounds differently with a fused multiply-add: a level that contracted would fail.
  const double alpha = GENERATE(1.0, -1e-3, 3.0);
  INFO("alpha " << alpha);
  check_binary_case<T>(
      [alpha](const Stream& s, const k::View& o, const k::View& a, const k::View& b) {
        k::axpy(s, o, a, b, alpha);
      },
      k::AxpyOp<T>{static_cast<T>(alpha)}, 47);
}

TEMPLATE_TEST_CASE("a bias broadcast over the rows of a matrix, at every level", "[levels]",
                   float, double) {
  using T = TestType;
  const Device cpu("cpu");
  const Stream s(cpu);
  const int64_t rows = 5, cols = GENERATE(1, 7, 33, 784);
  const Shape os({rows, cols}), as({rows, cols}), bs({rows, cols}, {0, 1});
  const std::vector<T> va = testing::mixed_values<T>(rows * cols, 5);
  const std::vector<T> vb = testing::mixed_values<T>(cols, 6);
  std::vector<T> want(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) want[r * cols + c] = va[r * cols + c] + vb[c];
  }
  const Buffer<T> a(cpu, va), b(cpu, vb);
  testing::expect_bits_at_every_level<T>(
      std::vector<T>(rows * cols, T(-777)), want, [&](const Buffer<T>& out) {
        k::binary(s, Binary::kAdd, out.view(os), a.view(as), b.view(bs));
      });
}

}  // namespace
}  // namespace streamgrad
