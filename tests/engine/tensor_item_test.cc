// Tensor::item<T> converting as libtorch's item<T> (engine/tensor_item.cc), and
// Tensor::record_stream (engine/tensor.cc). Links //engine without //ops.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "engine/factories.h"
#include "engine/tensor.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace {

Tensor f32(float v, Device d = Device("cpu")) {
  return from_vector<float>({v}, {}, TensorOptions().device(d));
}
Tensor f64(double v) {
  return from_vector<double>({v}, {}, TensorOptions().dtype(DType::kFloat64));
}
Tensor i64(int64_t v) { return from_vector<int64_t>({v}, {}); }
Tensor b8(bool v) { return from_vector<bool>({v}, {}); }

template <typename F>
std::string value_error(F&& fn) {
  try {
    fn();
  } catch (const ValueError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<another exception: ") + e.what() + ">";
  }
  return "<no exception>";
}

TEST_CASE("item<T> converts floating tensors as libtorch does", "[tensor][item]") {
  const Device d(GENERATE(as<std::string>{}, "cpu", "sim:0"));
  const Tensor x = f32(2.5f, d);
  CHECK(x.item<double>() == 2.5);
  CHECK(x.item<float>() == 2.5f);
  CHECK(x.item<int64_t>() == 2);
  CHECK(x.item<int32_t>() == 2);
  CHECK(x.item<bool>());
  CHECK(x.item<Half>().to_float() == 2.5f);
  CHECK(x.item<BFloat16>().to_float() == 2.5f);
  // Toward zero, as a C++ cast.
  CHECK(f32(-2.75f, d).item<int64_t>() == -2);
  CHECK_FALSE(f32(0.0f, d).item<bool>());
  CHECK(f32(-0.25f, d).item<bool>());
  // float64 to float rounds; float32 to double is exact.
  CHECK(f64(0.1).item<float>() == 0.1f);
  CHECK(f32(0.1f, d).item<double>() == static_cast<double>(0.1f));
  // 0-dim or not: one element is what counts.
  CHECK(from_vector<float>({4}, {1, 1}).item<double>() == 4);
  CHECK(scalar_tensor(0.5, TensorOptions().dtype(DType::kFloat16)).item<double>() == 0.5);
  CHECK(scalar_tensor(3, TensorOptions().dtype(DType::kBFloat16)).item<int64_t>() == 3);
}

TEST_CASE("item<T> of NaN, infinity and out-of-range values follows libtorch's overflow rule",
          "[tensor][item]") {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::nan("");
  // To floating types: NaN and infinity pass, a finite value must fit.
  CHECK(std::isinf(f64(inf).item<float>()));
  CHECK(std::isnan(f64(nan).item<float>()));
  CHECK(std::isinf(f64(-inf).item<Half>().to_float()));
  CHECK(f64(65504).item<Half>().to_float() == 65504);
  const std::string big = value_error([] { f64(1e300).item<float>(); });
  CHECK_THAT(big, Catch::Contains("item<float>()") && Catch::Contains("1e+300") &&
                      Catch::Contains("float64[] on cpu") && Catch::Contains("without overflow"));
  CHECK_THAT(value_error([] { f64(70000).item<Half>(); }), Catch::Contains("Half"));
  CHECK_THAT(value_error([] { f64(1e39).item<BFloat16>(); }), Catch::Contains("BFloat16"));
  CHECK(f64(1e300).item<double>() == 1e300);
  // To integral types: NaN, infinity and values out of range are errors.
  CHECK_THAT(value_error([&] { f64(nan).item<int64_t>(); }), Catch::Contains("int64_t"));
  CHECK_THAT(value_error([&] { f32(static_cast<float>(inf)).item<int32_t>(); }),
             Catch::Contains("int32_t"));
  CHECK_THAT(value_error([] { f64(3e9).item<int32_t>(); }), Catch::Contains("3e+09"));
  CHECK(f64(3e9).item<int64_t>() == 3000000000);
  CHECK(f64(-2147483648.0).item<int32_t>() == std::numeric_limits<int32_t>::min());
  CHECK_THAT(value_error([] { f64(std::ldexp(1.0, 63)).item<int64_t>(); }),
             Catch::Contains("without overflow"));
  CHECK(f64(-std::ldexp(1.0, 63)).item<int64_t>() == std::numeric_limits<int64_t>::min());
  // To bool nothing overflows: non-zero, NaN included, is true.
  CHECK(f64(nan).item<bool>());
  CHECK(f64(1e300).item<bool>());
}

TEST_CASE("item<T> converts int64 and bool tensors as libtorch does", "[tensor][item]") {
  CHECK(i64(7).item<double>() == 7.0);
  CHECK(i64(-7).item<float>() == -7.0f);
  CHECK(i64(7).item<int32_t>() == 7);
  CHECK(i64(7).item<bool>());
  CHECK_FALSE(i64(0).item<bool>());
  CHECK(i64(9007199254740993).item<int64_t>() == 9007199254740993);  // exact, not via double
  CHECK(i64(2048).item<Half>().to_float() == 2048);
  const std::string msg = value_error([] { i64(3000000000).item<int32_t>(); });
  CHECK_THAT(msg, Catch::Contains("3000000000") && Catch::Contains("int64[] on cpu") &&
                      Catch::Contains("int32_t"));
  CHECK_THAT(value_error([] { i64(100000).item<Half>(); }), Catch::Contains("Half"));
  CHECK(b8(true).item<double>() == 1.0);
  CHECK(b8(true).item<int64_t>() == 1);
  CHECK(b8(false).item<float>() == 0.0f);
  CHECK(b8(true).item<Half>().to_float() == 1.0f);
  CHECK(b8(true).item<bool>());
}

TEST_CASE("item<T> of a tensor that is not one element is an Error naming shape and dtype",
          "[tensor][item][errors]") {
  const Tensor x = zeros({2, 3});
  CHECK_THROWS_AS(x.item<double>(), Error);
  CHECK_THROWS_WITH(x.item<double>(), Catch::Contains("float32[2, 3]") &&
                                          Catch::Contains("6 elements"));
  CHECK_THROWS_WITH(zeros({0}, TensorOptions().dtype(DType::kInt64)).item<int64_t>(),
                    Catch::Contains("int64[0]"));
  CHECK_THROWS_AS(Tensor().item<float>(), Error);
}

TEST_CASE("record_stream keeps a tensor's memory from reuse until the stream's work is done",
          "[tensor][record_stream][S8]") {
  SimSchedulerOptions o;
  o.kind = SimSchedulerKind::kDeterministic;  // queued work runs only when the host waits
  SimSchedulerScope scope(o);
  const Stream alloc_stream = Stream::create("sim:0");  // new: no cached blocks
  const Stream reader = Stream::create("sim:0");
  StreamGuard guard(alloc_stream);
  void* first = nullptr;
  {
    Tensor t = empty({256}, TensorOptions().device("sim:0"));
    first = t.data_ptr();
    sleep(reader, 10);  // stands for a kernel on `reader` that reads t
    t.record_stream(reader);
    CHECK_FALSE(t.storage().used_only_on(alloc_stream));
  }
  Tensor early = empty({256}, TensorOptions().device("sim:0"));
  CHECK(early.data_ptr() != first);  // reuse now would race with the reader
  reader.synchronize();
  Tensor later = empty({256}, TensorOptions().device("sim:0"));
  CHECK(later.data_ptr() == first);
}

TEST_CASE("record_stream errors name the tensor and the stream", "[tensor][record_stream]") {
  const Tensor t = zeros({2}, TensorOptions().device("sim:0"));
  try {
    t.record_stream(Stream::default_for(Device("sim:1")));
    FAIL("no exception");
  } catch (const DeviceError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("record_stream") &&
                                          Catch::Contains("float32[2] on sim:0") &&
                                          Catch::Contains("sim:1"));
  }
  CHECK_THROWS_AS(Tensor().record_stream(current_stream("sim:0")), Error);
  // The tensor's own device's streams are fine, its own stream included.
  t.record_stream(t.stream());
  zeros({3}).record_stream(current_stream("cpu"));
}

}  // namespace
}  // namespace streamgrad
