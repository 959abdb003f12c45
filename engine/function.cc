#include "engine/function.h"

#include "absl/strings/str_cat.h"
#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace {

bool contains(const TensorList& list, const Tensor& t) {
  for (const Tensor& x : list) {
    if (x.is_same(t)) return true;
  }
  return false;
}

// Stands in the graph behind the gradients of a once-differentiable function computed
// under create_graph: differentiating through them is the error.
class DelayedError final : public Node {
 public:
  explicit DelayedError(std::string function) : function_(std::move(function)) {}
  std::string name() const override { return "DelayedError"; }
  TensorList apply(TensorList&&) override {
    throw Error(absl::StrCat(function_, " is once-differentiable (OnceDifferentiableFunction): "
                             "its backward cannot be differentiated again. Use Function<> and "
                             "write the backward with differentiable ops to get higher-order "
                             "gradients"));
  }

 private:
  std::string function_;
};

}  // namespace

class CustomFunctionNode final : public Node {
 public:
  CustomFunctionNode(std::shared_ptr<FunctionCtx> ctx, BackwardFn backward, bool once)
      : ctx_(std::move(ctx)), backward_(std::move(backward)), once_(once) {}
  std::string name() const override { return absl::StrCat(ctx_->name_, "Backward"); }
  bool apply_without_gradients() const override { return true; }
  TensorList apply(TensorList&& grads) override {
    for (size_t i = 0; i < grads.size() && ctx_->materialize_grads_; ++i) {
      if (grads[i].defined()) continue;
      const InputMeta& m = input_metadata(i);  // no gradient flowed: backward sees zeros
      grads[i] = zeros(m.sizes, TensorOptions().dtype(m.dtype).device(m.device));
    }
    TensorList out;
    if (once_) {
      NoGradGuard no_grad;
      out = backward_(*ctx_, grads);
    } else {
      out = backward_(*ctx_, grads);
    }
    // Extra trailing gradients are dropped when undefined, as the reference framework does
    // (a backward written for optional arguments returns {grad, {}, {}}); a defined one is
    // a mistake the user must hear about.
    while (out.size() > num_outputs() && !out.back().defined()) out.pop_back();
    SG_CHECK(out.size() == num_outputs(), ValueError, name(), ": backward returned ", out.size(),
             " gradients but the function has ", num_outputs(), " inputs",
             out.size() > num_outputs() ? " (the extra ones must be undefined Tensors)" : "");
    for (size_t i = 0; i < out.size(); ++i) {
      if (!ctx_->needs_input_grad(i)) out[i] = Tensor();
    }
    // Under create_graph the results would silently have no history through this
    // backward; they get one that fails when reached (also when the incoming gradients
    // themselves do not require grad, where the reference framework gives a vaguer error).
    if (once_ && grad_mode_enabled()) wrap_in_delayed_error(grads, out);
    return out;
  }
  void release_variables() override {
    for (SavedTensor& s : ctx_->saved_) s.reset();
  }

 private:
  // Under create_graph: the results depend on `grads` through DelayedError, so a double
  // backward reaching them fails clearly instead of silently giving zero.
  void wrap_in_delayed_error(const TensorList& grads, TensorList& out) const {
    auto delayed = std::make_shared<DelayedError>(ctx_->name_);
    delayed->set_next_edges(collect_next_edges(grads));
    for (Tensor& g : out) {
      if (!g.defined() || !is_floating(g.dtype())) continue;
      g = g.detach();
      set_history(g, delayed);
    }
  }

  std::shared_ptr<FunctionCtx> ctx_;
  BackwardFn backward_;
  bool once_;
};

void FunctionCtx::save_for_backward(const TensorList& tensors) {
  saved_.clear();
  for (const Tensor& t : tensors) saved_.emplace_back(t, /*defer_pack=*/true);
}

TensorList FunctionCtx::saved_tensors() const {
  TensorList out;
  const std::string where = absl::StrCat(name_, "Backward");
  for (const SavedTensor& s : saved_) out.push_back(s.unpack(where.c_str()));
  return out;
}

void FunctionCtx::mark_dirty(const TensorList& tensors) {
  dirty_.insert(dirty_.end(), tensors.begin(), tensors.end());
}

void FunctionCtx::mark_non_differentiable(const TensorList& tensors) {
  non_differentiable_.insert(non_differentiable_.end(), tensors.begin(), tensors.end());
}

// The part of apply_function that needs FunctionCtx's private state.
struct FunctionApply {
  static void check_dirty(const FunctionCtx& ctx, const TensorList& inputs,
                          const TensorList& outputs) {
    for (const Tensor& d : ctx.dirty_) {
      SG_CHECK(contains(inputs, d), ValueError, ctx.name_,
               ": mark_dirty() was given a tensor that is not an input of the function (",
               d.describe(), "); mark only inputs that forward modified in place");
      SG_CHECK(contains(outputs, d), ValueError, ctx.name_,
               ": a tensor marked dirty was not returned by forward (", d.describe(),
               "); return every input you modify in place");
      SG_CHECK(!(d.is_leaf() && d.requires_grad()), ValueError, ctx.name_,
               ": a leaf that requires grad (", d.describe(),
               ") was modified in place; clone it first, or modify it under NoGradGuard");
      SG_CHECK(d.impl()->base == nullptr || !Tensor(d.impl()->base).requires_grad(),
               ValueError, ctx.name_, ": the tensor marked dirty (", d.describe(),
               ") is a view of a tensor that requires grad; in-place changes through views "
               "are not differentiable here: modify a clone instead");
    }
  }

  static TensorList apply(const std::string& name, const TensorList& inputs,
                          const ForwardFn& forward, BackwardFn backward, bool once) {
    auto ctx = std::make_shared<FunctionCtx>();
    ctx->name_ = name;
    for (const Tensor& t : inputs) ctx->needs_.push_back(t.defined() && t.requires_grad());
    TensorList outputs;
    {
      NoGradGuard no_grad;
      outputs = forward(*ctx, inputs);
    }
    for (const Tensor& out : outputs) {
      SG_CHECK(out.defined(), ValueError, name, ": forward returned an undefined tensor");
    }
    check_dirty(*ctx, inputs, outputs);
    for (const Tensor& d : ctx->dirty_) d.bump_version();
    // The marks are only read here; kept in the ctx, which the node owns, a marked output
    // would own its own grad_fn (a reference cycle).
    const TensorList dirty = std::move(ctx->dirty_);
    const TensorList non_differentiable = std::move(ctx->non_differentiable_);
    ctx->dirty_.clear();
    ctx->non_differentiable_.clear();
    if (!any_requires_grad(inputs)) return outputs;
    auto node = std::make_shared<CustomFunctionNode>(ctx, std::move(backward), once);
    node->set_next_edges(collect_next_edges(inputs));  // before dirty inputs are rebased
    for (Tensor& out : outputs) {
      const bool is_dirty = contains(dirty, out);
      if (!is_dirty && contains(inputs, out)) out = out.detach();  // returned as is: own history
      const bool differentiable = is_floating(out.dtype()) && !contains(non_differentiable, out);
      // Every output has a gradient slot, so backward gets one gradient per output.
      if (!differentiable) {
        node->add_input_metadata(out);
        continue;
      }
      set_history(out, node);
      for (SavedTensor& s : ctx->saved_) {
        if (s.is_same(out)) s.mark_output_of(node, out.output_nr());
      }
    }
    // Saved-tensor hooks see the saved outputs once they are known to be outputs, so
    // that what a hook keeps never holds the node (see SavedTensor).
    for (SavedTensor& s : ctx->saved_) s.pack_with_hooks();
    return outputs;
  }
};

TensorList apply_function(const std::string& name, const TensorList& inputs,
                          const ForwardFn& forward, BackwardFn backward, bool once) {
  return FunctionApply::apply(name, inputs, forward, std::move(backward), once);
}

}  // namespace streamgrad
