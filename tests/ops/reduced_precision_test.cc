// Issue 14, must-show 2: every catalogue operator (gradcheck/catalogue.h) runs on float16 and
// bfloat16 inputs and agrees with its float32 result, forward and backward, on cpu, sim:0
// and cuda:0 where there is one (the interpreted CUDA device in CI's asan pass): there the
// cuda kernels compute in float32 over 16-bit storage, through the same widening.
//
// The float32 reference gets the same values as the 16-bit run (the 16-bit inputs read
// back exactly), so the difference measures only what the 16-bit run rounds: each
// kernel's output (one rounding, kernels/widen.h) and, in composite ops, every
// intermediate tensor. Tolerances, per element, |low - ref| <= atol + rtol * |ref|:
//   float16:  rtol = atol = 2^-9   (4 times the 2^-11 relative error of one rounding)
//   bfloat16: rtol = atol = 2^-6   (4 times bfloat16's 2^-8)
// The factor 4 leaves room for composites (softmax, losses, norms) that round each of
// their intermediate tensors, and for gradients, which round again at every node.
// Integer and bool outputs (argmax, comparisons) must be equal. Outputs of an op that
// casts (to(float32)) may have another dtype; they are compared all the same.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "engine/backward.h"
#include "engine/factories.h"
#include "gradcheck/catalogue.h"
#include "ops/ops.h"
#include "runtime/runtime.h"
#include "tests/device_names.h"
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace {

struct Tolerance {
  double rtol, atol;
};

Tolerance tolerance_for(DType t) {
  return t == DType::kFloat16 ? Tolerance{1.0 / 512, 1.0 / 512} : Tolerance{1.0 / 64, 1.0 / 64};
}

std::vector<double> as_doubles(const Tensor& t) { return to(t, DType::kFloat64).to_vector<double>(); }

// The worst |low - ref| / (atol + rtol |ref|) over the elements (<= 1 passes); NaN and Inf
// must sit at the same places.
double worst_ratio(const Tensor& low, const Tensor& ref, Tolerance tol, std::string* where) {
  const std::vector<double> a = as_doubles(low), b = as_doubles(ref);
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(b[i]) || std::isinf(b[i])) {
      const bool same = std::isnan(b[i]) ? std::isnan(a[i]) : a[i] == b[i];
      if (!same) {
        *where = "element " + std::to_string(i) + ": " + std::to_string(a[i]) + " vs " +
                 std::to_string(b[i]);
        return INFINITY;
      }
      continue;
    }
    const double r = std::abs(a[i] - b[i]) / (tol.atol + tol.rtol * std::abs(b[i]));
    if (!(r <= worst)) {
      worst = std::isnan(r) ? INFINITY : r;
      *where = "element " + std::to_string(i) + ": " + std::to_string(a[i]) + " vs " +
               std::to_string(b[i]);
    }
  }
  return worst;
}

// `in` as a leaf of `dtype` (floating inputs only), keeping requires_grad.
TensorList cast_inputs(const TensorList& in, DType dtype) {
  TensorList out;
  for (const Tensor& t : in) {
    if (!t.defined() || !is_floating(t.dtype())) {
      out.push_back(t);
      continue;
    }
    Tensor c = to(t.detach(), dtype).detach();
    if (t.requires_grad()) c.requires_grad_(true);
    out.push_back(c);
  }
  return out;
}

struct Outcome {
  double worst = 0;
  std::string detail;
};

// Runs `op` on the 16-bit inputs and on their float32 copies and compares outputs and the
// gradients of sum(outputs * weights) for every input that requires grad.
Outcome compare_op(const OpSpec& op, Device device, DType dtype) {
  const TensorList base = op.make_inputs(device, /*seed=*/3);
  const TensorList low = cast_inputs(base, dtype);
  const TensorList ref = cast_inputs(low, DType::kFloat32);
  const TensorList out_low = op.fn(low), out_ref = op.fn(ref);
  REQUIRE(out_low.size() == out_ref.size());
  const Tolerance tol = tolerance_for(dtype);
  Outcome o;
  auto note = [&](double r, const std::string& what, const std::string& where) {
    if (r > o.worst) {
      o.worst = r;
      o.detail = what + " " + where;
    }
  };
  TensorList diff_low, diff_ref, seeds_low, seeds_ref;
  for (size_t i = 0; i < out_low.size(); ++i) {
    const Tensor& a = out_low[i];
    const Tensor& b = out_ref[i];
    if (!a.defined()) continue;
    INFO(op.name << " output " << i << ": " << a.describe() << " vs " << b.describe());
    REQUIRE(a.sizes() == b.sizes());
    if (!is_floating(a.dtype())) {
      CHECK(as_doubles(a) == as_doubles(b));
      continue;
    }
    // The 16-bit run keeps the 16-bit dtype unless the op converts on purpose.
    if (is_floating(b.dtype()) && b.dtype() == DType::kFloat32) {
      CHECK((a.dtype() == dtype || a.dtype() == DType::kFloat32));
    }
    std::string where;
    note(worst_ratio(a, b, tol, &where), "output " + std::to_string(i), where);
    if (a.requires_grad() && b.requires_grad()) {
      // Weights in [0.5, 1.5) so that gradients of sums do not cancel to exact zeros.
      const Tensor w = add(rand(a.sizes(), TensorOptions().device(a.device())), 0.5);
      diff_low.push_back(a);
      diff_ref.push_back(b);
      seeds_low.push_back(to(w, a.dtype()));
      seeds_ref.push_back(to(to(w, a.dtype()), b.dtype()));
    }
  }
  if (diff_low.empty()) return o;
  TensorList in_low, in_ref;
  for (size_t i = 0; i < low.size(); ++i) {
    if (low[i].defined() && low[i].requires_grad()) {
      in_low.push_back(low[i]);
      in_ref.push_back(ref[i]);
    }
  }
  if (in_low.empty()) return o;
  const TensorList g_low = grad(diff_low, in_low, seeds_low, false, false, /*allow_unused=*/true);
  const TensorList g_ref = grad(diff_ref, in_ref, seeds_ref, false, false, /*allow_unused=*/true);
  for (size_t i = 0; i < g_low.size(); ++i) {
    if (!g_low[i].defined() || !g_ref[i].defined()) {
      CHECK(g_low[i].defined() == g_ref[i].defined());
      continue;
    }
    CHECK(g_low[i].dtype() == in_low[i].dtype());  // a leaf's gradient has its dtype
    std::string where;
    note(worst_ratio(g_low[i], g_ref[i], tol, &where), "grad " + std::to_string(i), where);
  }
  return o;
}

TEST_CASE("every catalogue op agrees with float32 in float16 and bfloat16 on every device",
          "[ops][amp]") {
  const DType dtype = GENERATE(DType::kFloat16, DType::kBFloat16);
  const Device device(GENERATE(from_range(testing::device_names())));
  manual_seed(7);
  int checked = 0;
  Outcome worst;
  std::string worst_op;
  for (const OpSpec& op : op_catalogue()) {
    INFO(op.name << " (" << op.notes << ") in " << dtype << " on " << device);
    Outcome o;
    try {
      o = compare_op(op, device, dtype);
    } catch (const Error& e) {
      FAIL_CHECK("threw: " << e.what());
      continue;
    }
    INFO("worst at " << o.detail);
    CHECK(o.worst <= 1.0);
    if (o.worst > worst.worst) {
      worst = o;
      worst_op = op.name;
    }
    ++checked;
  }
  // The margin, for the record (bench/RESULTS.md quotes it).
  std::cout << dtype << " on " << device << ": " << checked << " ops; the closest to the "
            << "tolerance is " << worst_op << " at " << worst.worst << " of it (" << worst.detail
            << ")\n";
  synchronize(device);
  CHECK(checked == static_cast<int>(op_catalogue().size()));
}

TEST_CASE("large 16-bit inputs, split into chunks by the kernels, agree with float32",
          "[ops][amp]") {
  // Big enough that on cpu and sim batch_norm, relu and max_pool widen a few items at a
  // time (kernels/widen.h; cuda takes batch_norm and relu in 16 bits and widens max_pool
  // whole; conv2d widens whole for its library); the catalogue's small inputs never split. Each op on its own, so that both runs see the same input values
  // (in a chain, a rounded conv output may move a max-pool's winner and send a gradient
  // elsewhere).
  const DType dtype = GENERATE(DType::kFloat16, DType::kBFloat16);
  const Device device(GENERATE(from_range(testing::device_names())));
  manual_seed(13);
  const TensorOptions f32 = TensorOptions().device(device);
  const Tensor img = randn({32, 16, 28, 28}, f32);
  const Tensor kernel = mul(randn({16, 16, 3, 3}, f32), 0.1);
  const Tensor w = add(rand({16}, f32), 0.5), b = randn({16}, f32);
  Conv2dParams p;
  p.padding = {1, 1};
  struct Case {
    const char* name;
    TensorList inputs;
    std::function<Tensor(const TensorList&)> fn;
  };
  const std::vector<Case> cases = {
      {"conv2d", {img, kernel}, [&](const TensorList& t) { return conv2d(t[0], t[1], Tensor(), p); }},
      {"batch_norm", {img, w, b},
       [](const TensorList& t) { return batch_norm(t[0], t[1], t[2], Tensor(), Tensor(), true); }},
      {"relu", {img}, [](const TensorList& t) { return relu(t[0]); }},
      {"max_pool2d", {img}, [](const TensorList& t) { return max_pool2d(t[0], {2, 2}); }},
  };
  const Tolerance tol = tolerance_for(dtype);
  for (const Case& c : cases) {
    TensorList low, ref;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      // batch_norm's weight and bias stay float32 (mixed precision); the rest is 16-bit.
      const bool param = std::string(c.name) == "batch_norm" && i > 0;
      const Tensor l = param ? c.inputs[i] : to(c.inputs[i], dtype);
      low.push_back(l.detach().requires_grad_(true));
      ref.push_back(to(l, DType::kFloat32).detach().requires_grad_(true));
    }
    const Tensor y = c.fn(low), yf = c.fn(ref);
    std::string where;
    const double fr = worst_ratio(y, yf, tol, &where);
    INFO(c.name << " in " << dtype << " on " << device << ": output worst at " << where);
    CHECK(y.dtype() == dtype);
    CHECK(fr <= 1.0);
    const Tensor seed = to(add(rand(y.sizes(), f32), 0.5), dtype);
    const TensorList g = grad({y}, low, {seed});
    const TensorList gf = grad({yf}, ref, {to(seed, DType::kFloat32)});
    for (size_t i = 0; i < g.size(); ++i) {
      // A weight's gradient sums over 32 x 28 x 28 positions of 16-bit products.
      const bool summed = i > 0;
      const Tolerance t = summed ? Tolerance{4 * tol.rtol, 4 * tol.atol} : tol;
      const double r = worst_ratio(g[i], gf[i], t, &where);
      INFO("gradient " << i << " " << g[i].describe() << ": worst at " << where);
      CHECK(r <= 1.0);
    }
  }
}

TEST_CASE("16-bit conv2d runs the device's convolution library on float32 copies",
          "[ops][amp]") {
  const DType dtype = GENERATE(DType::kFloat16, DType::kBFloat16);
  const Device device(GENERATE(from_range(testing::device_names())));
  manual_seed(14);
  const TensorOptions f32 = TensorOptions().device(device);
  const Tensor xf = randn({2, 3, 6, 6}, f32), wf = mul(randn({4, 3, 3, 3}, f32), 0.3);
  const Tensor x = to(xf, dtype).requires_grad_(true), w = to(wf, dtype).requires_grad_(true);
  const Tensor seed = to(add(rand({2, 4, 3, 3}, f32), 0.5), dtype);
  Conv2dParams p;
  p.padding = {1, 1};
  p.stride = {2, 2};
  const std::string library = device.type() == DeviceType::kCuda ? "cudnn" : "onednn";
  // Widened whole: a copy per operand in, the float32 plan, a rounding copy per result.
  auto only_library_and_copies = [&](const std::vector<std::string>& names, const char* plan,
                                     size_t copies) {
    INFO(dtype << " on " << device);
    CHECK(std::count(names.begin(), names.end(), library + plan) == 1);
    CHECK(std::count(names.begin(), names.end(), "copy") == static_cast<std::ptrdiff_t>(copies));
    CHECK(names.size() == copies + 1);
  };
  Tensor y;
  TensorList g;
  {
    testing::KernelNames seen;
    y = conv2d(x, w, Tensor(), p);
    only_library_and_copies(seen.names, "_conv2d", 3);
    seen.names.clear();
    g = grad({y}, {x, w}, {seed});
    only_library_and_copies(seen.names, "_conv2d_backward", 5);
  }
  REQUIRE(y.dtype() == dtype);
  REQUIRE(g[1].dtype() == dtype);
  // The float32 convolution of the same 16-bit values, rounded once.
  const Tensor x32 = to(x.detach(), DType::kFloat32).requires_grad_(true);
  const Tensor w32 = to(w.detach(), DType::kFloat32).requires_grad_(true);
  const Tensor y32 = conv2d(x32, w32, Tensor(), p);
  const TensorList g32 = grad({y32}, {x32, w32}, {to(seed, DType::kFloat32)});
  CHECK(to(y, DType::kFloat32).to_vector<float>() == to(to(y32, dtype), DType::kFloat32).to_vector<float>());
  for (size_t i = 0; i < 2; ++i) {
    CHECK(to(g[i], DType::kFloat32).to_vector<float>() ==
          to(to(g32[i], dtype), DType::kFloat32).to_vector<float>());
  }
}

TEST_CASE("batch_norm moves 16-bit running statistics as float32 does, whole and in chunks",
          "[ops][amp]") {
  // Everything 16-bit (a module converted whole): the kernel widens the running
  // statistics from their values, moves them and rounds them back; the large input is
  // widened a few channels at a time on cpu and sim (kernels/widen.h).
  const DType dtype = GENERATE(DType::kFloat16, DType::kBFloat16);
  const Device device(GENERATE(from_range(testing::device_names())));
  const Shape shape = GENERATE(Shape{4, 3, 5}, Shape{32, 16, 28, 28});
  manual_seed(12);
  const TensorOptions f32 = TensorOptions().device(device);
  const int64_t c = shape[1];
  const Tensor x = to(add(mul(randn(shape, f32), 2.0), 1.0), dtype);
  // Away from 0 and 1, so that a running buffer read as zeros or left alone shows.
  Tensor rm = to(randn({c}, f32), dtype), rv = to(add(rand({c}, f32), 0.5), dtype);
  Tensor rmf = to(rm, DType::kFloat32), rvf = to(rv, DType::kFloat32);
  const Tensor start = to(rm, DType::kFloat32);
  batch_norm(x, Tensor(), Tensor(), rm, rv, /*training=*/true, /*momentum=*/0.5);
  batch_norm(to(x, DType::kFloat32), Tensor(), Tensor(), rmf, rvf, true, 0.5);
  REQUIRE(rm.dtype() == dtype);
  const Tolerance tol = tolerance_for(dtype);
  std::string where;
  INFO(dtype << " on " << device << ", input " << x.describe());
  CHECK(worst_ratio(rm, rmf, tol, &where) <= 1.0);
  CHECK(worst_ratio(rv, rvf, tol, &where) <= 1.0);
  CHECK(sum(abs(sub(rmf, start))).item<float>() > 0);
}

TEST_CASE("batch_norm with a 16-bit input and float32 parameters agrees with float32",
          "[ops][amp]") {
  const DType dtype = GENERATE(DType::kFloat16, DType::kBFloat16);
  const Device device(GENERATE(from_range(testing::device_names())));
  manual_seed(11);
  const TensorOptions f32 = TensorOptions().device(device);
  const Tensor x = to(add(mul(randn({4, 3, 5}, f32), 2.0), 1.0), dtype).requires_grad_(true);
  const Tensor xf = to(x.detach(), DType::kFloat32).requires_grad_(true);
  const Tensor w = add(rand({3}, f32), 0.5).requires_grad_(true);
  const Tensor b = randn({3}, f32).requires_grad_(true);
  const Tensor rm = zeros({3}, f32), rv = ones({3}, f32);
  const Tensor rmf = zeros({3}, f32), rvf = ones({3}, f32);
  const Tensor y = batch_norm(x, w, b, rm, rv, /*training=*/true);
  const Tensor yf = batch_norm(xf, w, b, rmf, rvf, /*training=*/true);
  REQUIRE(y.dtype() == dtype);
  const Tolerance tol = tolerance_for(dtype);
  std::string where;
  CHECK(worst_ratio(y, yf, tol, &where) <= 1.0);
  // Running statistics stay float32 and move as the float32 run's do.
  CHECK(rm.dtype() == DType::kFloat32);
  CHECK(worst_ratio(rm, rmf, tol, &where) <= 1.0);
  CHECK(worst_ratio(rv, rvf, tol, &where) <= 1.0);
  const Tensor seed = add(rand({4, 3, 5}, f32), 0.5);
  const TensorList g = grad({y}, {x, w, b}, {to(seed, dtype)});
  const TensorList gf = grad({yf}, {xf, w, b}, {to(to(seed, dtype), DType::kFloat32)});
  CHECK(g[0].dtype() == dtype);
  CHECK(g[1].dtype() == DType::kFloat32);
  for (size_t i = 0; i < 3; ++i) {
    INFO("gradient " << i << " " << where);
    CHECK(worst_ratio(g[i], gf[i], tol, &where) <= 1.0);
  }
}

}  // namespace
}  // namespace streamgrad
