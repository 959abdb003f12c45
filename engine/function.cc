#include "engine/function.h"

#include "absl/strings/str_cat.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "runtime/error.h"

namespace streamgrad {

class CustomFunctionNode final : public Node {
 public:
  CustomFunctionNode(std::shared_ptr<FunctionCtx> ctx, BackwardFn backward)
      : ctx_(std::move(ctx)), backward_(std::move(backward)) {}
  std::string name() const override { return absl::StrCat(ctx_->name_, "Backward"); }
  TensorList apply(TensorList&& grads) override {
    for (size_t i = 0; i < grads.size(); ++i) {
      if (grads[i].defined()) continue;
      const InputMeta& m = input_metadata(i);  // no gradient flowed: backward sees zeros
      grads[i] = zeros(m.sizes, TensorOptions().dtype(m.dtype).device(m.device));
    }
    TensorList out = backward_(*ctx_, grads);
    SG_CHECK(out.size() == num_outputs(), ValueError, name(), ": backward returned ", out.size(),
             " gradients but the function has ", num_outputs(), " inputs");
    for (size_t i = 0; i < out.size(); ++i) {
      if (!ctx_->needs_input_grad(i)) out[i] = Tensor();
    }
    return out;
  }
  void release_variables() override {
    for (SavedTensor& s : ctx_->saved_) s.reset();
  }

 private:
  std::shared_ptr<FunctionCtx> ctx_;
  BackwardFn backward_;
};

void FunctionCtx::save_for_backward(const TensorList& tensors) {
  saved_.clear();
  for (const Tensor& t : tensors) saved_.emplace_back(t);
}

TensorList FunctionCtx::saved_tensors() const {
  TensorList out;
  const std::string where = absl::StrCat(name_, "Backward");
  for (const SavedTensor& s : saved_) out.push_back(s.unpack(where.c_str()));
  return out;
}

TensorList apply_function(const std::string& name, const TensorList& inputs,
                          const ForwardFn& forward, BackwardFn backward) {
  auto ctx = std::make_shared<FunctionCtx>();
  ctx->name_ = name;
  for (const Tensor& t : inputs) ctx->needs_.push_back(t.defined() && t.requires_grad());
  TensorList outputs;
  {
    NoGradGuard no_grad;
    outputs = forward(*ctx, inputs);
  }
  if (!any_requires_grad(inputs)) return outputs;
  auto node = std::make_shared<CustomFunctionNode>(ctx, std::move(backward));
  node->set_next_edges(collect_next_edges(inputs));
  for (Tensor& out : outputs) {
    SG_CHECK(out.defined(), ValueError, name, ": forward returned an undefined tensor");
    for (const Tensor& in : inputs) {
      if (out.is_same(in)) out = out.detach();  // an input returned as is gets its own history
    }
    if (is_floating(out.dtype())) set_history(out, node);
  }
  return outputs;
}

}  // namespace streamgrad
