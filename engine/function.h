// User-defined differentiable functions: a forward and a backward of your own, recorded
// in the graph like any built-in op.
//
//   struct Scale : Function<Scale> {
//     static TensorList forward(FunctionCtx& ctx, const TensorList& in) {
//       ctx.save_for_backward({in[0]});
//       ctx.saved_data["k"] = 3;
//       return {mul(in[0], 3.0)};
//     }
//     static TensorList backward(FunctionCtx& ctx, const TensorList& grad_out) {
//       return {mul(grad_out[0], ctx.saved_data["k"])};
//     }
//   };
//   Tensor y = Scale::apply({x})[0];
//
// forward runs without recording (under NoGradGuard) on the caller's current streams; the
// outputs' stamps give the node its canonical stream (S1) and backward runs there (S2).
// backward receives one gradient per output (zeros where none flowed, or undefined after
// ctx.set_materialize_grads(false)) and returns one per input (undefined = no gradient).
// As in the reference framework, a returned gradient that the input broadcasts to is
// summed to the input's shape, one of another floating dtype is cast, and a 0-dim one on
// another device is moved. Exceptions thrown by backward reach the caller of backward()
// naming the function, with their type, and the engine stays usable.
//
// In forward, as in the reference framework:
//   ctx.mark_dirty({x})               x was modified in place and is returned: x itself gets
//                                      this node as its history (x must be returned);
//   ctx.mark_non_differentiable({i})  output i never requires grad (backward still gets a
//                                      gradient slot for it);
//   ctx.save_for_backward({out})      saving an output is fine: it is held without a cycle.
// OnceDifferentiableFunction<F> is Function<F> whose backward is not differentiable:
// backward runs without recording, and differentiating its result again is an Error.
//
// Thread-safety: as any op. Failure: ValueError for misuse of the ctx calls above and when
// backward returns the wrong number of gradients; Error (from the engine) for a gradient
// that cannot be made to match its input.
#ifndef STREAMGRAD_ENGINE_FUNCTION_H_
#define STREAMGRAD_ENGINE_FUNCTION_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/node.h"

namespace streamgrad {

class FunctionCtx {
 public:
  void save_for_backward(const TensorList& tensors);
  // Unpacked with the version check: modified-in-place tensors are reported here.
  TensorList saved_tensors() const;
  bool needs_input_grad(size_t i) const { return i < needs_.size() && needs_[i]; }
  void mark_dirty(const TensorList& tensors);
  void mark_non_differentiable(const TensorList& tensors);
  void set_materialize_grads(bool materialize) { materialize_grads_ = materialize; }
  std::map<std::string, double> saved_data;

 private:
  friend class CustomFunctionNode;
  friend struct FunctionApply;
  std::vector<SavedTensor> saved_;
  std::vector<bool> needs_;
  TensorList dirty_;
  TensorList non_differentiable_;
  bool materialize_grads_ = true;
  std::string name_;
};

using ForwardFn = std::function<TensorList(FunctionCtx&, const TensorList&)>;
using BackwardFn = std::function<TensorList(FunctionCtx&, const TensorList&)>;

TensorList apply_function(const std::string& name, const TensorList& inputs,
                          const ForwardFn& forward, BackwardFn backward,
                          bool once_differentiable = false);

template <typename Derived>
struct Function {
  static TensorList apply(const TensorList& inputs, const std::string& name = "CustomFunction") {
    return apply_function(name, inputs, &Derived::forward, &Derived::backward);
  }
};

template <typename Derived>
struct OnceDifferentiableFunction {
  static TensorList apply(const TensorList& inputs, const std::string& name = "CustomFunction") {
    return apply_function(name, inputs, &Derived::forward, &Derived::backward,
                          /*once_differentiable=*/true);
  }
};

}  // namespace streamgrad

#endif  // STREAMGRAD_ENGINE_FUNCTION_H_
