// The cuda kernels that are more than one element per thread (kernels/cuda/cuda_kernels.h)
// against the cpu kernels: matmul through cuBLAS in every layout the plan distinguishes
// (with and without TF32), sum / max / min and argmax / argmin, the index kernels
// (scatter_reduce's combines included), cumsum, the
// fused optimiser updates, the gradient scaler's unscale-and-check, im2col / col2im / max
// pooling and batch norm. Tolerances per test: bitwise where both devices add in the same
// order, within rounding where the device sums in its own order (cuBLAS, reductions over
// many elements, batch norm).
// Without a GPU (CI) each test case says once that it skipped and why.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/foreach.h"
#include "kernels/kernels.h"
#include "kernels/nn_kernels.h"
#include "runtime/runtime.h"
#include "tests/kernels/cuda/cuda_test_util.h"
#include "tests/kernels/kernel_test_util.h"

namespace streamgrad {
namespace {

namespace k = kernels;
using testing::Buffer;
using testing::check_ulps;
using testing::require_cuda_device;
using testing::Shape;

// a [2, 3, 4] times b [2, 4, 5] in the layouts the plan treats differently, on cpu and on
// cuda:0; cuBLAS sums in its own order, hence the tolerance (k = 4 terms).
template <typename T>
void check_matmul(bool tf32) {
  const std::vector<T> a = testing::random_values<T>(2 * 3 * 4 * 2, -1, 1, 5);
  const std::vector<T> b = testing::random_values<T>(2 * 4 * 5 * 2, -1, 1, 6);
  const std::vector<T> bias = testing::random_values<T>(5, -1, 1, 7);
  struct Case {
    const char* what;
    Shape a, b, out;
    bool bias;
  };
  const Case cases[] = {
      {"row-major", Shape({3, 4}), Shape({4, 5}), Shape({3, 5}), false},
      {"transposed a and b", Shape({4, 3}).transposed(0, 1), Shape({5, 4}).transposed(0, 1),
       Shape({3, 5}), false},
      {"column-major out", Shape({3, 4}), Shape({4, 5}), Shape({5, 3}).transposed(0, 1), false},
      {"packed a, packed out", Shape({3, 4}, {8, 2}), Shape({4, 5}), Shape({3, 5}, {10, 2}),
       false},
      {"bias", Shape({3, 4}), Shape({4, 5}), Shape({3, 5}), true},
      {"bias, column-major out", Shape({3, 4}), Shape({4, 5}), Shape({5, 3}).transposed(0, 1),
       true},
      {"batched, b broadcast", Shape({2, 3, 4}), Shape({2, 4, 5}, {0, 5, 1}), Shape({2, 3, 5}),
       false},
      {"batched, packed b", Shape({2, 3, 4}), Shape({2, 4, 5}, {40, 10, 2}), Shape({2, 3, 5}),
       false},
      {"k = 0 with bias", Shape({3, 0}), Shape({0, 5}), Shape({3, 5}), true},
  };
  const double tol = std::is_same<T, double>::value ? 1e-12 : tf32 ? 2e-2 : 1e-5;
  set_matmul_allow_tf32(tf32);
  for (const Case& c : cases) {
    INFO(c.what << (tf32 ? ", TF32 allowed" : ""));
    std::vector<T> outs[2];
    int i = 0;
    for (const Device d : {Device("cpu"), Device("cuda:0")}) {
      Buffer<T> ba(d, a), bb(d, b), bbias(d, bias), out(d, 40, T(-7));
      const k::View bias_view = bbias.view();
      k::matmul(current_stream(d), out.view(c.out), ba.view(c.a), bb.view(c.b),
                c.bias ? &bias_view : nullptr);
      outs[i++] = out.read();
    }
    for (size_t j = 0; j < outs[0].size(); ++j) {
      CHECK(std::fabs(outs[1][j] - outs[0][j]) <= tol * (1 + std::fabs(outs[0][j])));
    }
  }
  set_matmul_allow_tf32(false);
}

TEMPLATE_TEST_CASE("cuda matmul through cuBLAS equals the cpu's in every layout",
                   "[cuda][kernels][matmul]", float, double) {
  require_cuda_device();
  check_matmul<TestType>(false);
  check_matmul<TestType>(true);  // float64 ignores the switch
}

TEMPLATE_TEST_CASE("cuda reductions and arg reductions equal the cpu's",
                   "[cuda][kernels][reduce]", float, double) {
  using T = TestType;
  require_cuda_device();
  // [3, 4, 5] with ties (few distinct values) and a NaN in one row.
  std::vector<T> x(60);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>((i * 7) % 5) - 2;
  x[23] = std::numeric_limits<T>::quiet_NaN();
  const Shape in({3, 4, 5});
  // out shapes in keepdim form: reduce dim 2, dims {0, 2}, all, none.
  const Shape outs_shapes[] = {Shape({3, 4, 1}), Shape({1, 4, 1}), Shape({1, 1, 1}),
                               Shape({3, 4, 5})};
  for (const Shape& os : outs_shapes) {
    for (const k::Reduce op : {k::Reduce::kSum, k::Reduce::kMax, k::Reduce::kMin}) {
      INFO("reduce " << static_cast<int>(op) << " into " << os.numel() << " outputs");
      std::vector<T> outs[2];
      int i = 0;
      for (const Device d : {Device("cpu"), Device("cuda:0")}) {
        Buffer<T> bx(d, x), out(d, 60, T(-7));
        k::reduce(current_stream(d), op, out.view(os), bx.view(in));
        outs[i++] = out.read();
      }
      check_ulps(outs[1], outs[0], 0);  // small integers: every order sums exactly
    }
  }
  const auto check_arg_reduce = [](const std::vector<T>& data, const Shape& shape, int64_t dim) {
    for (const bool is_max : {true, false}) {
      INFO("arg_reduce of " << shape.numel() << " along dim " << dim << (is_max ? " max" : " min"));
      Shape vs = shape;
      vs.sizes[dim] = 1;
      vs = Shape(vs.sizes);
      const size_t n = data.size();
      std::vector<T> values[2];
      std::vector<int64_t> indices[2];
      int i = 0;
      for (const Device d : {Device("cpu"), Device("cuda:0")}) {
        Buffer<T> bx(d, data), v(d, n, T(0));
        Buffer<int64_t> ix(d, n, int64_t(-1));
        k::arg_reduce(current_stream(d), is_max, v.view(vs), ix.view(vs), bx.view(shape), dim);
        values[i] = v.read();
        indices[i++] = ix.read();
      }
      CHECK(indices[1] == indices[0]);
      check_ulps(values[1], values[0], 0);
    }
  };
  for (int64_t dim = 0; dim < 3; ++dim) check_arg_reduce(x, in, dim);
  // Lines longer than the one-thread-per-output kernels take (32 elements): the block's
  // tree, with ties (the first extreme wins) and a NaN in the second row.
  std::vector<T> y(2 * 300);
  for (size_t j = 0; j < y.size(); ++j) y[j] = static_cast<T>((j * 11) % 7) - 3;
  y[417] = std::numeric_limits<T>::quiet_NaN();
  check_arg_reduce(y, Shape({2, 300}), 1);
  // A long sum (many elements per thread, then the block's tree): within rounding.
  const std::vector<T> big = testing::random_values<T>(100003, -1, 1, 9);
  T sums[2];
  int i = 0;
  for (const Device d : {Device("cpu"), Device("cuda:0")}) {
    Buffer<T> bx(d, big), out(d, 1, T(0));
    k::reduce(current_stream(d), k::Reduce::kSum, out.view(Shape({1})),
              bx.view(Shape({100003})));
    sums[i++] = out.read()[0];
  }
  const double tol = std::is_same<T, float>::value ? 1e-6 : 1e-12;  // one float ulp
  CHECK(std::fabs(sums[1] - sums[0]) <= tol * (1 + std::fabs(sums[0])));
}

TEST_CASE("cuda index kernels equal the cpu's and refuse bad indices, writing nothing",
          "[cuda][kernels][index]") {
  require_cuda_device();
  const std::vector<double> x = testing::random_values<double>(12, -2, 2, 11);
  // Small integers and halves: every order of the atomic sums is exact, so duplicates
  // (index 0 twice) must give the cpu's bits.
  const std::vector<double> src = {1, 2, 3, 4.5, -1, 0.5, 2, 2, 1, -3, 4, 8, 0, 1, 1.5, -2};
  const std::vector<int64_t> idx = {0, 2, 0, 1};
  const std::vector<int64_t> gidx = {2, 0, 1, 1, 0, 2, 2, 2, 0, 1, 1, 0};
  std::vector<double> results[2];
  int i = 0;
  for (const Device d : {Device("cpu"), Device("cuda:0")}) {
    const Stream s = current_stream(d);
    Buffer<double> bx(d, x), bsrc(d, src), out(d, 64, 0.0);
    Buffer<int64_t> bi(d, idx), bg(d, gidx);
    // in [3, 4] read transposed as [4, 3]: rows picked along dim 0; then along dim 1.
    k::index_select(s, out.view(Shape({4, 3}, {3, 1}, 0)),
                    bx.view(Shape({3, 4}).transposed(0, 1)), 0, bi.view());
    k::index_select(s, out.view(Shape({4, 4}, {4, 1}, 12)), bx.view(Shape({4, 3})), 1,
                    bi.view());
    k::gather(s, out.view(Shape({3, 4}, {4, 1}, 28)), bx.view(Shape({3, 4})), 0,
              bg.view(Shape({3, 4})));
    k::index_add(s, out.view(Shape({3, 4}, {4, 1}, 40)), 0, bi.view(), bsrc.view(Shape({4, 4})));
    k::scatter_add(s, out.view(Shape({3, 4}, {4, 1}, 52)), 0, bg.view(Shape({2, 4})),
                   bsrc.view(Shape({2, 4})));
    results[i++] = out.read();
  }
  CHECK(results[1] == results[0]);

  const Device d("cuda:0");
  Buffer<double> bx(d, x), out(d, 8, 7.0);
  Buffer<int64_t> bad(d, std::vector<int64_t>{0, 5});
  CHECK_THROWS_WITH(k::index_select(current_stream(d), out.view(Shape({2, 4})),
                                    bx.view(Shape({3, 4})), 0, bad.view()),
                    Catch::Contains("index 5 (element 1 of index"));
  CHECK(out.read() == std::vector<double>(8, 7.0));
}

TEMPLATE_TEST_CASE("cuda scatter_reduce and cumsum give the cpu's bits",
                   "[cuda][kernels][index]",
                   float, double) {
  using T = TestType;
  require_cuda_device();
  // Powers of two and small integers: every order of the atomic products, maxima and
  // minima is exact, so duplicates (each position of row 0 three times) give the cpu's bits.
  const std::vector<T> src = {2, -0.5, 4, 1, 0.25, -2, 8, 1, 0.5, -1, 2, 4};
  const std::vector<T> self = {1, -3, 0.5, 2, 6, -1, 1, 3};
  const std::vector<int64_t> idx = {0, 1, 0, 1, 2, 2, 0, 1, 3, 3, 3, 3};
  const std::vector<T> line = testing::random_values<T>(3 * 1000, -1, 1, 21);
  std::vector<T> results[2];
  int i = 0;
  for (const Device d : {Device("cpu"), Device("cuda:0")}) {
    const Stream s = current_stream(d);
    Buffer<T> bsrc(d, src), bline(d, line), out(d, 8 * 8 + 2 * 3000, T(0));
    Buffer<int64_t> bi(d, idx);
    int64_t at = 0;
    for (k::IndexCombine op : {k::IndexCombine::kMultiply, k::IndexCombine::kMax,
                               k::IndexCombine::kMin, k::IndexCombine::kAdd}) {
      for (bool with_self : {true, false}) {
        Buffer<T> bself(d, self);
        // self [2, 4], src and index [2, 6] along dim 1.
        k::scatter_reduce(s, bself.view(Shape({2, 4})), 1, bi.view(Shape({2, 6})),
                          bsrc.view(Shape({2, 6})), op, with_self);
        k::copy(s, out.view(Shape({8}, {1}, at)), bself.view(Shape({8})));
        at += 8;
      }
    }
    // [3, 1000] along dim 1 (contiguous lines) and, reversed, along dim 0 of its transpose.
    k::cumsum(s, out.view(Shape({3, 1000}, {1000, 1}, at)), bline.view(Shape({3, 1000})), 1);
    k::cumsum(s, out.view(Shape({1000, 3}, {3, 1}, at + 3000)),
              bline.view(Shape({3, 1000}).transposed(0, 1)), 0, /*reverse=*/true);
    results[i++] = out.read();
  }
  CHECK(results[1] == results[0]);
}

TEMPLATE_TEST_CASE("cuda sgd_update and adam_update give the cpu's bits",
                   "[cuda][kernels][foreach]", float, double) {
  using T = TestType;
  require_cuda_device();
  const std::vector<T> p = testing::random_values<T>(12, -1, 1, 13);
  const std::vector<T> g = testing::random_values<T>(12, -1, 1, 14);
  const std::vector<T> state = testing::random_values<T>(12, 0, 1, 15);
  k::SgdHyper sgd;
  sgd.lr = 0.1;
  sgd.momentum = 0.9;
  sgd.dampening = 0.1;
  sgd.weight_decay = 0.01;
  sgd.nesterov = true;
  k::AdamHyper adam;
  adam.lr = 0.01;
  adam.weight_decay = 0.1;
  std::vector<T> results[2];
  int i = 0;
  for (const Device d : {Device("cpu"), Device("cuda:0")}) {
    const Stream s = current_stream(d);
    Buffer<T> p1(d, p), p2(d, p), p3(d, p), p4(d, p), grad(d, g), buf(d, state), buf2(d, state),
        m(d, state), v(d, state), m2(d, state), v2(d, state);
    // Strided grad (read transposed); a fresh buffer and a used one.
    const Shape rows({3, 4}), cols = Shape({4, 3}).transposed(0, 1);
    k::sgd_update(s, sgd, {{p1.view(rows), grad.view(cols), buf.view(rows), true},
                           {p2.view(rows), grad.view(rows), buf2.view(rows), false}});
    k::adam_update(s, adam, {{p3.view(rows), grad.view(cols), m.view(rows), v.view(rows), 3,
                              false}});
    adam.decoupled = true;
    k::adam_update(s, adam, {{p4.view(rows), grad.view(rows), m2.view(rows), v2.view(rows), 1,
                              true}});
    adam.decoupled = false;
    for (const Buffer<T>* b : {&p1, &p2, &p3, &p4, &buf, &buf2, &m, &v, &m2, &v2}) {
      const std::vector<T> r = b->read();
      results[i].insert(results[i].end(), r.begin(), r.end());
    }
    ++i;
  }
  check_ulps(results[1], results[0], 0);
}

TEMPLATE_TEST_CASE("cuda non_finite_check_and_unscale gives the cpu's bits and flags",
                   "[cuda][kernels][foreach]", float, double) {
  using T = TestType;
  require_cuda_device();
  std::vector<T> clean = testing::random_values<T>(3000, -1000, 1000, 21);
  std::vector<T> dirty = clean;
  dirty[2999] = std::numeric_limits<T>::quiet_NaN();  // the last element of the view below
  const Shape rows({60, 50}), cols = Shape({50, 60}).transposed(0, 1), half({60, 25}, {50, 1});
  for (const bool with_nan : {false, true}) {
    INFO((with_nan ? "a NaN in the last grad" : "finite grads"));
    std::vector<T> results[2];
    float flags[2] = {-1, -1};
    int i = 0;
    for (const Device d : {Device("cpu"), Device("cuda:0")}) {
      Buffer<T> a(d, clean), b(d, clean), c(d, with_nan ? dirty : clean);
      Buffer<float> found(d, 1, 0.0f);
      k::non_finite_check_and_unscale(current_stream(d),
                                      {a.view(rows), b.view(half), c.view(cols)}, found.view(),
                                      1.0 / 3.0);
      for (const Buffer<T>* buf : {&a, &b, &c}) {
        const std::vector<T> r = buf->read();
        results[i].insert(results[i].end(), r.begin(), r.end());
      }
      flags[i++] = found.read()[0];
    }
    check_ulps(results[1], results[0], 0);
    CHECK(flags[0] == (with_nan ? 1.0f : 0.0f));
    CHECK(flags[1] == flags[0]);
  }
}

k::Window2d square_window(int64_t size, int64_t stride, int64_t padding, int64_t dilation) {
  k::Window2d w;
  for (int d = 0; d < 2; ++d) {
    w.kernel[d] = size;
    w.stride[d] = stride;
    w.padding[d] = padding;
    w.dilation[d] = dilation;
  }
  return w;
}

TEST_CASE("cuda im2col, col2im and max pooling give the cpu's bits", "[cuda][kernels][nn]") {
  require_cuda_device();
  // [2, 3, 7, 6] images with ties (few distinct values) and a NaN.
  std::vector<double> x(2 * 3 * 7 * 6);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>((i * 5) % 7) - 3;
  x[17] = std::numeric_limits<double>::quiet_NaN();
  for (const k::Window2d& w : {square_window(3, 1, 1, 1), square_window(2, 2, 0, 1),
                               square_window(3, 2, 1, 2), square_window(2, 1, 0, 1)}) {
    const int64_t oh =
        k::window_output_size(7, w.kernel[0], w.stride[0], w.padding[0], w.dilation[0]);
    const int64_t ow =
        k::window_output_size(6, w.kernel[1], w.stride[1], w.padding[1], w.dilation[1]);
    INFO("window " << w.kernel[0] << " stride " << w.stride[0] << " padding " << w.padding[0]
                   << " dilation " << w.dilation[0] << ": " << oh << "x" << ow);
    const int64_t rows = 3 * w.kernel[0] * w.kernel[1];
    std::vector<double> outs[2];
    std::vector<int64_t> idx[2];
    int i = 0;
    for (const Device d : {Device("cpu"), Device("cuda:0")}) {
      const Stream s = current_stream(d);
      Buffer<double> img(d, x), cols(d, static_cast<size_t>(2 * rows * oh * ow), 0.0),
          back(d, x.size(), 0.5), vals(d, static_cast<size_t>(6 * oh * ow), 0.0),
          g(d, static_cast<size_t>(6 * oh * ow), 1.25), gin(d, x.size(), 0.0);
      Buffer<int64_t> ix(d, static_cast<size_t>(6 * oh * ow), int64_t(0));
      k::im2col(s, cols.view(Shape({2, rows, oh * ow})), img.view(Shape({2, 3, 7, 6})), w);
      k::col2im(s, back.view(Shape({2, 3, 7, 6})), cols.view(Shape({2, rows, oh * ow})), w);
      if (w.dilation[0] == 1) {
        k::max_pool2d(s, vals.view(Shape({6, oh, ow})), ix.view(Shape({6, oh, ow})),
                      img.view(Shape({6, 7, 6})), w);
        k::max_pool2d_backward(s, gin.view(Shape({6, 7, 6})), g.view(Shape({6, oh, ow})),
                               ix.view(Shape({6, oh, ow})), w);
      }
      for (const Buffer<double>* b : {&cols, &back, &vals, &gin}) {
        const std::vector<double> r = b->read();
        outs[i].insert(outs[i].end(), r.begin(), r.end());
      }
      idx[i++] = ix.read();
    }
    check_ulps(outs[1], outs[0], 0);
    CHECK(idx[1] == idx[0]);
  }
}

TEMPLATE_TEST_CASE("cuda batch norm equals the cpu's within rounding", "[cuda][kernels][nn]",
                   float, double) {
  using T = TestType;
  require_cuda_device();
  const std::vector<T> x = testing::random_values<T>(4 * 3 * 50, -2, 3, 16);
  const std::vector<T> g = testing::random_values<T>(4 * 3 * 50, -1, 1, 17);
  const std::vector<T> w = {0.5, 1, 2}, b = {0.1, -0.2, 0.3};
  const Shape ncs({4, 3, 50}), ch({3});
  std::vector<T> results[2];
  int i = 0;
  for (const Device d : {Device("cpu"), Device("cuda:0")}) {
    const Stream s = current_stream(d);
    Buffer<T> bx(d, x), bg(d, g), bw(d, w), bb(d, b), out(d, x.size(), T(0)), mean(d, 3, T(0)),
        var(d, 3, T(0)), gin(d, x.size(), T(0)), gw(d, 3, T(0)), gbias(d, 3, T(0));
    const k::View wv = bw.view(ch), bv = bb.view(ch);
    k::batch_norm_forward(s, out.view(ncs), mean.view(ch), var.view(ch), bx.view(ncs), &wv, &bv,
                          1e-5);
    const k::View gin_v = gin.view(ncs), gw_v = gw.view(ch), gb_v = gbias.view(ch);
    k::batch_norm_backward(s, &gin_v, &gw_v, &gb_v, bg.view(ncs), bx.view(ncs), mean.view(ch),
                           var.view(ch), &wv, 1e-5);
    for (const Buffer<T>* r : {&out, &mean, &var, &gin, &gw, &gbias}) {
      const std::vector<T> v = r->read();
      results[i].insert(results[i].end(), v.begin(), v.end());
    }
    ++i;
  }
  const double tol = std::is_same<T, float>::value ? 1e-5 : 1e-12;
  for (size_t j = 0; j < results[0].size(); ++j) {
    CHECK(std::fabs(results[1][j] - results[0][j]) <= tol * (1 + std::fabs(results[0][j])));
  }
}

}  // namespace
}  // namespace streamgrad
