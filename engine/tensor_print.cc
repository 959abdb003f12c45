// Printing tensors: Tensor::str() (one line) and operator<< (libtorch's layout).
//
// operator<< lays values out as libtorch's does: a 0-dim tensor as its value; a 1-D tensor
// as a column; a 2-D tensor as a matrix whose columns share one width, split into blocks
// "Columns a to b" past 80 characters; a tensor of more dims as one matrix per index of
// its leading dims, each headed "(i,j,.,.) = " (1-based) and indented by one space. One
// number format per printed matrix (per column for 1-D): integral values print without
// decimals, others with 4 decimals in fixed notation, with a common factor "1e+06 *" line
// when they are all large or all small, or in scientific notation when their magnitudes
// span more than 4 decades. A footer closes it. Deliberate differences from libtorch:
//   - the footer names device and dtype in streamgrad's words, "[ sim:0 float32 {2,3} ]"
//     where libtorch writes "[ CPUFloatType{2,3} ]";
//   - the widest magnitude sets the column width (libtorch looks at the largest signed
//     value, so a large negative number can overflow its column);
//   - integral values of 7 to 9 digits print in full (libtorch prints 1234567 in the
//     stream's default precision, as 1.23457e+06);
//   - "Columns a to b" ends its line, and rows after a "scale *" line are indented like the
//     first row (libtorch runs the first row on after the header and shifts later rows).
// Values are read through to_vector, which orders the read on the current stream of the
// tensor's device (on sim it waits for the producer) and gathers non-contiguous views.
// The stream's formatting flags are restored afterwards.
//
// Thread-safety: as any read of the tensor. Failure: what to_vector throws.
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/node.h"
#include "engine/tensor.h"

namespace streamgrad {

namespace {
// 16-bit values print as the float32 values they hold.
template <typename T>
T printable(T v) {
  return v;
}
float printable(Half v) { return v.to_float(); }
float printable(BFloat16 v) { return v.to_float(); }

template <typename T>
std::string format_values(const Tensor& t) {
  const std::vector<T> v = t.to_vector<T>();
  const Shape& sizes = t.sizes();
  std::ostringstream os;
  if (sizes.empty()) {
    os << printable(v[0]);
    return os.str();
  }
  // Row-major nesting with brackets; long tensors are elided in the middle of each row.
  std::vector<int64_t> index(sizes.size(), 0);
  const int64_t n = static_cast<int64_t>(v.size());
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i;
    for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
      index[d] = rem % sizes[d];
      rem /= sizes[d];
    }
    size_t opening = 0;
    for (size_t d = sizes.size(); d-- > 0 && index[d] == 0;) ++opening;
    if (i > 0) os << (opening > 0 ? ",\n " : ", ");
    os << std::string(opening, '[');
    os << printable(v[i]);
    size_t closing = 0;
    for (size_t d = sizes.size(); d-- > 0 && index[d] == sizes[d] - 1;) ++closing;
    os << std::string(closing, ']');
    if (i == 200 && n > 220) {
      os << ", ... (" << n - 201 << " more)";
      break;
    }
  }
  if (n == 0) os << "[]";
  return os.str();
}

template <typename T>
std::vector<double> as_doubles(const Tensor& t) {
  const std::vector<T> v = t.to_vector<T>();
  std::vector<double> out;
  out.reserve(v.size());
  for (const T& x : v) out.push_back(static_cast<double>(printable(x)));
  return out;
}

std::vector<double> values_as_doubles(const Tensor& t) {
  switch (t.dtype()) {
    case DType::kFloat32:
      return as_doubles<float>(t);
    case DType::kFloat64:
      return as_doubles<double>(t);
    case DType::kInt64:
      return as_doubles<int64_t>(t);
    case DType::kBool:
      return as_doubles<bool>(t);
    case DType::kFloat16:
      return as_doubles<Half>(t);
    case DType::kBFloat16:
      return as_doubles<BFloat16>(t);
  }
  return {};
}

constexpr int64_t kLineWidth = 80;

// How one matrix (or column) of values prints.
struct NumberFormat {
  enum Style { kIntegral, kFixed, kScientific };
  Style style = kIntegral;
  int width = 0;
  double scale = 1;  // values print divided by it, after a "scale *" line
};

// Digits before the decimal point of a magnitude (1 for 0).
double digits_of(double magnitude) {
  return magnitude == 0 ? 1 : std::floor(std::log10(magnitude)) + 1;
}

NumberFormat choose_format(const double* v, int64_t n) {
  bool integral = true;
  bool any_finite = false;
  double lo = 0, hi = 0;  // smallest and largest finite magnitude
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(v[i])) continue;
    const double m = std::fabs(v[i]);
    if (v[i] != std::ceil(v[i])) integral = false;
    lo = any_finite ? std::min(lo, m) : m;
    hi = any_finite ? std::max(hi, m) : m;
    any_finite = true;
  }
  const double lo_digits = any_finite ? digits_of(lo) : 1;
  const double hi_digits = any_finite ? digits_of(hi) : 1;
  NumberFormat f;
  if (integral) {
    if (hi_digits > 9) {
      f.style = NumberFormat::kScientific;
      f.width = 11;
    } else {
      f.width = static_cast<int>(hi_digits) + 1;
    }
  } else if (hi_digits - lo_digits > 4) {
    f.style = NumberFormat::kScientific;
    f.width = (std::fabs(hi_digits) > 99 || std::fabs(lo_digits) > 99) ? 12 : 11;
  } else {
    f.style = NumberFormat::kFixed;
    if (hi_digits > 5 || hi_digits < 0) {
      f.width = 7;
      f.scale = std::pow(10, hi_digits - 1);
    } else {
      f.width = hi_digits == 0 ? 7 : static_cast<int>(hi_digits) + 6;
    }
  }
  return f;
}

void set_style(std::ostream& out, const NumberFormat& f) {
  switch (f.style) {
    case NumberFormat::kIntegral:
      out << std::fixed << std::setprecision(0);
      break;
    case NumberFormat::kFixed:
      out << std::fixed << std::setprecision(4);
      break;
    case NumberFormat::kScientific:
      out << std::scientific << std::setprecision(4);
      break;
  }
}

void print_scale(std::ostream& out, const NumberFormat& f, const std::string& indent) {
  if (f.scale == 1) return;
  out.unsetf(std::ios_base::floatfield);
  out << indent << f.scale << " *\n";
  set_style(out, f);
}

// A rows x cols matrix, row-major at v.
void print_matrix(std::ostream& out, const double* v, int64_t rows, int64_t cols,
                  const std::string& indent) {
  const NumberFormat f = choose_format(v, rows * cols);
  set_style(out, f);
  const int64_t indent_width = static_cast<int64_t>(indent.size());
  const int64_t per_line = std::max<int64_t>(1, (kLineWidth - indent_width) / (f.width + 1));
  for (int64_t first = 0; first < cols; first += per_line) {
    const int64_t last = std::min(cols, first + per_line);  // exclusive
    if (per_line < cols) {
      if (first > 0) out << "\n";
      out << indent << "Columns " << first + 1 << " to " << last << "\n";
    }
    print_scale(out, f, indent);
    for (int64_t r = 0; r < rows; ++r) {
      out << indent;
      for (int64_t c = first; c < last; ++c) {
        if (c > first) out << " ";
        out << std::setw(f.width) << v[r * cols + c] / f.scale;
      }
      out << "\n";
    }
  }
}

void print_values(std::ostream& out, const Tensor& t) {
  const std::vector<double> v = values_as_doubles(t);
  const Shape& sizes = t.sizes();
  if (sizes.empty()) {
    out.unsetf(std::ios_base::floatfield);
    out << v[0] << "\n";
    return;
  }
  if (v.empty()) return;
  if (sizes.size() == 1) {
    const NumberFormat f = choose_format(v.data(), static_cast<int64_t>(v.size()));
    set_style(out, f);
    print_scale(out, f, "");
    for (double x : v) out << std::setw(f.width) << x / f.scale << "\n";
    return;
  }
  const int64_t rows = sizes[sizes.size() - 2], cols = sizes.back();
  if (sizes.size() == 2) {
    print_matrix(out, v.data(), rows, cols, "");
    return;
  }
  // One matrix per index of the leading dims, in row-major order.
  const size_t lead = sizes.size() - 2;
  std::vector<int64_t> index(lead, 0);
  for (size_t m = 0; m * rows * cols < v.size(); ++m) {
    if (m > 0) out << "\n";
    out << "(";
    for (int64_t i : index) out << i + 1 << ",";
    out << ".,.) = \n";
    print_matrix(out, v.data() + m * rows * cols, rows, cols, " ");
    for (size_t d = lead; d-- > 0;) {
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
  }
}
}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  std::string values;
  switch (dtype()) {
    case DType::kFloat32:
      values = format_values<float>(*this);
      break;
    case DType::kFloat64:
      values = format_values<double>(*this);
      break;
    case DType::kInt64:
      values = format_values<int64_t>(*this);
      break;
    case DType::kBool:
      values = format_values<bool>(*this);
      break;
    case DType::kFloat16:
      values = format_values<Half>(*this);
      break;
    case DType::kBFloat16:
      values = format_values<BFloat16>(*this);
      break;
  }
  std::string extra;
  if (grad_fn()) {
    extra = absl::StrCat(", grad_fn=", grad_fn()->name());
  } else if (requires_grad()) {
    extra = ", requires_grad";
  }
  return absl::StrCat("tensor(", values, ", ", describe(), extra, ")");
}

std::ostream& operator<<(std::ostream& out, const Tensor& t) {
  if (!t.defined()) return out << "[ Tensor (undefined) ]";
  std::ios saved(nullptr);
  saved.copyfmt(out);
  try {
    print_values(out, t);
  } catch (...) {
    out.copyfmt(saved);
    throw;
  }
  out.copyfmt(saved);
  return out << "[ " << t.device().str() << " " << dtype_name(t.dtype()) << " {"
             << absl::StrJoin(t.sizes(), ",") << "} ]";
}

}  // namespace streamgrad
