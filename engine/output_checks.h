// Checks the engine makes on what a node's backward returned, before the gradients move
// on. Internal to engine/ (engine.cc).
//
// validate_outputs follows the reference engine: a gradient of another shape that the
// input broadcasts to is summed down to the input's shape; one of another floating dtype
// is cast; a 0-dim gradient on another device is moved to the input's device. Anything
// else is an Error naming the node, the input index, what it got and what was expected.
// check_anomaly (anomaly mode) throws when a gradient holds NaN or Inf.
//
// Thread-safety: called by the thread running the node, with its stream current.
// Failure: Error as above.
#ifndef STREAMGRAD_ENGINE_OUTPUT_CHECKS_H_
#define STREAMGRAD_ENGINE_OUTPUT_CHECKS_H_

#include <optional>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "engine/node.h"

namespace streamgrad {

// Fixes or refuses each gradient in `outputs`; where a gradient was moved to another
// device, `moved_to[i]` is the stream the move was ordered on (nullopt elsewhere).
using MovedTo = absl::InlinedVector<std::optional<Stream>, 4>;
void validate_outputs(const Node& fn, TensorList& outputs, MovedTo* moved_to);

void check_anomaly(const Node& fn, const TensorList& outputs);

}  // namespace streamgrad

#endif  // STREAMGRAD_ENGINE_OUTPUT_CHECKS_H_
