// split, chunk and repeat, as the reference's.
//
// split and chunk return views (narrow) that share the input's storage, so their
// gradients are the views' own: each piece's gradient lands in its slice of the input.
// The sizes rule is the reference's: split(x, n) gives ceil(size / n) pieces of n, the
// last one smaller (one empty piece for an empty dim); chunk(x, k) splits into pieces of
// ceil(size / k), so it may return fewer than k pieces (6 into 4 gives 3 of 2).
//
// repeat tiles the input: viewed as [1, s0, 1, s1, ...], expanded to [r0, s0, r1, s1,
// ...] and reshaped (a copy) to [r0 s0, r1 s1, ...]; expand's backward sums the tiles, so
// the gradient of each input element is the sum over its copies, differentiable again.
#include <algorithm>
#include <vector>

#include "absl/strings/str_join.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT: the helpers every op uses

int64_t split_dim(const Tensor& x, int64_t dim, const char* op) {
  check_defined(x, op, "the input");
  SG_CHECK(x.dim() > 0, ValueError, op, ": expected a tensor of at least 1 dimension, got ",
           x.describe(), "; reshape it to [1] first");
  return wrap_dim(dim, x.dim(), op);
}

std::vector<Tensor> pieces(const Tensor& x, int64_t d, const std::vector<int64_t>& sizes) {
  std::vector<Tensor> out;
  out.reserve(sizes.size());
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(narrow(x, d, start, s));
    start += s;
  }
  return out;
}

}  // namespace

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  const int64_t d = split_dim(x, dim, "split");
  const int64_t n = x.size(d);
  SG_CHECK(split_size > 0 || (split_size == 0 && n == 0), ValueError, "split: split_size ",
           split_size, " must be positive (0 only for an empty dimension); dimension ", dim,
           " of ", x.describe(), " has size ", n);
  std::vector<int64_t> sizes;
  for (int64_t start = 0; start < n; start += split_size) {
    sizes.push_back(std::min(split_size, n - start));
  }
  if (sizes.empty()) sizes.push_back(0);  // an empty dim: one empty piece
  return pieces(x, d, sizes);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& split_sizes, int64_t dim) {
  const int64_t d = split_dim(x, dim, "split");
  int64_t total = 0;
  for (int64_t s : split_sizes) {
    SG_CHECK(s >= 0, ValueError, "split: split_sizes [", absl::StrJoin(split_sizes, ", "),
             "] contain the negative size ", s, "; every piece needs a size >= 0");
    total += s;
  }
  SG_CHECK(total == x.size(d), ValueError, "split: split_sizes [",
           absl::StrJoin(split_sizes, ", "), "] sum to ", total, ", but dimension ", dim, " of ",
           x.describe(), " has size ", x.size(d), "; the sizes must add up to it exactly");
  return pieces(x, d, split_sizes);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  const int64_t d = split_dim(x, dim, "chunk");
  SG_CHECK(chunks > 0, ValueError, "chunk: the number of chunks must be positive, got ", chunks,
           " (for ", x.describe(), ")");
  const int64_t n = x.size(d);
  if (n == 0) return pieces(x, d, std::vector<int64_t>(chunks, 0));  // as the reference
  return split(x, (n + chunks - 1) / chunks, d);
}

Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats) {
  check_defined(x, "repeat", "the input");
  SG_CHECK(repeats.size() >= x.sizes().size(), ValueError, "repeat: ", repeats.size(),
           " repeats [", absl::StrJoin(repeats, ", "), "] for ", x.describe(),
           ": give at least one per dimension (", x.dim(), ")");
  Shape tiled, expanded, result;
  const size_t lead = repeats.size() - x.sizes().size();
  for (size_t i = 0; i < repeats.size(); ++i) {
    SG_CHECK(repeats[i] >= 0, ValueError, "repeat: repeats [", absl::StrJoin(repeats, ", "),
             "] for ", x.describe(), " contain the negative count ", repeats[i]);
    const int64_t s = i < lead ? 1 : x.sizes()[i - lead];
    tiled.insert(tiled.end(), {1, s});
    expanded.insert(expanded.end(), {repeats[i], s});
    result.push_back(repeats[i] * s);
  }
  return reshape(expand(reshape(x, tiled), expanded), result);
}

}  // namespace streamgrad
