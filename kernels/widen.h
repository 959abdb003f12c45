// Internal to the kernels: float16 and bfloat16 operands of the arithmetic kernels are
// computed in float32. Each 16-bit input is converted into a float32 scratch buffer, the
// float32 kernel runs, and each 16-bit output is rounded back (round to nearest even)
// from its float32 result: one rounding per output element, the reference framework's
// "compute in float32, store in 16 bits" for these dtypes on cpu. Sums, matrix products
// and convolutions therefore accumulate in float32 (or, for sums, in double).
//
//   if (cpu::Widen::applies({&out, &a, &b})) {
//     cpu::Widen w(stream, "add");
//     binary(stream, op, w.out(out), w.in(a), w.in(b));  // the float32 kernel
//     w.finish();                                        // round into out
//     return;
//   }
//
// Scratch comes from the caching allocator on the launch's stream and is released when
// the Widen goes out of scope (stream-ordered reuse makes that safe before the queued
// work ran), so it counts in memory statistics like any other allocation. An input with
// stride 0 (a broadcast) is widened once per distinct element, not per position.
// Kernels that only move or convert elements (copy, fill, cat, stack) take the 16-bit
// dtypes directly and never widen.
//
// Thread-safety: a Widen belongs to one call on one thread. Failure: as the kernel's own
// checks, which run on the widened views (same sizes; dtype float32); mixed dtypes are
// not widened (applies() is false), so those checks report them. in() and out() check
// the views they are given (ValueError naming the kernel), and nothing is written to an
// output before finish().
#ifndef STREAMGRAD_KERNELS_WIDEN_H_
#define STREAMGRAD_KERNELS_WIDEN_H_

#include <initializer_list>
#include <memory>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "kernels/view.h"
#include "runtime/base/device.h"
#include "runtime/backend/stream.h"
#include "runtime/memory/storage.h"

namespace streamgrad {
namespace kernels {
namespace cpu {

// Batched kernels (a dim of independent items: matmul's batch, the images of col2im, the
// channels of batch_norm, dim 0 of element-wise ops) widen at most
// widen_chunk_elements(stream) float32 elements per launch, all operands together; above
// it the caller splits the batch into chunks (batch_chunk), so the scratch of a 16-bit
// call stays bounded however large the batch: the chunks reuse one buffer. On cpu and sim
// streams the bound is 1 MiB, which keeps a chunk's float32 copies in the cache from
// the widening to the kernel to the rounding. On cuda streams it is only a cap on the
// scratch (256 MiB): a GPU gains nothing from small chunks, and each chunk is launches
// of its own (a widening copy per input, the kernel, a rounding copy per output) — cut at
// the host's bound, a ResNet step under float16 launched 6,047 kernels against float32's
// 220 (bench/RESULTS.md).
constexpr int64_t kWidenChunkElements = int64_t{1} << 18;
constexpr int64_t kWidenChunkElementsCuda = int64_t{1} << 26;

inline int64_t widen_chunk_elements(const Stream& stream) {
  return stream.device().type() == DeviceType::kCuda ? kWidenChunkElementsCuda
                                                     : kWidenChunkElements;
}

// Items of `per_item` elements per chunk on `stream` (at least one).
inline int64_t batch_chunk(const Stream& stream, int64_t per_item) {
  const int64_t budget = widen_chunk_elements(stream);
  return per_item >= budget ? 1 : budget / (per_item > 0 ? per_item : 1);
}

// Items [begin, begin + n) of `v` along `dim` (a view with stride 0 there keeps its data
// pointer: a broadcast operand is the same for every item).
View slice_of(const View& v, int64_t dim, int64_t begin, int64_t n);
inline View batch_slice(const View& v, int64_t begin, int64_t n) { return slice_of(v, 0, begin, n); }

// For a widened call on `stream` whose views all share `out`'s sizes along their first dim
// of size > 1 (element-wise kernels; pooling's planes): when `operands` float32 copies of
// out would exceed widen_chunk_elements(stream) elements, calls fn(dim, begin, n) for
// chunks along that dim and returns true; returns false (nothing called) otherwise.
// Each chunk is then one call, widened on its own.
template <typename Fn>
bool for_each_chunk(const Stream& stream, const View& out, int64_t operands, Fn&& fn) {
  int64_t dim = 0;
  while (dim < out.dim() && out.sizes[dim] <= 1) ++dim;
  if (dim == out.dim()) return false;
  const int64_t items = out.sizes[dim];
  const int64_t chunk = batch_chunk(stream, operands * (out.numel() / items));
  if (chunk >= items) return false;
  for (int64_t i = 0; i < items; i += chunk) fn(dim, i, chunk < items - i ? chunk : items - i);
  return true;
}

// `value` as a `dtype` element holds it (through float32, as copy converts): the scalar
// operand of a 16-bit kernel, which kernels.h rounds to the tensor's dtype first.
double round_to(DType dtype, double value);

class Widen {
 public:
  // Whether the floating views among `views` (nullptr entries skipped) are all of one
  // 16-bit dtype, and there is at least one.
  // A span, not a vector: the check runs on every kernel call and must not allocate.
  static bool applies(absl::Span<const View* const> views);
  // Mixed precision's normalisation layout: `activations` all of one 16-bit dtype and
  // `params` (nullptr skipped) each of that dtype or float32.
  static bool applies_mixed(absl::Span<const View* const> activations,
                            absl::Span<const View* const> params);

  Widen(const Stream& stream, const char* kernel) : stream_(stream), kernel_(kernel) {}
  Widen(const Widen&) = delete;
  Widen& operator=(const Widen&) = delete;

  // `v` itself unless it is float16 or bfloat16; otherwise a float32 copy with v's sizes.
  View in(const View& v);
  // For a 16-bit output: a contiguous float32 scratch of v's sizes that finish() rounds
  // into v; `keep_values` copies v's values in first (for kernels that accumulate into
  // their output). Other dtypes: v itself.
  View out(const View& v, bool keep_values = false);
  // A pointer form for optional views: nullptr stays nullptr. The View lives as long as
  // this Widen.
  const View* in(const View* v);
  const View* out(const View* v, bool keep_values = false);
  // Enqueues the rounding copies into the outputs.
  void finish();

 private:
  View scratch(const View& like, bool compact_broadcast);

  Stream stream_;
  const char* kernel_;
  std::vector<Storage> buffers_;
  std::vector<std::pair<View, View>> outputs_;  // (16-bit destination, float32 scratch)
  std::vector<std::unique_ptr<View>> held_;     // for the pointer forms
};

// Kernels that only move or select elements (im2col, index_select, gather, where) take
// 16-bit views as they are on cpu and sim; their cuda kernels take the arithmetic dtypes
// only, so there they widen.
inline bool widen_to_move(const Stream& stream, absl::Span<const View* const> views) {
  return stream.device().type() == DeviceType::kCuda && Widen::applies(views);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_WIDEN_H_
