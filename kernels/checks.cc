#include "kernels/checks.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/dispatch/strided.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace {

bool ranges_intersect(const View& a, const View& b) {
  const MemRange ra = a.byte_range(), rb = b.byte_range();
  if (ra.bytes == 0 || rb.bytes == 0) return false;
  const auto* pa = static_cast<const char*>(ra.ptr);
  const auto* pb = static_cast<const char*>(rb.ptr);
  return pa < pb + rb.bytes && pb < pa + ra.bytes;
}

// Same elements at the same positions: strides only matter on dims of size > 1.
bool same_positions(const View& a, const View& b) {
  if (a.data != b.data || a.dtype != b.dtype || a.sizes != b.sizes) return false;
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (a.sizes[d] > 1 && a.strides[d] != b.strides[d]) return false;
  }
  return true;
}

}  // namespace

std::string describe(const View& v) {
  std::string s = absl::StrCat(dtype_name(v.dtype), " [", absl::StrJoin(v.sizes, ", "), "]");
  if (v.strides.size() != v.sizes.size() || !v.is_contiguous()) {
    absl::StrAppend(&s, " strides [", absl::StrJoin(v.strides, ", "), "]");
  }
  return s;
}

void check_view(const char* kernel, const char* what, const View& v) {
  SG_CHECK(v.strides.size() == v.sizes.size(), ValueError, kernel, ": ", what, " has ",
           v.sizes.size(), " sizes but ", v.strides.size(), " strides");
  SG_CHECK(v.dim() <= kMaxDims, ValueError, kernel, ": ", what, " has rank ", v.dim(),
           "; kernels support at most ", kMaxDims, " dims");
  for (int64_t d = 0; d < v.dim(); ++d) {
    SG_CHECK(v.sizes[d] >= 0 && v.strides[d] >= 0, ValueError, kernel, ": ", what, " ",
             describe(v), " has a negative size or stride");
  }
  SG_CHECK(v.data != nullptr || v.numel() == 0, ValueError, kernel, ": ", what, " ",
           describe(v), " has no data");
}

void check_contiguous(const char* kernel, const char* what, const View& v, int64_t rank) {
  check_view(kernel, what, v);
  SG_CHECK(v.dim() == rank && v.is_contiguous(), ValueError, kernel, ": ", what,
           " must be a contiguous ", rank, "-D view, got ", describe(v));
}

void check_output(const char* kernel, const char* what, const View& v) {
  check_view(kernel, what, v);
  if (v.numel() == 0) return;  // nothing is written; contiguous strides of [2, 0] hold a 0
  for (int64_t d = 0; d < v.dim(); ++d) {
    SG_CHECK(v.strides[d] != 0 || v.sizes[d] <= 1, ValueError, kernel, ": ", what, " ",
             describe(v), " is written but has stride 0 on dim ", d,
             " (a broadcast view); write to a materialised tensor");
  }
}

void check_floating(const char* kernel, const char* what, const View& v) {
  SG_CHECK(is_floating(v.dtype), ValueError, kernel, ": ", what, " is ", describe(v),
           "; expected float32 or float64");
}

void check_dtype(const char* kernel, const char* what, const View& v, DType want) {
  SG_CHECK(v.dtype == want, ValueError, kernel, ": ", what, " is ", describe(v),
           "; expected ", dtype_name(want));
}

void check_same_dtype(const char* kernel, const char* what_a, const View& a,
                      const char* what_b, const View& b) {
  SG_CHECK(a.dtype == b.dtype, ValueError, kernel, ": ", what_a, " is ", describe(a),
           " but ", what_b, " is ", describe(b), "; all views must have one dtype");
}

void check_same_sizes(const char* kernel, const char* what_a, const View& a,
                      const char* what_b, const View& b) {
  SG_CHECK(a.sizes == b.sizes, ValueError, kernel, ": ", what_a, " is ", describe(a),
           " but ", what_b, " is ", describe(b),
           "; sizes must match (broadcast inputs with stride 0)");
}

void check_no_partial_overlap(const char* kernel, const char* what_out, const View& out,
                              const char* what_in, const View& in) {
  if (!ranges_intersect(out, in) || same_positions(out, in)) return;
  const bool proven = out.data == in.data || (out.is_contiguous() && in.is_contiguous());
  SG_CHECK(!proven, ValueError, kernel, ": ", what_out, " ", describe(out), " overlaps ",
           what_in, " ", describe(in),
           " without being the same view; write to a separate buffer");
}

void check_disjoint(const char* kernel, const char* what_out, const View& out,
                    const char* what_in, const View& in) {
  SG_CHECK(!ranges_intersect(out, in), ValueError, kernel, ": ", what_out, " ",
           describe(out), " overlaps ", what_in, " ", describe(in),
           "; this kernel needs separate buffers");
}

void check_dim(const char* kernel, int64_t dim, const View& v) {
  SG_CHECK(dim >= 0 && dim < v.dim(), ValueError, kernel, ": dim ", dim,
           " is out of range for ", describe(v), "; expected 0 <= dim < ", v.dim());
}

void check_floating_out_a_b(const char* kernel, const View& out, const View& a, const View& b) {
  check_output(kernel, "out", out);
  check_view(kernel, "a", a);
  check_view(kernel, "b", b);
  check_floating(kernel, "out", out);
  check_same_dtype(kernel, "out", out, "a", a);
  check_same_dtype(kernel, "out", out, "b", b);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad
