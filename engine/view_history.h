// Differentiable views and in-place operations: how a view's gradient follows its base
// when either of them is modified in place.
//
// Note [Views and in-place operations]
// The view ops of ops/ops.h (view, reshape, expand, transpose, permute, squeeze,
// unsqueeze, slice, narrow) return differentiable views: mark_differentiable_view()
// records the tensor the view's gradient flows into (its differentiable base: the input,
// or the input's own base when the input is itself such a view) and the version counter
// value at that moment. Views share the version counter with their base, so any in-place
// write to the base or to any of its views moves it on. Two rules then keep gradients
// right, as in the reference framework:
//   - Replay. A view whose version moved on no longer has the history its grad_fn
//     describes: the base may have been written since. The next time its history is read
//     (grad_fn(), requires_grad(), gradient_edge()), the view gets a fresh AsStridedBackward
//     node, an edge to the base's current history that places the view's gradient into
//     zeros of the base's shape. So `v = narrow(y, ...); mul_(y, 2)` makes v's gradient
//     pass through the multiplication.
//   - CopySlices. An in-place op on a view is recorded on the base: the base's history
//     becomes a CopySlices node holding the op's own node, which takes the base's
//     gradient, hands the op's node the view's part of it, puts the op's result for its
//     input back into that part and sends the whole to the base's old history; the op's
//     other inputs get the op node's other results. The view itself then replays.
// A view of a leaf that requires grad cannot be written in place (the leaf would be).
// Views made inside ops for their own use (conv2d's output, for example) are not marked:
// their bases are never seen by users, and an in-place op on them rebases the view alone.
//
// Thread-safety: refresh_view_history may run on several threads for one view; it
// serialises on the view's autograd mutex. Failure: none of its own.
#ifndef STREAMGRAD_ENGINE_VIEW_HISTORY_H_
#define STREAMGRAD_ENGINE_VIEW_HISTORY_H_

#include "engine/tensor.h"

namespace streamgrad {

// Makes `view` (a view op's result sharing `input`'s storage) a differentiable view.
void mark_differentiable_view(const Tensor& view, const Tensor& input);

// The differentiable base of `t`, or an undefined tensor when t is not such a view.
Tensor differentiable_base(const Tensor& t);

// Gives a differentiable view whose version moved on the history described above; a
// no-op for every other tensor. Called by the history accessors.
void refresh_view_history(const Tensor& t);

}  // namespace streamgrad

#endif  // STREAMGRAD_ENGINE_VIEW_HISTORY_H_
