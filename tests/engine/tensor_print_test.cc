// operator<< on tensors (engine/tensor_print.cc): libtorch's layout with streamgrad's
// footer, for every rank, empty and undefined tensors, views, dtypes and number formats,
// and a read that waits for the producing stream on sim.
//
// This test links //engine without //ops: it also checks that the engine does not call
// the operator methods that //ops defines (engine/tensor.h).
#include <catch2/catch.hpp>
#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "engine/factories.h"
#include "engine/tensor.h"
#include "kernels/kernels.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace {

std::string printed(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

Tensor f32(const std::vector<float>& v, const Shape& shape, Device d = Device("cpu")) {
  return from_vector<float>(v, shape, TensorOptions().device(d));
}

Tensor f64(const std::vector<double>& v, const Shape& shape) {
  return from_vector<double>(v, shape, TensorOptions().dtype(DType::kFloat64));
}

TEST_CASE("operator<< prints 0-dim, 1-D, 2-D, 3-D and 4-D tensors as libtorch lays them out",
          "[tensor][print]") {
  const Device d(GENERATE(as<std::string>{}, "cpu", "sim:0"));
  const std::string footer_device = d.str();
  CHECK(printed(f32({3.5f}, {}, d)) == "3.5\n[ " + footer_device + " float32 {} ]");
  CHECK(printed(f32({1, 2, 3}, {3}, d)) == " 1\n 2\n 3\n[ " + footer_device + " float32 {3} ]");
  CHECK(printed(f32({0.5f, -1.25f, 2}, {3}, d)) ==
        " 0.5000\n-1.2500\n 2.0000\n[ " + footer_device + " float32 {3} ]");
  CHECK(printed(f32({1.5f, 2, 3, 4, 5, 6}, {2, 3}, d)) ==
        " 1.5000  2.0000  3.0000\n"
        " 4.0000  5.0000  6.0000\n"
        "[ " + footer_device + " float32 {2,3} ]");
  const TensorOptions i64 = TensorOptions().dtype(DType::kInt64).device(d);
  CHECK(printed(from_vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7}, {2, 2, 2}, i64)) ==
        "(1,.,.) = \n"
        "  0  1\n"
        "  2  3\n"
        "\n"
        "(2,.,.) = \n"
        "  4  5\n"
        "  6  7\n"
        "[ " + footer_device + " int64 {2,2,2} ]");
  // Leading indices count in row-major order, 1-based.
  CHECK(printed(f32({0, 1, 2, 3}, {1, 2, 1, 2}, d)) ==
        "(1,1,.,.) = \n"
        "  0  1\n"
        "\n"
        "(1,2,.,.) = \n"
        "  2  3\n"
        "[ " + footer_device + " float32 {1,2,1,2} ]");
}

TEST_CASE("operator<< prints the footer alone for empty tensors, and undefined tensors",
          "[tensor][print]") {
  CHECK(printed(Tensor()) == "[ Tensor (undefined) ]");
  CHECK(printed(zeros({0})) == "[ cpu float32 {0} ]");
  CHECK(printed(zeros({2, 0})) == "[ cpu float32 {2,0} ]");
  CHECK(printed(zeros({0, 2, 3}, TensorOptions().device("sim:0"))) ==
        "[ sim:0 float32 {0,2,3} ]");
}

TEST_CASE("operator<< prints a transposed (non-contiguous) view in its logical order",
          "[tensor][print]") {
  const Device d(GENERATE(as<std::string>{}, "cpu", "sim:0"));
  const Tensor base = f32({1, 2, 3, 4, 5, 6}, {2, 3}, d);
  const Tensor t = make_view(base, {3, 2}, {1, 3}, 0);
  REQUIRE_FALSE(t.is_contiguous());
  CHECK(printed(t) == " 1  4\n 2  5\n 3  6\n[ " + d.str() + " float32 {3,2} ]");
  // A column of the matrix: a strided 1-D view with an offset.
  CHECK(printed(make_view(base, {2}, {3}, 1)) == " 2\n 5\n[ " + d.str() + " float32 {2} ]");
}

TEST_CASE("operator<< prints float64, int64, bool and float16", "[tensor][print]") {
  CHECK(printed(f64({0.25, 4}, {2})) == " 0.2500\n 4.0000\n[ cpu float64 {2} ]");
  CHECK(printed(from_vector<int64_t>({3, -12, 7}, {3})) == "  3\n-12\n  7\n[ cpu int64 {3} ]");
  CHECK(printed(from_vector<bool>({true, false, true, true}, {2, 2})) ==
        " 1  0\n 1  1\n[ cpu bool {2,2} ]");
  CHECK(printed(scalar_tensor(0.5, TensorOptions().dtype(DType::kFloat16))) ==
        "0.5\n[ cpu float16 {} ]");
}

TEST_CASE("operator<< picks libtorch's number formats", "[tensor][print]") {
  SECTION("large values share a factor") {
    CHECK(printed(f64({1000000.5, 2500000}, {2})) ==
          "1e+06 *\n 1.0000\n 2.5000\n[ cpu float64 {2} ]");
  }
  SECTION("small values share a factor") {
    CHECK(printed(f64({0.001, 0.002}, {2})) == "0.001 *\n 1.0000\n 2.0000\n[ cpu float64 {2} ]");
  }
  SECTION("a factor in a matrix: every row keeps the same alignment") {
    CHECK(printed(f64({1000000.5, 2000000, 3000000, 4000000}, {2, 2})) ==
          "1e+06 *\n 1.0000  2.0000\n 3.0000  4.0000\n[ cpu float64 {2,2} ]");
  }
  SECTION("magnitudes spanning more than 4 decades: scientific") {
    CHECK(printed(f64({0.001, 123.5}, {2})) ==
          " 1.0000e-03\n 1.2350e+02\n[ cpu float64 {2} ]");
  }
  SECTION("integral values of more than 9 digits: scientific") {
    CHECK(printed(from_vector<int64_t>({12345678901}, {1})) == " 1.2346e+10\n[ cpu int64 {1} ]");
  }
  SECTION("integral values of up to 9 digits print in full") {
    CHECK(printed(from_vector<int64_t>({1234567, -3}, {2})) ==
          " 1234567\n      -3\n[ cpu int64 {2} ]");
  }
  SECTION("the largest magnitude sets the width, negative or not") {
    CHECK(printed(f64({-1.5, 2, 3, -40}, {2, 2})) ==
          " -1.5000   2.0000\n"
          "  3.0000 -40.0000\n"
          "[ cpu float64 {2,2} ]");
  }
  SECTION("NaN and infinity take the finite values' format") {
    const double inf = std::numeric_limits<double>::infinity();
    CHECK(printed(f64({std::nan(""), 1.5, inf}, {3})) ==
          "    nan\n 1.5000\n    inf\n[ cpu float64 {3} ]");
  }
  SECTION("wide matrices split into blocks of columns") {
    std::vector<float> v(30);
    for (int i = 0; i < 30; ++i) v[i] = static_cast<float>(i);
    CHECK(printed(f32(v, {1, 30})) ==
          "Columns 1 to 20\n"
          "  0   1   2   3   4   5   6   7   8   9  10  11  12  13  14  15  16  17  18  19\n"
          "\n"
          "Columns 21 to 30\n"
          " 20  21  22  23  24  25  26  27  28  29\n"
          "[ cpu float32 {1,30} ]");
  }
}

TEST_CASE("operator<< leaves the stream's formatting as it found it", "[tensor][print]") {
  std::ostringstream os;
  os << std::setprecision(3) << scalar_tensor(3.14159) << " " << 0.123456;
  // The 0-dim value uses the stream's precision, as in libtorch; the flags come back.
  CHECK(os.str() == "3.14\n[ cpu float32 {} ] 0.123");
  std::ostringstream os2;
  os2 << f64({0.5, 1.5}, {2}) << " " << 2.0 << " " << std::setw(4) << 7;
  CHECK(os2.str() == " 0.5000\n 1.5000\n[ cpu float64 {2} ] 2    7");
}

TEST_CASE("operator<< on sim waits for the tensor's producer on the current stream",
          "[tensor][print][sim]") {
  SimSchedulerOptions o;
  o.kind = SimSchedulerKind::kDeterministic;
  o.policy = SimPolicy::kAdversarial;
  o.seed = 3;
  SimSchedulerScope scope(o);  // queued work runs only when the host waits for it
  const Stream side = Stream::create("sim:0");
  StreamGuard guard(side);
  Tensor t = zeros({2, 2}, TensorOptions().device("sim:0"));
  sleep(side, 1000);
  kernels::fill(side, t.view(), 7);  // still queued behind the sleep
  CHECK(printed(t) == " 7  7\n 7  7\n[ sim:0 float32 {2,2} ]");
  kernels::fill(side, make_view(t, {2}, {2}, 0).view(), 1.5);  // the first column
  CHECK(printed(make_view(t, {2, 2}, {1, 2}, 0)) ==
        " 1.5000  1.5000\n 7.0000  7.0000\n[ sim:0 float32 {2,2} ]");
}

}  // namespace
}  // namespace streamgrad
