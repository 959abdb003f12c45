// interpolate (the reference's torch.nn.functional.interpolate) for [N, C, H, W] inputs:
// "nearest" and "bilinear", to a size or by a scale factor. Separable: rows, then columns,
// each through index_select (and, for bilinear, the two neighbours weighted by the
// fraction), so the gradient is index_select's (an index_add) and differentiable again.
//
// Source coordinates, as the reference computes them, with scale = in / out for a given
// size and 1 / scale_factor for a given factor: nearest takes floor(dst * scale) (capped
// at in - 1); bilinear takes (dst + 0.5) * scale - 0.5 clamped at 0 (align_corners
// false), or dst * (in - 1) / (out - 1) (align_corners true), and blends floor and the
// next element (capped) by the fraction.
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/factories.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT: the helpers every op uses

struct Axis {
  std::vector<int64_t> lo, hi;
  std::vector<double> frac;  // bilinear: weight of hi
};

Axis axis(int64_t in, int64_t out, double scale, bool bilinear, bool align_corners) {
  Axis a;
  for (int64_t i = 0; i < out; ++i) {
    if (!bilinear) {
      a.lo.push_back(std::min(static_cast<int64_t>(std::floor(i * scale)), in - 1));
      continue;
    }
    double src;
    if (align_corners) {
      src = out > 1 ? i * static_cast<double>(in - 1) / (out - 1) : 0.0;
    } else {
      src = std::max((i + 0.5) * scale - 0.5, 0.0);
    }
    const int64_t lo = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
    a.lo.push_back(lo);
    a.hi.push_back(std::min(lo + 1, in - 1));
    a.frac.push_back(src - lo);
  }
  return a;
}

// Resamples dim `dim` (2 or 3) of x along `a`.
Tensor resample(const Tensor& x, int64_t dim, const Axis& a, bool bilinear) {
  const TensorOptions ids = TensorOptions().dtype(DType::kInt64).device(x.device());
  const int64_t out = static_cast<int64_t>(a.lo.size());
  const Tensor lo = index_select(x, dim, from_vector(a.lo, {out}, ids));
  if (!bilinear) return lo;
  const Tensor hi = index_select(x, dim, from_vector(a.hi, {out}, ids));
  Shape wshape = {1, 1, 1, 1};
  wshape[static_cast<size_t>(dim)] = out;
  const Tensor w = streamgrad::to(from_vector(a.frac, wshape, TensorOptions().device(x.device())
                                                                  .dtype(DType::kFloat64)),
                                  x.dtype());
  return add(lo, mul(sub(hi, lo), w));  // lo + (hi - lo) * frac
}

}  // namespace

Tensor interpolate(const Tensor& input, const InterpolateOptions& o) {
  check_defined(input, "interpolate", "the input");
  check_floating(input, "interpolate");
  SG_CHECK(input.dim() == 4, ValueError,
           "interpolate: expected an input [N, C, H, W] (the 2-D modes), got ", input.describe());
  SG_CHECK(o.mode == "nearest" || o.mode == "bilinear", ValueError, "interpolate: mode \"",
           o.mode, "\" is not supported; expected \"nearest\" or \"bilinear\"");
  const bool bilinear = o.mode == "bilinear";
  SG_CHECK(bilinear || !o.align_corners.has_value(), ValueError,
           "interpolate: align_corners can only be set with the interpolating modes "
           "(bilinear), not \"nearest\"");
  SG_CHECK(o.size.empty() != o.scale_factor.empty(), ValueError,
           "interpolate: give exactly one of size and scale_factor");
  SG_CHECK(o.size.empty() || o.size.size() == 2, ValueError,
           "interpolate: size must have 2 elements (H, W) for input ", input.describe(),
           ", got [", absl::StrJoin(o.size, ", "), "]");
  SG_CHECK(o.scale_factor.empty() || o.scale_factor.size() == 2 || o.scale_factor.size() == 1,
           ValueError, "interpolate: scale_factor must have 1 or 2 elements, got ",
           o.scale_factor.size());
  Tensor x = input;
  for (int d = 0; d < 2; ++d) {
    const int64_t in = input.size(2 + d);
    int64_t out;
    double scale;
    if (!o.size.empty()) {
      out = o.size[static_cast<size_t>(d)];
      scale = out > 0 ? static_cast<double>(in) / out : 0;
    } else {
      const double f = o.scale_factor[o.scale_factor.size() == 1 ? 0 : static_cast<size_t>(d)];
      SG_CHECK(f > 0 && std::isfinite(f), ValueError,
               "interpolate: scale_factor must be positive and finite, got ", f);
      out = static_cast<int64_t>(std::floor(in * f));
      scale = 1.0 / f;
    }
    SG_CHECK(out > 0 && in > 0, ValueError, "interpolate: input ", input.describe(),
             " and output size ", out, " along dim ", 2 + d, " must both be positive");
    const bool corners = o.align_corners.value_or(false);
    x = resample(x, 2 + d, axis(in, out, scale, bilinear, corners), bilinear);
  }
  return x;
}

}  // namespace streamgrad
