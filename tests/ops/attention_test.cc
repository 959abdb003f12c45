// scaled_dot_product_attention against the composite softmax(q k^T * scale + mask) v
// written with matmul and softmax (the reference's math path): values and gradients with
// no mask, causal, bool and float masks, L != S; the fused path's result the same bits at
// every thread count; what backward holds growing as O(L); errors.
#include <limits>

#include "runtime/backend/cpu_settings.h"
#include "runtime/memory/caching_allocator.h"
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

// The composite, from ops the fused kernel shares no code with.
Tensor composite(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                 bool causal) {
  Tensor s = mul(matmul(q, transpose(k, -2, -1)), 1.0 / std::sqrt(double(q.size(-1))));
  if (mask.defined()) {
    s = mask.dtype() == DType::kBool
            ? masked_fill(s, eq(mask, 0.0), -std::numeric_limits<double>::infinity())
            : add(s, mask);
  }
  if (causal) {
    std::vector<bool> keep;
    for (int64_t i = 0; i < q.size(-2); ++i) {
      for (int64_t j = 0; j < k.size(-2); ++j) keep.push_back(j <= i);
    }
    const Tensor m =
        from_vector(keep, {q.size(-2), k.size(-2)}, TensorOptions().device(q.device()));
    s = masked_fill(s, eq(m, 0.0), -std::numeric_limits<double>::infinity());
  }
  return matmul(softmax(s, -1), v);
}

void check_close(const Tensor& a, const Tensor& b, double tol) {
  REQUIRE(a.sizes() == b.sizes());
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) CHECK(x[i] == Approx(y[i]).margin(tol));
}

TEST_CASE("attention equals the composite, with every kind of mask", "[ops][attention]") {
  const Device d = test_device();
  const std::string variant = GENERATE(as<std::string>{}, "none", "causal", "bool", "float",
                                       "float per batch");
  INFO(d << ", mask " << variant);
  const Tensor q = random_input({2, 3, 5, 4}, d, 1);
  const Tensor k = random_input({2, 3, 6, 4}, d, 2);
  const Tensor v = random_input({2, 3, 6, 3}, d, 3);
  Tensor mask;
  if (variant == "bool") {
    std::vector<bool> m;
    for (int i = 0; i < 30; ++i) m.push_back(i % 7 != 3);  // every row keeps some keys
    mask = from_vector(m, {5, 6}, TensorOptions().device(d));
  } else if (variant == "float") {
    mask = random_input({5, 6}, d, 4, -2, 0.5, 0).detach();
  } else if (variant == "float per batch") {
    mask = random_input({2, 1, 5, 6}, d, 5, -2, 0.5, 0).detach();
  }
  const bool causal = variant == "causal";
  const Tensor out = scaled_dot_product_attention(q, k, v, mask, 0.0, causal);
  const Tensor want = composite(q, k, v, mask, causal);
  check_close(out, want, 1e-12);
  const Tensor w = random_input({2, 3, 5, 3}, d, 6).detach();
  const TensorList g = grad({sum(mul(out, w))}, {q, k, v});
  const TensorList gw = grad({sum(mul(want, w))}, {q, k, v});
  for (int i = 0; i < 3; ++i) check_close(g[i], gw[i], 1e-12);
  if (causal) {
    check_second_order(
        [](const TensorList& x) {
          return scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0.0, true);
        },
        {q, k, v});
  }
}

// Head dimensions past 256 take the cuda kernels' other path (one that keeps no per-thread
// copy of the query row: kernels/cuda/attention.cu); every device must agree with the
// composite there too.
TEST_CASE("attention with head dimensions over 256 equals the composite", "[ops][attention]") {
  const Device d = test_device();
  const bool causal = GENERATE(false, true);
  INFO(d << (causal ? ", causal" : ""));
  const Tensor q = random_input({1, 2, 3, 260}, d, 11, -0.2, 0.2);
  const Tensor k = random_input({1, 2, 4, 260}, d, 12, -0.2, 0.2);
  const Tensor v = random_input({1, 2, 4, 300}, d, 13);
  const Tensor out = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, causal);
  const Tensor want = composite(q, k, v, Tensor(), causal);
  check_close(out, want, 1e-12);
  const Tensor w = random_input({1, 2, 3, 300}, d, 14).detach();
  const TensorList g = grad({sum(mul(out, w))}, {q, k, v});
  const TensorList gw = grad({sum(mul(want, w))}, {q, k, v});
  for (int i = 0; i < 3; ++i) check_close(g[i], gw[i], 1e-12);
}

TEST_CASE("attention's fused kernels give the same bits at every thread count",
          "[ops][attention]") {
  const Device cpu("cpu");
  const TensorOptions f32;
  manual_seed(11);
  const Tensor q = randn({4, 8, 64, 32}, f32).requires_grad_();
  const Tensor k = randn({4, 8, 64, 32}, f32).requires_grad_();
  const Tensor v = randn({4, 8, 64, 32}, f32).requires_grad_();
  std::vector<std::vector<float>> runs;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    const Tensor out = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true);
    const TensorList g = grad({sum(mul(out, out))}, {q, k, v});
    std::vector<float> all = out.to_vector<float>();
    for (const Tensor& t : g) {
      const std::vector<float> x = t.to_vector<float>();
      all.insert(all.end(), x.begin(), x.end());
    }
    runs.push_back(all);
  }
  set_num_threads(1);
  CHECK(runs[0] == runs[1]);
  CHECK(runs[0] == runs[2]);
}

// What the graph holds after the forward, for one head of context t: the fused op keeps
// q, k, v, out and lse (linear in t); the composite keeps the [t, t] probabilities too.
int64_t held_bytes(int64_t t, bool fused) {
  const Device sim("sim:0");
  const TensorOptions o = TensorOptions().device(sim);
  const Tensor q = randn({1, 1, t, 16}, o).requires_grad_();
  const Tensor k = randn({1, 1, t, 16}, o).requires_grad_();
  const Tensor v = randn({1, 1, t, 16}, o).requires_grad_();
  synchronize(sim);
  const int64_t before = memory_stats(sim).allocated_bytes.current;
  Tensor out = fused ? scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true)
                     : composite(q, k, v, Tensor(), true);
  synchronize(sim);
  return memory_stats(sim).allocated_bytes.current - before;
}

TEST_CASE("what attention keeps for backward grows linearly with the context",
          "[ops][attention][memory]") {
  const int64_t f256 = held_bytes(256, true), f1024 = held_bytes(1024, true);
  const int64_t c256 = held_bytes(256, false), c1024 = held_bytes(1024, false);
  const double fused = double(f1024) / double(f256), comp = double(c1024) / double(c256);
  WARN("bytes held after the forward, one head, E = 16: fused " << f256 << " at 256, " << f1024
       << " at 1024; composite " << c256 << " and " << c1024);
  CHECK(fused < 5);    // 4x the context: linear
  CHECK(comp > 10);    // quadratic
  CHECK(held_bytes(1024, true) * 8 < held_bytes(1024, false));
}

TEST_CASE("attention with dropout takes the composite path", "[ops][attention]") {
  const Device cpu("cpu");
  const Tensor q = random_input({1, 4, 3}, cpu, 7);
  const Tensor k = random_input({1, 5, 3}, cpu, 8);
  const Tensor v = random_input({1, 5, 2}, cpu, 9);
  manual_seed(3);
  const Tensor a = scaled_dot_product_attention(q, k, v, Tensor(), 0.5);
  const Tensor b = scaled_dot_product_attention(q, k, v);
  CHECK(a.sizes() == b.sizes());
  CHECK(a.to_vector<double>() != b.to_vector<double>());
  sum(a).backward();
  CHECK(q.grad().defined());
}

TEST_CASE("attention errors", "[ops][attention][errors]") {
  const Tensor q = zeros({2, 4, 3}), k = zeros({2, 5, 3}), v = zeros({2, 5, 2});
  expect_error<ValueError>(
      [&] { scaled_dot_product_attention(q, k, v, zeros({4, 5}), 0.0, true); },
      {"scaled_dot_product_attention", "attn_mask", "is_causal"});
  expect_error<ValueError>([&] { scaled_dot_product_attention(q, zeros({2, 5, 4}), v); },
                           {"scaled_dot_product_attention", "[2, 4, 3]", "[2, 5, 4]"});
  expect_error<ValueError>([&] { scaled_dot_product_attention(q, k, zeros({2, 6, 2})); },
                           {"value"});
  expect_error<ValueError>([&] { scaled_dot_product_attention(q, k, v, Tensor(), 1.0); },
                           {"dropout_p", "[0, 1)"});
  expect_error<ValueError>([&] { scaled_dot_product_attention(q, k, v, zeros({3, 5})); },
                           {"scaled_dot_product_attention"});
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad
