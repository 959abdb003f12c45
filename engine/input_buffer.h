// InputBuffer: the gradients arriving at one node's input slots, accumulated with the
// stream rules of S4.
//
// For each slot, on first arrival from producer stream P for a consumer on stream C: the
// value is kept as is, the accumulation stream A is fixed (C if the gradient is on C's
// device, else P, else the current stream of the gradient's device) and a ready event is
// recorded on P only when P differs from C or A. Each further arrival makes A wait for the
// earlier value and the new producer, adds on A, and re-records the ready event if A != C.
// wait_ready() makes C wait for the ready events right before the node runs (a cpu
// consumer waits on the host), so a slow producer never blocks unrelated work on C.
//
// Thread-safety: not thread-safe; the engine guards each buffer with its GraphTask's mutex.
// Failure: errors of the accumulation kernels propagate.
#ifndef STREAMGRAD_ENGINE_INPUT_BUFFER_H_
#define STREAMGRAD_ENGINE_INPUT_BUFFER_H_

#include <memory>
#include <optional>
#include <vector>

#include "engine/node.h"
#include "runtime/backend/event.h"

namespace streamgrad {

class InputBuffer {
 public:
  explicit InputBuffer(size_t size) : slots_(size) {}
  InputBuffer(InputBuffer&&) = default;
  InputBuffer& operator=(InputBuffer&&) = default;

  void add(size_t pos, Tensor&& value, const std::optional<Stream>& producer,
           const std::optional<Stream>& consumer);
  void wait_ready(const std::optional<Stream>& consumer);
  // The stream that last wrote slot `pos` (nullopt: the host).
  const std::optional<Stream>& value_stream(size_t pos) const { return slots_[pos].stream; }
  const Tensor& value(size_t pos) const { return slots_[pos].value; }
  size_t size() const { return slots_.size(); }
  TensorList take();

 private:
  struct Slot {
    Tensor value;
    std::optional<Stream> stream;  // where value was last written
    std::optional<Stream> accum;   // A, fixed on first arrival
    std::unique_ptr<Event> ready;
  };
  std::vector<Slot> slots_;  // moved with its task through the ready queue: kept cheap to move
};

}  // namespace streamgrad

#endif  // STREAMGRAD_ENGINE_INPUT_BUFFER_H_
