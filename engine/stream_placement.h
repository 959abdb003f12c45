// StreamPlacementScope: turns a single-stream program into a multi-stream one, for the
// stream-consistency check of gradcheck.
//
// While a scope is active on a thread, after every recorded op on a device of the scope
// the thread moves to the next stream of that device's rotation: that stream first waits
// for the current one (so the forward stays correct), then becomes current. Each op thus
// runs entirely on one stream and the next op on another, and backward replays each node
// on a different stream, so a gradient that is right on one stream but races across
// streams shows up as a difference. Ops report their outputs (op_recorded) so that the
// check can name the first op whose gradient differs.
//
// Thread-safety: per thread. Failure: none (ops call these on every output).
#ifndef STREAMGRAD_ENGINE_STREAM_PLACEMENT_H_
#define STREAMGRAD_ENGINE_STREAM_PLACEMENT_H_

#include <map>
#include <vector>

#include "absl/types/span.h"
#include "engine/tensor.h"
#include "runtime/backend/stream.h"

namespace streamgrad {

class StreamPlacementScope {
 public:
  // `rotation`: the streams to cycle through, per device (streams of other devices are
  // ignored for that device). Restores the previous scope and current streams on exit.
  explicit StreamPlacementScope(const std::vector<Stream>& rotation);
  ~StreamPlacementScope();
  StreamPlacementScope(const StreamPlacementScope&) = delete;
  StreamPlacementScope& operator=(const StreamPlacementScope&) = delete;

  // Op outputs seen in this scope, in creation order.
  const std::vector<Tensor>& outputs() const { return outputs_; }

 private:
  friend void op_recorded(absl::Span<const Tensor> outputs);
  std::map<Device, std::vector<Stream>> rotation_;
  std::map<Device, size_t> next_;
  std::map<Device, Stream> restore_;
  std::vector<Tensor> outputs_;
  StreamPlacementScope* previous_;
};

// Called by ops once they recorded history for `outputs`: notes them and, when a scope
// covers their device, moves the thread to the next stream of the rotation.
void op_recorded(absl::Span<const Tensor> outputs);

}  // namespace streamgrad

#endif  // STREAMGRAD_ENGINE_STREAM_PLACEMENT_H_
