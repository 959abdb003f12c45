// AccumulateGrad: the node that ends every path to a leaf tensor and adds the incoming
// gradient into the leaf's .grad (S5: on its canonical stream, the current stream of the
// leaf's device when the leaf was first used in the graph).
//
// The first gradient is stolen when nobody else holds it (otherwise copied), later ones are
// added in place — or out of place under create_graph, so that .grad keeps its history.
// The leaf's tensor hooks run before, its post-accumulate hooks after accumulation; both
// also run when the gradient that arrives is undefined (.grad then stays as it was).
// Thread-safety: concurrent backward passes through one leaf serialise on the leaf's
// autograd mutex; .grad is exact. Failure: as the hooks and kernels it runs.
#ifndef STREAMGRAD_ENGINE_ACCUMULATE_GRAD_H_
#define STREAMGRAD_ENGINE_ACCUMULATE_GRAD_H_

#include <memory>
#include <string>

#include "engine/node.h"

namespace streamgrad {

class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(const Tensor& leaf);
  std::string name() const override { return "AccumulateGrad"; }
  // Runs when no gradient arrived too: the leaf's hooks see an undefined gradient.
  bool apply_without_gradients() const override { return true; }
  TensorList apply(TensorList&& grads) override;
  const Tensor& variable() const { return variable_; }
  const Tensor* accumulated_leaf() const override { return &variable_; }
  // The leaf's tensor hooks, in registration order, on gradient `g` (which they may
  // replace). apply() runs them; grad() runs them on the gradient it captures instead.
  void run_tensor_hooks(Tensor& g) const override;

 private:
  Tensor variable_;  // strong: the leaf's metadata holds this node only weakly
};

// The leaf's AccumulateGrad, created on first use and shared while any graph holds it.
std::shared_ptr<Node> grad_accumulator(const Tensor& leaf);

// A dense copy of `t` on its device's current stream, without history.
Tensor clone_detached(const Tensor& t);

}  // namespace streamgrad

#endif  // STREAMGRAD_ENGINE_ACCUMULATE_GRAD_H_
