// conv2d on cpu and sim through oneDNN: which inputs take that path (float32, while
// set_onednn_enabled allows it), that it is one
// oneDNN kernel each way, with values and gradients within float32 rounding of the
// float64 composed path (unfold and matmul) for strides (those that leave input unread
// too), padding, dilation, groups,
// non-contiguous operands, channel counts that use oneDNN's blocked layouts, and two
// threads; that both gradients in one launch are those of the two passes; that a large
// launch is cut along the batch over the threads, repeats its bits
// and leaves the caller's OpenMP setting alone; that a launch whose blocked copies
// outgrow the cache is cut into parts that fit it, on one thread too; that create_graph
// keeps it differentiable; the refusals of its front door; and its plan cache.
#include <catch2/catch.hpp>
#include <omp.h>

#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/nn_kernels.h"
#include "kernels/plan_cache.h"
#include "runtime/backend/cpu_settings.h"
#include "tests/ops/conv_cases.h"
#include "tests/ops/finite_difference.h"
#include "tests/threads_scope.h"

// Whether this build cuts launches along the batch: not under ThreadSanitizer
// (kernels/host/onednn_conv.cc).
#if defined(__SANITIZE_THREAD__)
#define SG_TEST_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SG_TEST_UNDER_TSAN 1
#endif
#endif

namespace streamgrad {
namespace {

#ifdef SG_TEST_UNDER_TSAN
constexpr bool kCutsLaunches = false;
#else
constexpr bool kCutsLaunches = true;
#endif

using testing::expect_error;
using testing::KernelNames;
using testing::values;

// testing::random_input's values (gap 0), drawn without its spacing check, whose cost
// grows as the square of the size: the cases cut along the batch hold 30,000 elements.
Tensor random_input(const Shape& shape, Device d, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(static_cast<size_t>(numel_of(shape)));
  for (double& x : v) x = u(rng);
  return testing::input(v, shape, d);
}

// The shared cases, then channels in multiples of 16 (oneDNN's blocked layouts and
// reorders) and strides that leave the last rows or columns unread (oneDNN's negative
// right padding). {stride, padding, dilation, groups}
std::vector<testing::ConvCase> cases() {
  std::vector<testing::ConvCase> all(std::begin(testing::kConvCases),
                                     std::end(testing::kConvCases));
  all.push_back({{3, 16, 9, 9}, {32, 16, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}});
  all.push_back({{2, 32, 8, 8}, {16, 32, 3, 3}, {{2, 2}, {1, 1}, {1, 1}, 1}});
  all.push_back({{2, 16, 7, 7}, {32, 16, 1, 1}, {{2, 2}, {0, 0}, {1, 1}, 1}});
  all.push_back({{2, 16, 8, 8}, {32, 16, 1, 1}, {{2, 2}, {0, 0}, {1, 1}, 1}});
  all.push_back({{1, 2, 6, 6}, {2, 2, 3, 3}, {{2, 2}, {0, 0}, {1, 1}, 1}});
  all.push_back({{1, 3, 9, 8}, {4, 3, 2, 2}, {{3, 3}, {1, 0}, {1, 1}, 1}});
  // Large enough to be cut along the batch at two threads: unevenly (2 + 1) and evenly.
  all.push_back({{3, 32, 18, 18}, {32, 32, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}});
  all.push_back({{2, 32, 16, 16}, {64, 32, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}});
  return all;
}

// "input [...], weight [...], groups g", for a case's INFO.
std::string describe(const testing::ConvCase& k) {
  std::ostringstream os;
  os << "input [" << k.x[0] << ", " << k.x[1] << ", " << k.x[2] << ", " << k.x[3]
     << "], weight [" << k.w[0] << ", " << k.w[1] << ", " << k.w[2] << ", " << k.w[3]
     << "], groups " << k.p.groups;
  return os.str();
}

// The devices whose convolution library is oneDNN (cuda:0, where the suite has it, runs
// cuDNN: tests/ops/conv_grad_test.cc).
Device host_device() { return Device(GENERATE(as<std::string>{}, "cpu", "sim:0")); }

TensorOptions f32(Device d) { return TensorOptions().dtype(DType::kFloat32).device(d); }

// A float32 leaf with the values of random_input's float64 one.
Tensor f32_leaf(const Tensor& x64) {
  Tensor x = x64.detach().to(DType::kFloat32);
  x.requires_grad_();
  return x;
}

// Values of float32 `got` within float32 rounding of the float64 `want` (sums of up to a
// few hundred products of values in [-1, 1]; `terms`, where more, widens the bound for a
// sum that cancels to less than its terms): one assertion per tensor (the larger cases
// hold tens of thousands of elements), reporting the first element out of tolerance.
void check_close(const std::vector<double>& g, const std::vector<double>& w,
                 double terms = 0) {
  REQUIRE(g.size() == w.size());
  size_t bad = g.size();
  const double slack = terms * 1e-7;  // float32's epsilon per term: far above a random walk
  for (size_t i = 0; i < g.size() && bad == g.size(); ++i) {
    if (!(std::abs(g[i] - w[i]) <= 2e-5 * (1 + std::abs(w[i])) + slack)) bad = i;
  }
  INFO("first element out of tolerance: " << bad << " of " << g.size() << ": got "
                                          << (bad < g.size() ? g[bad] : 0.0) << ", want "
                                          << (bad < g.size() ? w[bad] : 0.0));
  CHECK(bad == g.size());
}
void check_close(const Tensor& got, const Tensor& want, double terms = 0) {
  REQUIRE(got.sizes() == want.sizes());
  check_close(values(got.to(DType::kFloat64)), values(want), terms);
}

TEST_CASE("float32 conv2d on cpu and sim is one oneDNN kernel each way, within rounding of "
          "the float64 composed path",
          "[ops][conv][onednn]") {
  const Device d = host_device();
  const int threads = GENERATE(1, 2);
  const testing::ThreadsScope scope(threads);
  INFO(d.str() << ", " << threads << " threads");
  uint64_t seed = 100;
  for (const testing::ConvCase& k : cases()) {
    INFO(describe(k));
    const Tensor x64 = random_input(k.x, d, seed++), w64 = random_input(k.w, d, seed++);
    const Tensor y64 = conv2d(x64, w64, Tensor(), k.p);
    REQUIRE(y64.grad_fn()->name() != "MkldnnConvolutionBackward");  // float64: composed
    const Tensor g64 = random_input(y64.sizes(), d, seed++).detach();
    const TensorList want = grad({y64}, {x64, w64}, {g64});

    const Tensor x = f32_leaf(x64), w = f32_leaf(w64), g = g64.to(DType::kFloat32);
    KernelNames seen;
    const Tensor y = conv2d(x, w, Tensor(), k.p);
    CHECK(seen.names == std::vector<std::string>{"onednn_conv2d"});
    CHECK(y.grad_fn()->name() == "MkldnnConvolutionBackward");
    seen.names.clear();
    const TensorList got = grad({y}, {x, w}, {g});
    CHECK(seen.names == std::vector<std::string>{"onednn_conv2d_backward"});
    check_close(y, y64.detach());
    check_close(got[0], want[0]);
    check_close(got[1], want[1]);
  }
}

TEST_CASE("oneDNN conv2d takes non-contiguous operands and a bias, and only the gradients "
          "asked for",
          "[ops][conv][onednn]") {
  const Device d = host_device();
  Conv2dParams p;
  p.padding = {1, 1};
  const Tensor x64 = random_input({2, 3, 6, 5}, d, 200), w64 = random_input({4, 3, 3, 3}, d, 201);
  const Tensor b64 = random_input({4}, d, 202);
  // The transposed views are what conv2d sees; both paths get the same values.
  const auto run = [&](const Tensor& x, const Tensor& w, const Tensor& b) {
    return conv2d(transpose(x, 2, 3), transpose(w, 2, 3), b, p);
  };
  const Tensor y64 = run(x64, w64, b64);
  const Tensor g64 = random_input(y64.sizes(), d, 203).detach();
  const TensorList want = grad({y64}, {x64, w64, b64}, {g64});
  const Tensor x = f32_leaf(x64), w = f32_leaf(w64), b = f32_leaf(b64);
  const Tensor y = run(x, w, b);
  check_close(y, y64.detach());
  const TensorList got = grad({y}, {x, w, b}, {g64.to(DType::kFloat32)});
  for (int i = 0; i < 3; ++i) check_close(got[i], want[i]);

  // A frozen weight: the backward runs the input pass alone.
  const Tensor frozen = w64.detach().to(DType::kFloat32);
  const Tensor y2 = conv2d(x, frozen, Tensor(), p);
  const Tensor seed = ones_like(y2);
  KernelNames seen;
  (void)grad({y2}, {x}, {seed});
  CHECK(seen.names == std::vector<std::string>{"onednn_conv2d_backward_input"});
}

TEST_CASE("conv2d keeps the composed path where oneDNN does not apply or is disabled",
          "[ops][conv][onednn]") {
  const Device d = host_device();
  kernels::Window2d win;
  win.kernel[0] = win.kernel[1] = 3;
  CHECK(kernels::library_conv2d_supported(d, DType::kFloat32, {2, 3, 5, 5}, {4, 3, 3, 3}, win, 1));
  CHECK_FALSE(
      kernels::library_conv2d_supported(d, DType::kFloat64, {2, 3, 5, 5}, {4, 3, 3, 3}, win, 1));
  // 16-bit through float32 copies (tests/ops/reduced_precision_test.cc), while they fit
  // the widening cap: here 2 x 2^26 image elements.
  CHECK(kernels::library_conv2d_supported(d, DType::kFloat16, {2, 3, 5, 5}, {4, 3, 3, 3}, win, 1));
  CHECK(kernels::library_conv2d_supported(d, DType::kFloat32, {64, 64, 128, 128}, {4, 64, 3, 3},
                                          win, 1));
  CHECK_FALSE(kernels::library_conv2d_supported(d, DType::kBFloat16, {64, 64, 128, 128},
                                                {4, 64, 3, 3}, win, 1));
  const Tensor x = f32_leaf(random_input({2, 3, 5, 5}, d, 302));
  const Tensor w = f32_leaf(random_input({4, 3, 3, 3}, d, 303));
  const Tensor on = conv2d(x, w);
  CHECK(on.grad_fn()->name() == "MkldnnConvolutionBackward");
  set_onednn_enabled(false);
  CHECK_FALSE(onednn_enabled());
  CHECK_FALSE(kernels::library_conv2d_supported(d, DType::kFloat32, {2, 3, 5, 5}, {4, 3, 3, 3},
                                                win, 1));
  const Tensor off = conv2d(x, w);
  set_onednn_enabled(true);
  CHECK(off.grad_fn()->name() != "MkldnnConvolutionBackward");
  check_close(on, off.detach().to(DType::kFloat64));
  // The switch is read at the forward: a graph recorded with it on keeps its node.
  set_onednn_enabled(false);
  const Tensor seed = ones_like(on);
  KernelNames seen;
  (void)grad({on}, {x}, {seed});
  set_onednn_enabled(true);
  REQUIRE_FALSE(seen.names.empty());
  for (const std::string& name : seen.names) CHECK(name.rfind("onednn_conv2d_backward", 0) == 0);
}

TEST_CASE("oneDNN conv2d stays differentiable under create_graph", "[ops][conv][onednn]") {
  const Device d = host_device();
  Conv2dParams p;
  p.padding = {1, 1};
  p.groups = 2;
  // Second order of sum(conv2d(x, w) * u) through grad(create_graph): float32 through
  // oneDNN against float64 through the composed path.
  const Tensor x64 = random_input({2, 4, 5, 5}, d, 400), w64 = random_input({6, 2, 3, 3}, d, 401);
  const auto second = [&](const Tensor& x, const Tensor& w) {
    const Tensor y = conv2d(x, w, Tensor(), p);
    const Tensor u = random_input(y.sizes(), d, 402).detach().to(x.dtype());
    const TensorList g = grad({sum(mul(y, u))}, {x, w}, {}, /*retain_graph=*/true,
                              /*create_graph=*/true);
    const Tensor s = add(sum(mul(g[0], g[0])), sum(mul(g[1], g[1])));
    return grad({s}, {x, w});
  };
  const TensorList want = second(x64, w64);
  const TensorList got = second(f32_leaf(x64), f32_leaf(w64));
  check_close(got[0], want[0]);
  check_close(got[1], want[1]);
}

// The two gradients of one launch (grad_out put into oneDNN's layout once, for both) are
// those of the two passes run alone, bit for bit: cut along the batch or not, and for
// the cases whose grad_out stays in the plain layout too.
TEST_CASE("conv2d's gradients in one launch are those of its two passes, bit for bit",
          "[ops][conv][onednn]") {
  const Device d = host_device();
  const int threads = GENERATE(1, 2);
  const testing::ThreadsScope scope(threads);
  INFO(d.str() << ", " << threads << " threads");
  uint64_t seed = 900;
  for (const testing::ConvCase& k : cases()) {
    INFO(describe(k));
    kernels::Window2d win;
    for (int i = 0; i < 2; ++i) {
      win.kernel[i] = k.w[2 + i];
      win.stride[i] = k.p.stride[i];
      win.padding[i] = k.p.padding[i];
      win.dilation[i] = k.p.dilation[i];
    }
    const Tensor x = random_input(k.x, d, seed++).detach().to(DType::kFloat32);
    const Tensor w = random_input(k.w, d, seed++).detach().to(DType::kFloat32);
    const Tensor y = conv2d(x, w, Tensor(), k.p);
    const Tensor g = random_input(y.sizes(), d, seed++).detach().to(DType::kFloat32);
    const Stream s = current_stream(d);
    Tensor gx = zeros(x.sizes(), f32(d)), gw = zeros(w.sizes(), f32(d));
    kernels::library_conv2d_backward_input(s, gx.view(), g.view(), w.view(), win, k.p.groups);
    kernels::library_conv2d_backward_weight(s, gw.view(), g.view(), x.view(), win, k.p.groups);
    Tensor gx2 = full(x.sizes(), 7.0, f32(d)), gw2 = full(w.sizes(), 7.0, f32(d));
    KernelNames seen;
    kernels::library_conv2d_backward(s, gx2.view(), gw2.view(), g.view(), x.view(), w.view(),
                                     win, k.p.groups);
    CHECK(seen.names == std::vector<std::string>{"onednn_conv2d_backward"});
    CHECK(values(gx2.to(DType::kFloat64)) == values(gx.to(DType::kFloat64)));
    CHECK(values(gw2.to(DType::kFloat64)) == values(gw.to(DType::kFloat64)));
  }
}

TEST_CASE("oneDNN's convolution entry points refuse what oneDNN cannot take",
          "[ops][conv][onednn][errors]") {
  const Device d = host_device();
  kernels::Window2d win;
  win.kernel[0] = win.kernel[1] = 3;
  const Tensor x = random_input({2, 3, 5, 5}, d, 500).detach();
  const Tensor w = random_input({4, 3, 3, 3}, d, 501).detach();
  Tensor y = zeros({2, 4, 3, 3}, TensorOptions().dtype(DType::kFloat64).device(d));
  expect_error<ValueError>(
      [&] { kernels::library_conv2d(current_stream(d), y.view(), x.view(), w.view(), win, 1); },
      {"onednn_conv2d", "float64 [2, 3, 5, 5]", "oneDNN convolution takes float32",
       "unfold and matmul"});
  const Tensor x32 = x.to(DType::kFloat32), w32 = w.to(DType::kFloat32);
  Tensor wrong = zeros({2, 4, 4, 3}, f32(d));
  expect_error<ValueError>(
      [&] {
        kernels::library_conv2d(current_stream(d), wrong.view(), x32.view(), w32.view(), win, 1);
      },
      {"onednn_conv2d", "does not match", "expected [2, 4, 3, 3]"});
  Tensor gw = zeros({4, 3, 3, 3}, f32(d));
  expect_error<ValueError>(
      [&] {
        kernels::library_conv2d_backward_weight(current_stream(d), gw.view(), x32.view(),
                                                x32.view(), win, 1);
      },
      {"onednn_conv2d_backward_weight"});
  // Both gradients: sizes that are not the image's and weight's, an output over an input.
  const Tensor g = random_input({2, 4, 3, 3}, d, 502).detach().to(DType::kFloat32);
  Tensor gx = zeros({2, 3, 5, 5}, f32(d)), small = zeros({2, 3, 4, 5}, f32(d));
  expect_error<ValueError>(
      [&] {
        kernels::library_conv2d_backward(current_stream(d), small.view(), gw.view(), g.view(),
                                         x32.view(), w32.view(), win, 1);
      },
      {"onednn_conv2d_backward", "grad_in float32 [2, 3, 4, 5]", "sizes of the image"});
  expect_error<ValueError>(
      [&] {
        kernels::library_conv2d_backward(current_stream(d), gx.view(), gw.view(), g.view(),
                                         gx.view(), w32.view(), win, 1);
      },
      {"onednn_conv2d_backward", "grad_in"});
  Tensor gx64 = gx.to(DType::kFloat64), gw64 = gw.to(DType::kFloat64);
  expect_error<ValueError>(
      [&] {
        kernels::library_conv2d_backward(current_stream(d), gx64.view(), gw64.view(),
                                         g.to(DType::kFloat64).view(), x.view(), w.view(), win,
                                         1);
      },
      {"onednn_conv2d_backward", "oneDNN convolution takes float32"});
}

TEST_CASE("the oneDNN plan cache holds one plan per problem and pass and obeys max_size",
          "[ops][conv][onednn]") {
  testing::walk_plan_cache(onednn_conv_plan_cache(), Device("cpu"), 600);
}

// conv2d of float32 copies of x64 and w64 and both its gradients for grad_out `g`, at
// `threads` threads from a cleared plan cache, which must then hold `plans` plans (per
// pass, one for each size of part); the output's and the gradients' values.
std::vector<std::vector<double>> run_counting_plans(const Tensor& x64, const Tensor& w64,
                                                    const Tensor& g, const Conv2dParams& p,
                                                    int threads, size_t plans) {
  const testing::ThreadsScope scope(threads);
  PlanCache& cache = onednn_conv_plan_cache();
  cache.clear();
  const Tensor x = f32_leaf(x64), w = f32_leaf(w64);
  const Tensor y = conv2d(x, w, Tensor(), p);
  const TensorList got = grad({y}, {x, w}, {g});
  CHECK(cache.size() == plans);
  std::vector<std::vector<double>> all;
  for (const Tensor& t : {y, got[0], got[1]}) all.push_back(values(t.to(DType::kFloat64)));
  return all;
}

TEST_CASE("oneDNN conv2d cuts a large launch along the batch, one part per thread, and "
          "repeats its bits",
          "[ops][conv][onednn]") {
  PlanCache& cache = onednn_conv_plan_cache();
  const Device d = host_device();
  // 3 x 32 x 18 x 18 by 32 x 32 x 3 x 3: 9M multiply-adds, two parts of at least 4M.
  const Tensor x64 = random_input({3, 32, 18, 18}, d, 700);
  const Tensor w64 = random_input({32, 32, 3, 3}, d, 701);
  const Tensor g = random_input({3, 32, 18, 18}, d, 702).detach().to(DType::kFloat32);
  const Conv2dParams p{{1, 1}, {1, 1}, {1, 1}, 1};
  const auto run = [&](int threads, size_t plans) {
    return run_counting_plans(x64, w64, g, p, threads, plans);
  };
  INFO(d.str());
  // oneDNN runs on one OpenMP thread inside each part; a program's own OpenMP setting on
  // the calling thread is left as it was.
  omp_set_num_threads(3);
  const auto one = run(1, 3);  // forward, input and weight gradients over all 3 images
  const size_t cut_plans = kCutsLaunches ? 6 : 3;  // the same over parts of 2 and 1 images
  const auto two = run(2, cut_plans);
  CHECK(run(2, cut_plans) == two);  // bit for bit, run after run
  CHECK(run(1, 3) == one);
  synchronize(d);
  CHECK(omp_get_max_threads() == 3);
  for (size_t t = 0; t < one.size(); ++t) {
    INFO("tensor " << t << " (output, input gradient, weight gradient)");
    check_close(two[t], one[t]);
  }
  cache.clear();
}

// 6 images of 16 x 64 x 64 by 32 x 16 x 1 x 1 at stride 2 (a ResNet's downsampling): 3.1M
// multiply-adds, under the two gemm grains that would share the launch out, but 590K
// values in and out, over two element-wise grains. At two threads the forward is cut into
// parts of 2 + 2 + 1 + 1 images (its copies fit 2 images a part): a plan for each size, and
// the gradients' one each, 4 plans; kept on one thread it made 3 parts of 2, 3 plans.
TEST_CASE("oneDNN conv2d shares out a launch of few multiply-adds over many values",
          "[ops][conv][onednn]") {
  PlanCache& cache = onednn_conv_plan_cache();
  const Device d = host_device();
  const Tensor x64 = random_input({6, 16, 64, 64}, d, 900);
  const Tensor w64 = random_input({32, 16, 1, 1}, d, 901);
  const Tensor g = random_input({6, 32, 32, 32}, d, 902).detach().to(DType::kFloat32);
  const Conv2dParams p{{2, 2}, {0, 0}, {1, 1}, 1};
  const auto run = [&](int threads, size_t plans) {
    return run_counting_plans(x64, w64, g, p, threads, plans);
  };
  INFO(d.str());
  const auto one = run(1, 3);
  const auto two = run(2, kCutsLaunches ? 4 : 3);
  CHECK(run(2, kCutsLaunches ? 4 : 3) == two);  // bit for bit, run after run
  for (size_t t = 0; t < one.size(); ++t) {
    INFO("tensor " << t << " (output, input gradient, weight gradient)");
    check_close(two[t], one[t], t == 2 ? 6 * 32 * 32 : 0);  // a weight's: 6144 pixels
  }
  cache.clear();
}

// 7 images of 32 x 32 x 32 by 32 x 32 x 3 x 3, 66M multiply-adds: an image and its result
// are 256 KiB each in the blocked layout, so the forward's parts (1 MiB of copies at most,
// kernels/host/onednn_conv.cc) hold 4 images and the backward's (the image twice) 2. At
// one thread and at two, that is parts of 4 + 3 images forward and 2 + 2 + 2 + 1 for both
// gradients: two plans per pass, where one launch over all 7 would make one.
TEST_CASE("oneDNN conv2d cuts a launch whose blocked copies outgrow the cache into parts "
          "that fit it, at every thread count",
          "[ops][conv][onednn]") {
  PlanCache& cache = onednn_conv_plan_cache();
  const Device d = host_device();
  const int threads = GENERATE(1, 2);
  const testing::ThreadsScope scope(threads);
  INFO(d.str() << ", " << threads << " threads");
  const Tensor x64 = random_input({7, 32, 32, 32}, d, 800);
  const Tensor w64 = random_input({32, 32, 3, 3}, d, 801);
  const Conv2dParams p{{1, 1}, {1, 1}, {1, 1}, 1};
  const Tensor y64 = conv2d(x64, w64, Tensor(), p);
  const Tensor g64 = random_input(y64.sizes(), d, 802).detach();
  const TensorList want = grad({y64}, {x64, w64}, {g64});
  const auto run = [&] {
    cache.clear();
    const Tensor x = f32_leaf(x64), w = f32_leaf(w64);
    const Tensor y = conv2d(x, w, Tensor(), p);
    const TensorList got = grad({y}, {x, w}, {g64.to(DType::kFloat32)});
    CHECK(cache.size() == (kCutsLaunches ? 6u : 3u));
    return std::vector<Tensor>{y, got[0], got[1]};
  };
  const std::vector<Tensor> got = run();
  check_close(got[0], y64.detach());
  check_close(got[1], want[0]);
  check_close(got[2], want[1], 7 * 32 * 32);  // a weight's gradient sums over 7168 pixels
  const std::vector<Tensor> again = run();
  for (size_t t = 0; t < got.size(); ++t) {
    INFO("tensor " << t << " (output, input gradient, weight gradient)");
    CHECK(values(again[t].to(DType::kFloat64)) == values(got[t].to(DType::kFloat64)));
  }
  cache.clear();
}

}  // namespace
}  // namespace streamgrad
