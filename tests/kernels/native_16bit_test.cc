// The 16-bit kernels that take float16/bfloat16 operands themselves (registered
// native_16bit: element-wise and batch norm, on every device) against the widening rule
// spelt out (kernels/widen.h: 16-bit operands copied to float32, the float32 kernel, each
// result rounded by copy): the same bits, in one launch. The host widens rows or blocks
// inside its loops, so its checks run at every instruction-set level and thread count.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/functors/convert.h"
#include "kernels/kernels.h"
#include "kernels/nn_kernels.h"
#include "runtime/base/half.h"
#include "runtime/runtime.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/level_test_util.h"

namespace streamgrad {
namespace {

using kernels::View;
using testing::Buffer;
using testing::LaunchLog;
using testing::Shape;

// The widening rule spelt out for each element-wise kernel: the 16-bit operands copied
// to float32, the float32 kernel, its result rounded by copy. Every device computes 16-bit
// operands itself, in one launch, and must give the same bits.
template <typename H>
void check_elementwise_16(const Device& d) {
  const Stream s = current_stream(d);
  const int64_t rows = 33, cols = 65, n = rows * cols;
  std::vector<H> av, bv;
  for (int64_t i = 0; i < n; ++i) av.push_back(H::from_float(3 * std::sin(0.37f * i)));
  for (int64_t j = 0; j < cols; ++j) bv.push_back(H::from_float(std::cos(0.91f * j) - 0.2f));
  const Buffer<H> a(d, av), b(d, bv);
  Buffer<float> a32(d, av.size(), 0.0f), b32(d, bv.size(), 0.0f);
  kernels::copy(s, a32.view(), a.view());
  kernels::copy(s, b32.view(), b.view());
  const Shape shape({rows, cols}), row({rows, cols}, {0, 1});  // b broadcast along rows
  using Call = std::function<void(const View&, const View&, const View&)>;
  const std::vector<std::pair<const char*, Call>> calls = {
      {"exp", [&](const View& o, const View& x, const View&) {
         kernels::unary(s, kernels::Unary::kExp, o, x);
       }},
      {"gelu", [&](const View& o, const View& x, const View&) {
         kernels::unary(s, kernels::Unary::kGelu, o, x);
       }},
      // The scalar is rounded to the 16-bit dtype first (kernels.h), natively too; the
      // float32 reference is given it rounded.
      {"mul 0.1", [&](const View& o, const View& x, const View&) {
         const double tenth = o.dtype == DType::kFloat32 ? H::from_float(0.1f).to_float() : 0.1;
         kernels::unary_scalar(s, kernels::UnaryScalar::kMul, o, x, tenth);
       }},
      {"add", [&](const View& o, const View& x, const View& y) {
         kernels::binary(s, kernels::Binary::kAdd, o, x, y);
       }},
      {"relu_backward", [&](const View& o, const View& x, const View& y) {
         kernels::binary(s, kernels::Binary::kReluBackward, o, x, y);
       }},
      {"axpy 0.1", [&](const View& o, const View& x, const View& y) {
         kernels::axpy(s, o, x, y, 0.1);
       }},
  };
  for (const auto& [name, call] : calls) {
    INFO(name << " on " << d);
    Buffer<H> out(d, av.size(), H{});
    {
      LaunchLog log;
      call(out.view(shape), a.view(shape), b.view(row));
      CHECK(log.count() == 1);
    }
    Buffer<float> out32(d, av.size(), 0.0f);
    call(out32.view(shape), a32.view(shape), b32.view(row));
    Buffer<H> rounded(d, av.size(), H{});
    kernels::copy(s, rounded.view(), out32.view());
    const std::vector<H> got = out.read(), want = rounded.read();
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("element " << i);
      REQUIRE(got[i].bits == want[i].bits);
    }
  }
}

TEST_CASE("16-bit element-wise kernels give the widening rule's bits in one launch",
          "[kernels][amp]") {
  const Device d = testing::test_device();
  check_elementwise_16<Half>(d);
  check_elementwise_16<BFloat16>(d);
}

// The host's 16-bit element-wise loops (kernels/host/loops_elementwise16.cc) at every level
// and at one and two threads: rows shared out over threads and cut into many blocks,
// transposed (strided) and broadcast operands, in place, and values with NaN, infinities,
// signed zeros, subnormals and overflow among them; against the rule spelt out at the same
// level and thread count.
template <typename H>
void check_host_levels_16() {
  const Device d("cpu");
  const Stream s = current_stream(d);
  const int64_t rows = 301, cols = 517, n = rows * cols;  // > 2 threads' grain
  std::vector<H> av, bv;
  for (float f : testing::mixed_values<float>(static_cast<size_t>(n), 7)) {
    av.push_back(kernels::cpu::convert<H>(f));
  }
  for (float f : testing::mixed_values<float>(static_cast<size_t>(cols), 11)) {
    bv.push_back(kernels::cpu::convert<H>(f));
  }
  const Buffer<H> a(d, av), b(d, bv);
  Buffer<float> a32(d, av.size(), 0.0f), b32(d, bv.size(), 0.0f);
  kernels::copy(s, a32.view(), a.view());
  kernels::copy(s, b32.view(), b.view());
  using Call = std::function<void(const View&, const View&, const View&)>;
  const std::vector<std::pair<const char*, Call>> calls = {
      {"tanh", [&](const View& o, const View& x, const View&) {
         kernels::unary(s, kernels::Unary::kTanh, o, x);
       }},
      {"relu", [&](const View& o, const View& x, const View&) {
         kernels::unary(s, kernels::Unary::kRelu, o, x);
       }},
      {"pow 3", [&](const View& o, const View& x, const View&) {
         kernels::unary_scalar(s, kernels::UnaryScalar::kPow, o, x, 3.0);
       }},
      {"div", [&](const View& o, const View& x, const View& y) {
         kernels::binary(s, kernels::Binary::kDiv, o, x, y);
       }},
      {"pow", [&](const View& o, const View& x, const View& y) {
         kernels::binary(s, kernels::Binary::kPow, o, x, y);
       }},
      {"gelu_backward", [&](const View& o, const View& x, const View& y) {
         kernels::binary(s, kernels::Binary::kGeluBackward, o, x, y);
       }},
      {"axpy -0.3", [&](const View& o, const View& x, const View& y) {
         kernels::axpy(s, o, x, y, -0.3);
       }},
  };
  // Row-major, and the same values walked column by column (every operand strided).
  const Shape plain({rows, cols}), row({rows, cols}, {0, 1});
  const Shape turned({cols, rows}, {1, cols}), turned_row({cols, rows}, {1, 0});
  for (CpuCapability level : testing::machine_levels()) {
    for (int threads : {1, 2}) {
      testing::CapabilityScope at_level(level);
      testing::ThreadsScope with_threads(threads);
      for (const auto& [name, call] : calls) {
        for (const bool transposed : {false, true}) {
          for (const bool in_place : {false, true}) {
            INFO(name << " at " << cpu_capability_name(level) << ", " << threads
                      << " threads, transposed " << transposed << ", in place " << in_place);
            const Shape& x_shape = transposed ? turned : plain;
            const Shape& y_shape = transposed ? turned_row : row;
            Buffer<H> out(d, av.size(), H{});
            if (in_place) kernels::copy(s, out.view(), a.view());
            {
              testing::LaunchLog log;
              call(out.view(x_shape), in_place ? out.view(x_shape) : a.view(x_shape),
                   b.view(y_shape));
              CHECK(log.count() == 1);
            }
            Buffer<float> out32(d, av.size(), 0.0f);
            call(out32.view(x_shape), a32.view(x_shape), b32.view(y_shape));
            Buffer<H> want(d, av.size(), H{});
            kernels::copy(s, want.view(), out32.view());
            const std::vector<H> got = out.read(), rounded = want.read();
            size_t differ = 0;
            while (differ < got.size() && got[differ].bits == rounded[differ].bits) ++differ;
            INFO("first difference at element " << differ);
            REQUIRE(differ == got.size());
          }
        }
      }
    }
  }
}

TEST_CASE("the host's 16-bit element-wise loops give the rule's bits at every level",
          "[kernels][amp][levels]") {
  check_host_levels_16<Half>();
  check_host_levels_16<BFloat16>();
}

// A value's bits, whatever its storage type (16 or 32 bits).
template <typename T>
uint32_t raw_bits(T v) {
  if constexpr (std::is_same<T, float>::value) {
    uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    return u;
  } else {
    return v.bits;
  }
}

// Batch norm of 16-bit data H beside statistics and parameters P (float32, or H), forward
// with running statistics and backward with every gradient, against the widening rule
// spelt out: everything copied to float32, the float32 kernels, each result rounded by
// copy (the backward's mean and var from the forward's rounded ones, as a widened call
// reads them). Every device takes 16-bit data itself: one launch each way.
template <typename H, typename P>
void check_batch_norm_16(const Device& d, int64_t n = 4, int64_t c = 3, int64_t sp = 50) {
  const Stream s = current_stream(d);
  const size_t cs = static_cast<size_t>(c);
  const Shape ncs({n, c, sp}), ch({c});
  auto wave = [](size_t count, float scale, float shift) {
    std::vector<float> v;
    for (size_t i = 0; i < count; ++i) v.push_back(2 * std::sin(scale * i) + shift);
    return v;
  };
  auto as = [](const std::vector<float>& v, auto like) {
    using T = decltype(like);
    std::vector<T> out;
    for (float f : v) out.push_back(kernels::cpu::convert<T>(f));
    return out;
  };
  const size_t numel = static_cast<size_t>(n * c * sp);
  const Buffer<H> x(d, as(wave(numel, 0.37f, 0.5f), H{})), g(d, as(wave(numel, 0.53f, 0), H{}));
  const Buffer<P> w(d, as(wave(cs, 1.3f, 1), P{})), b(d, as(wave(cs, 0.7f, 0), P{}));
  const std::vector<float> rm_start = wave(cs, 2.1f, 0), rv_start = wave(cs, 0.3f, 2.5f);
  Buffer<P> rm(d, as(rm_start, P{})), rv(d, as(rv_start, P{}));
  Buffer<H> out(d, numel, H{}), gin(d, numel, H{});
  Buffer<P> mean(d, cs, P{}), var(d, cs, P{}), gw(d, cs, P{}), gb(d, cs, P{});
  const View wv = w.view(ch), bv = b.view(ch), ginv = gin.view(ncs), gwv = gw.view(ch),
             gbv = gb.view(ch);
  const kernels::RunningStats running{rm.view(ch), rv.view(ch), 0.25};
  {
    LaunchLog log;
    kernels::batch_norm_forward(s, out.view(ncs), mean.view(ch), var.view(ch), x.view(ncs), &wv,
                                &bv, 1e-5, &running);
    CHECK(log.count() == 1);
  }
  {
    LaunchLog log;
    kernels::batch_norm_backward(s, &ginv, &gwv, &gbv, g.view(ncs), x.view(ncs), mean.view(ch),
                                 var.view(ch), &wv, 1e-5);
    CHECK(log.count() == 1);
  }
  // The rule spelt out.
  auto widened = [&](const auto& buf, const Shape& shape) {
    Buffer<float> f(d, static_cast<size_t>(shape.numel()), 0.0f);
    kernels::copy(s, f.view(shape), buf.view(shape));
    return f;
  };
  auto rounded = [&](const Buffer<float>& f, const Shape& shape, auto like) {
    Buffer<decltype(like)> r(d, static_cast<size_t>(shape.numel()), decltype(like){});
    kernels::copy(s, r.view(shape), f.view(shape));
    return r.read();
  };
  const Buffer<P> rm0(d, as(rm_start, P{})), rv0(d, as(rv_start, P{}));
  const Buffer<float> x32 = widened(x, ncs), g32 = widened(g, ncs), w32 = widened(w, ch),
                      b32 = widened(b, ch);
  Buffer<float> rm32 = widened(rm0, ch), rv32 = widened(rv0, ch);
  Buffer<float> out32(d, numel, 0.0f), mean32(d, cs, 0.0f), var32(d, cs, 0.0f);
  const View w32v = w32.view(ch), b32v = b32.view(ch);
  const kernels::RunningStats running32{rm32.view(ch), rv32.view(ch), 0.25};
  kernels::batch_norm_forward(s, out32.view(ncs), mean32.view(ch), var32.view(ch),
                              x32.view(ncs), &w32v, &b32v, 1e-5, &running32);
  const Buffer<float> mean_r = widened(mean, ch), var_r = widened(var, ch);
  Buffer<float> gin32(d, numel, 0.0f), gw32(d, cs, 0.0f), gb32(d, cs, 0.0f);
  const View gin32v = gin32.view(ncs), gw32v = gw32.view(ch), gb32v = gb32.view(ch);
  kernels::batch_norm_backward(s, &gin32v, &gw32v, &gb32v, g32.view(ncs), x32.view(ncs),
                               mean_r.view(ch), var_r.view(ch), &w32v, 1e-5);
  auto same_bits = [](const char* what, const auto& got, const auto& want) {
    INFO(what);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("element " << i);
      CHECK(raw_bits(got[i]) == raw_bits(want[i]));
    }
  };
  same_bits("out", out.read(), rounded(out32, ncs, H{}));
  same_bits("mean", mean.read(), rounded(mean32, ch, P{}));
  same_bits("var", var.read(), rounded(var32, ch, P{}));
  same_bits("running_mean", rm.read(), rounded(rm32, ch, P{}));
  same_bits("running_var", rv.read(), rounded(rv32, ch, P{}));
  same_bits("grad_in", gin.read(), rounded(gin32, ncs, H{}));
  same_bits("grad_weight", gw.read(), rounded(gw32, ch, P{}));
  same_bits("grad_bias", gb.read(), rounded(gb32, ch, P{}));
}

TEST_CASE("16-bit batch norm gives the widening rule's bits in one launch each way",
          "[kernels][amp]") {
  const Device d = testing::test_device();
  check_batch_norm_16<Half, float>(d);
  check_batch_norm_16<BFloat16, float>(d);
  check_batch_norm_16<Half, Half>(d);
  check_batch_norm_16<BFloat16, BFloat16>(d);
}

// The host's (kernels/host/batch_norm.cc, rows widened into buffers) at every level and at
// one and two threads: 70 channels of 16 x 97 values, walked in groups of 42 channels
// (two runs on two threads), rows with an odd tail for the lanes; against the rule spelt
// out at the same setting.
TEST_CASE("the host's 16-bit batch norm gives the rule's bits at every level",
          "[kernels][amp][levels]") {
  const Device d("cpu");
  for (CpuCapability level : testing::machine_levels()) {
    for (int threads : {1, 2}) {
      INFO(cpu_capability_name(level) << ", " << threads << " threads");
      testing::CapabilityScope at_level(level);
      testing::ThreadsScope with_threads(threads);
      check_batch_norm_16<Half, float>(d, 16, 70, 97);
      check_batch_norm_16<BFloat16, BFloat16>(d, 16, 70, 97);
    }
  }
}

}  // namespace
}  // namespace streamgrad
