// multinomial, as the reference's torch.multinomial: indices drawn from each row of
// non-negative weights (1-D [categories] or 2-D [rows, categories], not necessarily
// normalised), from the seeded generator of rand / dropout (manual_seed), so the same
// seed gives the same draws on cpu, sim and cuda.
//
// Checks read the weights on the host (a synchronisation, as the reference's own checks):
// a negative, infinite or NaN weight, or a row summing to 0, is a ValueError.
// Without replacement (and for a single draw, as the reference) the draw is the
// exponential race: the num_samples largest p / E, E ~ Exp(1) per category, through
// rand and topk (a composite); a zero weight never wins against a positive one (its key
// is -1), so zero-weight categories come last, in index order, when num_samples exceeds
// the positive ones. With replacement one kernel (kernels::multinomial) inverts each
// row's running sums. Not differentiable: the result is int64.
#include <limits>
#include <tuple>
#include <vector>

#include "engine/grad_mode.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT: the helpers every op uses

constexpr int64_t kMaxCategories = int64_t(1) << 24;  // the reference's limit

// Validates weights `p` ([rows, categories]) on the host; `user` is the input as passed.
void check_weights(const Tensor& p, const Tensor& user) {
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor flat = reshape(p, {-1});
  const Tensor finite_nonneg = all(cat({ge(flat, 0.0), lt(flat, inf)}));
  const Tensor rows_positive = all(gt(sum(p, {1}), 0.0));
  const std::vector<bool> ok = stack({finite_nonneg, rows_positive}).to_vector<bool>();
  SG_CHECK(ok[0], ValueError, "multinomial: probabilities ", user.describe(),
           " contain a negative, infinite or NaN weight; weights must be finite and >= 0");
  SG_CHECK(ok[1], ValueError, "multinomial: a row of probabilities ", user.describe(),
           " sums to 0; every row needs a positive weight");
}

}  // namespace

Tensor multinomial(const Tensor& input, int64_t num_samples, bool replacement) {
  const char* op = "multinomial";
  check_defined(input, op, "the input");
  SG_CHECK(input.dim() == 1 || input.dim() == 2, ValueError, op, ": probabilities ",
           input.describe(), " must be 1-D [categories] or 2-D [rows, categories]");
  SG_CHECK(is_floating(input.dtype()), ValueError, op, ": probabilities ", input.describe(),
           " must be floating (weights, not necessarily normalised); convert them with "
           "to(x, DType::kFloat32)");
  const int64_t categories = input.size(-1);
  SG_CHECK(num_samples > 0, ValueError, op, ": num_samples = ", num_samples,
           " must be positive");
  SG_CHECK(replacement || num_samples <= categories, ValueError, op, ": cannot draw ",
           num_samples, " samples without replacement from the ", categories,
           " categories of ", input.describe(), "; ask for at most ", categories,
           " or pass replacement = true");
  SG_CHECK(categories <= kMaxCategories, ValueError, op, ": ", input.describe(), " has ",
           categories, " categories, more than the 2^24 supported");
  NoGradGuard no_grad;
  const Tensor p = input.dim() == 1 ? unsqueeze(input, 0) : input;
  check_weights(p, input);
  Tensor out;
  if (!replacement || num_samples == 1) {
    const TensorOptions f64 = TensorOptions().dtype(DType::kFloat64).device(p.device());
    const Tensor e = neg(log1p(neg(rand(p.sizes(), f64))));  // Exp(1); 1 - u is in (0, 1]
    const Tensor keys = where(gt(p, 0.0), div(to(p, DType::kFloat64), e), full({}, -1.0, f64));
    out = std::get<1>(topk(keys, num_samples, -1));
  } else {
    out = new_output({p.size(0), num_samples}, DType::kInt64, p.device());
    const RngState at = reserve_rng_counters(static_cast<uint64_t>(out.numel()));
    kernels::multinomial(stream_of(out), out.view(), p.view(), at.seed, at.offset);
  }
  return input.dim() == 1 ? reshape(out, {num_samples}) : out;
}

}  // namespace streamgrad
