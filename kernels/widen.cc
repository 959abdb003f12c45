#include "kernels/widen.h"

#include <memory>

#include "kernels/checks.h"
#include "kernels/kernels.h"
#include "runtime/base/half.h"

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace {

// The view restricted to one element along its stride-0 dims: the elements scratch holds.
View distinct_elements(const View& v) {
  View c = v;
  for (int64_t d = 0; d < v.dim(); ++d) {
    if (v.strides[d] == 0) c.sizes[d] = 1;
  }
  return c;
}

}  // namespace

View slice_of(const View& v, int64_t dim, int64_t begin, int64_t n) {
  View s = v;
  s.sizes[dim] = n;
  if (v.strides[dim] != 0) {
    s.data = static_cast<char*>(v.data) +
             begin * v.strides[dim] * static_cast<int64_t>(element_size(v.dtype));
  }
  return s;
}

double round_to(DType dtype, double value) {
  const float f = static_cast<float>(value);
  if (dtype == DType::kFloat16) return Half::from_float(f).to_float();
  if (dtype == DType::kBFloat16) return BFloat16::from_float(f).to_float();
  return value;
}

bool Widen::applies(absl::Span<const View* const> views) {
  bool any = false;
  DType seen = DType::kFloat32;
  for (const View* v : views) {
    if (v == nullptr || !is_floating(v->dtype)) continue;
    if (!is_reduced_floating(v->dtype) || (any && v->dtype != seen)) return false;
    seen = v->dtype;
    any = true;
  }
  return any;
}

bool Widen::applies_mixed(absl::Span<const View* const> activations,
                          absl::Span<const View* const> params) {
  if (!applies(activations)) return false;
  DType low = DType::kFloat32;
  for (const View* v : activations) {
    if (v != nullptr) low = v->dtype;
  }
  for (const View* v : params) {
    if (v != nullptr && v->dtype != low && v->dtype != DType::kFloat32) return false;
  }
  return true;
}

// A float32 buffer for `like`'s elements. With compact_broadcast, dims of stride 0 keep
// one element, and the returned view repeats it with stride 0 again.
View Widen::scratch(const View& like, bool compact_broadcast) {
  View s;
  s.dtype = DType::kFloat32;
  s.sizes = like.sizes;
  s.strides.resize(like.sizes.size());
  int64_t n = 1;
  for (int64_t d = like.dim() - 1; d >= 0; --d) {
    const bool repeat = compact_broadcast && like.strides[d] == 0;
    s.strides[d] = repeat ? 0 : n;
    if (!repeat) n *= like.sizes[d];
  }
  buffers_.push_back(Storage::allocate(static_cast<size_t>(n > 0 ? n : 1) * sizeof(float),
                                       stream_));
  s.data = buffers_.back().data();
  return s;
}

View Widen::in(const View& v) {
  if (!is_reduced_floating(v.dtype)) return v;
  check_view(kernel_, "input", v);
  const View s = scratch(v, /*compact_broadcast=*/true);
  if (v.numel() > 0) {
    copy(stream_, distinct_elements(s), distinct_elements(v));
  }
  return s;
}

View Widen::out(const View& v, bool keep_values) {
  if (!is_reduced_floating(v.dtype)) return v;
  check_output(kernel_, "out", v);
  const View s = scratch(v, /*compact_broadcast=*/false);
  if (keep_values && v.numel() > 0) copy(stream_, s, v);
  outputs_.emplace_back(v, s);
  return s;
}

const View* Widen::in(const View* v) {
  if (v == nullptr) return nullptr;
  held_.push_back(std::make_unique<View>(in(*v)));
  return held_.back().get();
}

const View* Widen::out(const View* v, bool keep_values) {
  if (v == nullptr) return nullptr;
  held_.push_back(std::make_unique<View>(out(*v, keep_values)));
  return held_.back().get();
}

void Widen::finish() {
  for (const auto& o : outputs_) {
    if (o.first.numel() > 0) copy(stream_, o.first, o.second);
  }
  outputs_.clear();
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad
