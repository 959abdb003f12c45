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
// backward receives one gradient per output (zeros where none flowed) and returns one
// per input (undefined = no gradient). Exceptions thrown by backward reach the caller of
// backward() naming the function, and the engine stays usable.
// Thread-safety: as any op. Failure: ValueError when backward returns the wrong number of
// gradients or a gradient of the wrong shape, dtype or device (reported by the engine).
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
  std::map<std::string, double> saved_data;

 private:
  friend TensorList apply_function(const std::string&, const TensorList&,
                                   const std::function<TensorList(FunctionCtx&, const TensorList&)>&,
                                   std::function<TensorList(FunctionCtx&, const TensorList&)>);
  friend class CustomFunctionNode;
  std::vector<SavedTensor> saved_;
  std::vector<bool> needs_;
  std::string name_;
};

using ForwardFn = std::function<TensorList(FunctionCtx&, const TensorList&)>;
using BackwardFn = std::function<TensorList(FunctionCtx&, const TensorList&)>;

TensorList apply_function(const std::string& name, const TensorList& inputs,
                          const ForwardFn& forward, BackwardFn backward);

template <typename Derived>
struct Function {
  static TensorList apply(const TensorList& inputs, const std::string& name = "CustomFunction") {
    return apply_function(name, inputs, &Derived::forward, &Derived::backward);
  }
};

}  // namespace streamgrad

#endif  // STREAMGRAD_ENGINE_FUNCTION_H_
