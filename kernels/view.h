// View: what a kernel sees of a tensor — a pointer, a dtype, sizes and strides.
//
// Sizes and strides are Dims: up to six inline, so that making a view (several per op)
// allocates nothing; Dims converts to and from std::vector<int64_t>.
// `data` points at the element with all indices 0 (the storage offset is already
// applied); strides are in elements and may be 0 (broadcast) but never negative.
// byte_range() is the span of memory the view can touch, as launches declare it.
// Thread-safety: a plain value. Failure: none (kernels validate what they need).
#ifndef STREAMGRAD_KERNELS_VIEW_H_
#define STREAMGRAD_KERNELS_VIEW_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/container/inlined_vector.h"

#include "runtime/backend/launch.h"
#include "runtime/base/dtype.h"

namespace streamgrad {
namespace kernels {

class Dims : public absl::InlinedVector<int64_t, 6> {
 public:
  using Base = absl::InlinedVector<int64_t, 6>;
  using Base::Base;
  Dims(const std::vector<int64_t>& v) : Base(v.begin(), v.end()) {}  // NOLINT: implicit
  operator std::vector<int64_t>() const { return std::vector<int64_t>(begin(), end()); }
};
// Dims against Dims has its own overloads: otherwise absl's InlinedVector comparison and
// the std::vector ones below (through the conversion) are both candidates, which GCC
// reports as ambiguous under -Wall.
inline bool operator==(const Dims& a, const Dims& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}
inline bool operator!=(const Dims& a, const Dims& b) { return !(a == b); }
inline bool operator==(const Dims& a, const std::vector<int64_t>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}
inline bool operator==(const std::vector<int64_t>& a, const Dims& b) { return b == a; }
inline bool operator!=(const Dims& a, const std::vector<int64_t>& b) { return !(a == b); }
inline bool operator!=(const std::vector<int64_t>& a, const Dims& b) { return !(b == a); }

struct View {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  Dims sizes;
  Dims strides;

  int64_t dim() const { return static_cast<int64_t>(sizes.size()); }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
  bool is_contiguous() const {
    int64_t expected = 1;
    for (int64_t i = dim() - 1; i >= 0; --i) {
      if (sizes[i] != 1 && strides[i] != expected) return false;
      expected *= sizes[i];
    }
    return true;
  }
  MemRange byte_range() const {
    if (numel() == 0) return MemRange{data, 0};
    int64_t last = 0;
    for (int64_t i = 0; i < dim(); ++i) last += (sizes[i] - 1) * strides[i];
    return MemRange{data, static_cast<size_t>(last + 1) * element_size(dtype)};
  }
};

// Contiguous strides for `sizes`.
inline std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= sizes[i];
  }
  return strides;
}

}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_VIEW_H_
