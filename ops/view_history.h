// The ops side of Note [Views and in-place operations] (engine/view_history.h): the
// AsStridedBackward node a view gets when its base was written in place, and the
// CopySlices node an in-place op on a view records on the base.
//
// Both work on storage geometry (sizes, strides, offset within the shared storage), so
// they serve every view op, chains of views and bases that are themselves strided. Their
// backward formulas are ops with history, so double backward works through them.
// Thread-safety: as any op. Failure: internal errors only (callers validate).
#ifndef STREAMGRAD_OPS_VIEW_HISTORY_H_
#define STREAMGRAD_OPS_VIEW_HISTORY_H_

#include <memory>
#include <vector>

#include "engine/node.h"

namespace streamgrad {
namespace ops_internal {

// The engine's EngineOps::view_backward.
std::shared_ptr<Node> view_backward(const Tensor& view, const Tensor& base);

// Records the in-place op node `fn` (next edges: the view's old history first, then its
// other inputs'), whose kernel just wrote `view`, as the new history of the view's
// differentiable base `base`.
void record_on_base(const Tensor& base, const Tensor& view, const std::shared_ptr<Node>& fn);

// Gives `a`, just written in place, the history `node` with next edges `edges` (collected
// before the write: a's old history first). On a differentiable view the node is recorded
// on its base instead (record_on_base) and the view replays from there. Defined in
// inplace.cc; every in-place op ends with it.
void rebase_inplace(const Tensor& a, const std::shared_ptr<Node>& node, std::vector<Edge> edges);

}  // namespace ops_internal
}  // namespace streamgrad

#endif  // STREAMGRAD_OPS_VIEW_HISTORY_H_
