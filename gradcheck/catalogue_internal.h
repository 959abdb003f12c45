// Internal to ops/: the pieces catalogue entries are written with (input domains and
// layouts, entry builders) and one function per section of the catalogue, each in its own
// file so that sections grow without one file growing. See gradcheck/catalogue.h for the rules
// every entry follows.
//
// Thread-safety and failure: as gradcheck/catalogue.h.
#ifndef STREAMGRAD_GRADCHECK_CATALOGUE_INTERNAL_H_
#define STREAMGRAD_GRADCHECK_CATALOGUE_INTERNAL_H_

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/factories.h"
#include "gradcheck/catalogue.h"
#include "ops/ops.h"
#include "runtime/backend/devices.h"

namespace streamgrad {
namespace catalogue_internal {

using T = const Tensor&;
using Fn = std::function<TensorList(const TensorList&)>;

// Where an input's values may lie. `away` keeps every value at least that far from 0
// (relu/abs kinks, divisors); `apart` keeps values pairwise at least that far apart (no
// ties for max/min, even after a perturbation by eps).
struct Domain {
  double lo = -1, hi = 1, away = 0, apart = 0;
};
constexpr Domain kAny{};
constexpr Domain kPositive{0.5, 2.0};
constexpr Domain kNonzero{-1.5, 1.5, 0.5};
constexpr Domain kKinkFree{-2, 2, 0.1};
constexpr Domain kDistinct{-2, 2, 0, 0.05};
// float32 rounding of x +- eps must stay far below the unit derivative: below 2^-17 an
// ulp of float32 is at most 2^-40, so the central difference is off by < 5e-7.
constexpr Domain kTiny{-7e-6, 7e-6};

enum class Layout { kDense, kTransposed, kStrided, kIndex, kMask };

// How to make one input.
struct In {
  Layout layout;
  Shape shape;
  Domain dom = kAny;
  std::vector<int64_t> index = {};
};
inline In dense(Shape s, Domain d = kAny) { return In{Layout::kDense, std::move(s), d}; }
// A 2-D leaf stored column-major (the transpose of a [s1, s0] tensor).
inline In transposed(Shape s, Domain d = kAny) { return In{Layout::kTransposed, std::move(s), d}; }
// A leaf whose last dim has stride 2 (every other column of a wider tensor).
inline In strided(Shape s, Domain d = kAny) { return In{Layout::kStrided, std::move(s), d}; }
// An int64 index: a constant input (never perturbed, no gradient).
inline In indices(std::vector<int64_t> v) { return In{Layout::kIndex, {}, kAny, std::move(v)}; }
// A bool mask of `shape` from 0/1 values: a constant input, like an index (where's
// condition, masked_fill's mask).
inline In mask(Shape s, std::vector<int64_t> v) {
  return In{Layout::kMask, std::move(s), kAny, std::move(v)};
}

// Values are drawn on the host: an entry's inputs depend on (seed, entry) only, not on the
// shared generator behind manual_seed/randn, and are the same on every device.
inline std::vector<double> draw(std::mt19937_64& rng, int64_t n, const Domain& dom) {
  std::uniform_real_distribution<double> u(dom.lo, dom.hi);
  std::vector<double> v;
  while (static_cast<int64_t>(v.size()) < n) {
    const double x = u(rng);
    bool ok = std::abs(x) >= dom.away;
    for (double y : v) ok = ok && std::abs(x - y) >= dom.apart;
    if (ok) v.push_back(x);
  }
  return v;
}

// Non-contiguous leaves are views of a larger tensor, detached: detach() keeps the strided
// layout and makes a leaf, which gradcheck can perturb in place.
inline Tensor make_input(const In& in, Device d, std::mt19937_64& rng) {
  const TensorOptions f64 = TensorOptions().dtype(DType::kFloat64).device(d);
  switch (in.layout) {
    case Layout::kDense:
      return from_vector<double>(draw(rng, numel_of(in.shape), in.dom), in.shape, f64)
          .requires_grad_();
    case Layout::kTransposed: {
      const Shape stored{in.shape[1], in.shape[0]};
      const Tensor base = from_vector<double>(draw(rng, numel_of(stored), in.dom), stored, f64);
      return transpose(base, 0, 1).detach().requires_grad_();
    }
    case Layout::kStrided: {
      Shape wide = in.shape;
      wide.back() *= 2;
      const Tensor base = from_vector<double>(draw(rng, numel_of(wide), in.dom), wide, f64);
      return slice(base, -1, 0, wide.back(), 2).detach().requires_grad_();
    }
    case Layout::kMask: {
      const std::vector<bool> bits(in.index.begin(), in.index.end());
      return from_vector<bool>(bits, in.shape, TensorOptions().dtype(DType::kBool).device(d));
    }
    case Layout::kIndex:
      break;
  }
  return from_vector<int64_t>(in.index, {static_cast<int64_t>(in.index.size())},
                              TensorOptions().dtype(DType::kInt64).device(d));
}

using Maker = std::vector<In>;

inline OpSpec entry(std::string name, std::string notes, Fn fn, Maker ins, bool twice) {
  auto make = [ins = std::move(ins)](Device d, uint64_t seed) {
    const Device device = resolve_device(d, "op_catalogue");
    std::mt19937_64 rng(seed);
    TensorList out;
    for (const In& in : ins) out.push_back(make_input(in, device, rng));
    return out;
  };
  return OpSpec{std::move(name), std::move(fn), std::move(make), twice, std::move(notes)};
}

inline Fn unary(std::function<Tensor(T)> f) {
  return [f = std::move(f)](const TensorList& x) { return TensorList{f(x[0])}; };
}
inline Fn binary(std::function<Tensor(T, T)> f) {
  return [f = std::move(f)](const TensorList& x) { return TensorList{f(x[0], x[1])}; };
}

// Collects entries in ops.h order.
class Catalogue {
 public:
  // `twice`: false where gradgradcheck does not apply. Every op is twice differentiable
  // (backward formulas are written with differentiable ops); the entries that opt out
  // round a float64 gradient to float32 on purpose (dtype promotion), which gradgradcheck's
  // perturbation of the grad_output does not survive.
  void add(std::string name, std::string notes, Fn fn, Maker ins, bool twice = true) {
    entries_.push_back(
        entry(std::move(name), std::move(notes), std::move(fn), std::move(ins), twice));
  }
  std::vector<OpSpec> take() { return std::move(entries_); }

 private:
  std::vector<OpSpec> entries_;
};

// Sections, in ops.h order; each appends its entries.
void arithmetic(Catalogue& c);             // catalogue.cc
void math(Catalogue& c);                   // catalogue.cc
void compare_select(Catalogue& c);         // catalogue_select.cc
void reductions(Catalogue& c);             // catalogue.cc
void linear_algebra(Catalogue& c);         // catalogue.cc
void shapes(Catalogue& c);                 // catalogue.cc
void devices_and_dtypes(Catalogue& c);     // catalogue.cc
void in_place(Catalogue& c);               // catalogue.cc
void conv_pool_norm(Catalogue& c);         // catalogue_conv.cc
void losses_activations(Catalogue& c);     // catalogue_losses.cc
void statistics_and_masks(Catalogue& c);   // catalogue_modern.cc
void sort_sample_pad(Catalogue& c);        // catalogue_sort.cc

}  // namespace catalogue_internal
}  // namespace streamgrad

#endif  // STREAMGRAD_GRADCHECK_CATALOGUE_INTERNAL_H_
