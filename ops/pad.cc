// pad, as torch.nn.functional.pad: `pad` holds (before, after) pairs for the last dim,
// then the one before it, and so on; a negative amount crops.
//
// Composites, differentiable to any order through the ops they use:
//  - constant: crops with narrow, then cat with filled blocks (which have no history);
//  - reflect, replicate and circular: one index_select per padded dim, with indices built
//    on the host (input position c - before for output position c, reflected about the
//    ends without repeating the edge, clamped to them, or wrapped around the part that a
//    negative amount leaves), whose backward is index_add, so the gradient of every copy
//    of an element adds up at its source.
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT: the helpers every op uses

std::string describe_pad(const std::vector<int64_t>& pad) {
  return "{" + absl::StrJoin(pad, ", ") + "}";
}

Tensor pad_constant(const Tensor& x, int64_t d, int64_t before, int64_t after, double value) {
  const int64_t n = x.size(d);
  Tensor y = narrow(x, d, before < 0 ? -before : 0,
                    n + (before < 0 ? before : 0) + (after < 0 ? after : 0));
  std::vector<Tensor> parts;
  const TensorOptions o = TensorOptions().dtype(x.dtype()).device(x.device());
  auto block = [&](int64_t size) {
    Shape s = y.sizes();
    s[d] = size;
    return full(s, value, o);
  };
  if (before > 0) parts.push_back(block(before));
  parts.push_back(y);
  if (after > 0) parts.push_back(block(after));
  return parts.size() == 1 ? y : cat(parts, d);
}

enum class Fill { kReflect, kReplicate, kCircular };

Tensor pad_indexed(const Tensor& x, int64_t d, int64_t before, int64_t after, Fill fill) {
  const int64_t n = x.size(d);
  // Circular wraps within what cropping leaves: input positions lo..hi-1.
  const int64_t lo = before < 0 ? -before : 0, hi = after < 0 ? n + after : n;
  std::vector<int64_t> index;
  for (int64_t c = -before; c < n + after; ++c) {
    int64_t i = c;
    if (fill == Fill::kReflect) {
      if (i < 0) i = -i;
      if (i >= n) i = 2 * (n - 1) - i;
    } else if (fill == Fill::kReplicate) {
      i = i < 0 ? 0 : i >= n ? n - 1 : i;
    } else {
      i = i < lo ? i + (hi - lo) : i >= hi ? i - (hi - lo) : i;
    }
    index.push_back(i);
  }
  const Tensor idx = from_vector<int64_t>(
      index, {static_cast<int64_t>(index.size())},
      TensorOptions().dtype(DType::kInt64).device(x.device()));
  return index_select(x, d, idx);
}

}  // namespace

Tensor pad(const Tensor& input, const std::vector<int64_t>& pad, const std::string& mode,
           std::optional<double> value) {
  const char* op = "pad";
  check_defined(input, op, "the input");
  const int64_t pairs = static_cast<int64_t>(pad.size()) / 2;
  SG_CHECK(pad.size() % 2 == 0, ValueError, op, ": padding ", describe_pad(pad),
           " must have an even length: (before, after) pairs from the last dim backwards");
  SG_CHECK(pairs <= input.dim(), ValueError, op, ": padding ", describe_pad(pad), " pads ",
           pairs, " dims, but the input ", input.describe(), " has only ", input.dim());
  const bool constant = mode == "constant";
  const bool circular = mode == "circular";
  SG_CHECK(constant || circular || mode == "reflect" || mode == "replicate", ValueError, op,
           ": mode \"", mode, "\" is not one of \"constant\", \"reflect\", \"replicate\", "
           "\"circular\"");
  SG_CHECK(constant || !value.has_value(), ValueError, op, ": a fill value applies to mode "
           "\"constant\" only, not \"", mode, "\"");
  // The value must fit the dtype exactly (an int64 tensor takes integers, bool 0 or 1).
  if (constant) check_fill_value(value.value_or(0.0), input.dtype(), op);
  if (!constant) {
    SG_CHECK(pairs >= 1 && pairs <= 3 && (input.dim() == pairs + 1 || input.dim() == pairs + 2),
             ValueError, op, ": mode \"", mode, "\" pads the last 1, 2 or 3 dims of an input "
             "with one or two more dims (channels, and optionally a batch); got padding ",
             describe_pad(pad), " for ", input.describe());
    // Circular only moves elements, so any dtype works (as in the reference).
    if (!circular) check_floating(input, op);
  }
  Tensor y = input;
  for (int64_t p = 0; p < pairs; ++p) {
    const int64_t d = input.dim() - 1 - p;
    const int64_t before = pad[2 * p], after = pad[2 * p + 1];
    const int64_t n = input.size(d);
    SG_CHECK(n + before + after >= 0, ValueError, op, ": padding (", before, ", ", after,
             ") of dim ", d, " of ", input.describe(), " leaves a negative size ",
             n + before + after);
    if (before == 0 && after == 0) continue;
    if (constant) {
      y = pad_constant(y, d, before, after, value.value_or(0.0));
    } else if (mode == "reflect") {
      SG_CHECK(before < n && after < n, ValueError, op, ": reflect padding (", before, ", ",
               after, ") of dim ", d, " of ", input.describe(), " must be less than its size ",
               n, "; use \"replicate\" or pad less");
      y = pad_indexed(y, d, before, after, Fill::kReflect);
    } else if (circular) {
      // What a negative amount on one side leaves is all the other side can wrap to.
      const int64_t kept = n + (before < 0 ? before : 0) + (after < 0 ? after : 0);
      SG_CHECK(before <= kept && after <= kept, ValueError, op, ": circular padding (", before,
               ", ", after, ") of dim ", d, " of ", input.describe(), " wraps around more than "
               "once: each amount must be at most ", kept, " (the size",
               kept == n ? "" : " left after cropping", "); pad less or use \"replicate\"");
      y = pad_indexed(y, d, before, after, Fill::kCircular);
    } else {
      SG_CHECK(n > 0, ValueError, op, ": replicate padding of dim ", d, " of ",
               input.describe(), " needs at least one element to repeat");
      y = pad_indexed(y, d, before, after, Fill::kReplicate);
    }
  }
  return y.is_same(input) ? clone(input) : y;
}

}  // namespace streamgrad
