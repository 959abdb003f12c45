// Deep graphs shared by bench/deep_graph_bench and tests/engine/deep_graph_test: a chain of
// n multiplications, and a custom function whose backward starts the next level of a
// nested (reentrant) backward.
//
//   Tensor y = mul_chain(x, 1000000);
//   sum(NestedBackward::apply({full({1}, 10000.0f)}, "Nested")[0]).backward();  // 10,000 deep
//
// Thread-safety and failure: as the ops they call.
#ifndef STREAMGRAD_BENCH_DEEP_GRAPHS_H_
#define STREAMGRAD_BENCH_DEEP_GRAPHS_H_

#include "streamgrad.h"

namespace streamgrad {
namespace bench {

inline Tensor mul_chain(const Tensor& x, int n) {
  Tensor y = x;
  for (int i = 0; i < n; ++i) y = mul(y, 1.0);
  return y;
}

// Forward: a copy of its one-element input, whose value is the number of levels still to
// go. Backward: differentiates a fresh one-node graph of the next level (the reference
// framework's deep reentrant test), then passes the gradient through.
struct NestedBackward : Function<NestedBackward> {
  static TensorList forward(FunctionCtx& ctx, const TensorList& in) {
    ctx.saved_data["level"] = in[0].item<float>();
    return {clone(in[0])};
  }
  static TensorList backward(FunctionCtx& ctx, const TensorList& g) {
    if (ctx.saved_data["level"] > 0) {
      GradModeGuard grad_on(true);
      Tensor next = full({1}, static_cast<float>(ctx.saved_data["level"] - 1),
                         TensorOptions().device(g[0].device()))
                        .requires_grad_();
      sum(NestedBackward::apply({next}, "Nested")[0]).backward();
    }
    return {g[0]};
  }
};

}  // namespace bench
}  // namespace streamgrad

#endif  // STREAMGRAD_BENCH_DEEP_GRAPHS_H_
