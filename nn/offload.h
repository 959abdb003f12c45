// Activation offload: while an OffloadGuard lives, the activations that forward saves for
// backward are copied to pinned host memory and their device memory goes back to the
// allocator; backward copies them back, prefetching a stated number ahead of the node
// that needs them. Built on saved-tensor hooks (engine/saved_hooks.h).
//
//   {
//     nn::OffloadGuard offload;          // OffloadOptions: min_bytes, prefetch
//     loss = model.forward(batch);      // saved activations leave the device
//   }
//   loss.backward();                      // ... and come back ahead of their nodes
//
// Streams, never a host synchronisation and never the default stream by assumption:
//   forward   a copy-out stream of the device waits for an event recorded on the stream of
//             the op that saves the tensor (the value is complete there) and copies it to
//             pinned memory. The guard holds the device block until `copy_window` later
//             tensors were saved; then the block's own stream waits for the copy's event
//             and the block goes back to that stream's pool, reusable in its order;
//   backward  when a node unpacks a saved tensor, the copy-in stream of the device brings
//             it back (unless prefetched already) and keeps `prefetch` more on the way:
//             the latest saved of those backward has not used yet, which are the ones it
//             needs next. A copy is made into memory of the stream the tensor was saved
//             on (its node replays there), after that stream's work so far and after its
//             copy-out's event; the node's stream waits for the copy-in's event.
// Why stream waits and not record_stream: a block kept by record_stream returns only when
// the host sees the other stream pass the free, and a host that runs steps ahead of the
// device (it never waits on the device in a training loop) would keep every offloaded
// block of those steps reserved (5.5 times the plain run's memory, measured on a GPT).
// Ordered by stream waits, the blocks are reused as the plain run's are. Pinned copies are
// recycled the same way: when a graph dies, its copies are kept (at most as many bytes as
// one guard offloaded) for later saves of the same shape, and the copy-out that writes a
// recycled buffer waits for the last copy-in that read it.
// Each device has one copy-out and one copy-in stream for the process (offload_streams).
// Tensors on cpu, tensors smaller than min_bytes and leaves that require grad (parameters:
// their module holds them, so a copy would free nothing) stay where they are. A tensor
// saved by several nodes on one stream (the same view of the same storage, unchanged in
// between) is copied out once, brought back once per backward, and held on the device
// until the last of those nodes took it; saved on several streams, once per stream.
//
// Results are those of the plain run, bit for bit: only where the bytes wait changes.
//
// Thread-safety: a guard is per thread, as saved-tensor hooks are; the unpack side is safe
// for backward workers of several devices unpacking at once.
// Failure: ValueError for a negative prefetch or copy_window; OutOfMemoryError when pinned
// or device memory runs out (at save, or at unpack in backward); nothing else beyond what
// the copies and stream waits themselves throw. Where a stream wait cannot be enqueued,
// the block falls back to record_stream's protection: held longer, never reused early.
#ifndef STREAMGRAD_NN_OFFLOAD_H_
#define STREAMGRAD_NN_OFFLOAD_H_

#include <cstddef>
#include <memory>
#include <utility>

#include "engine/saved_hooks.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace nn {

struct OffloadOptions {
  // Saved tensors smaller than this stay on the device: a copy costs more than it frees.
  size_t min_bytes = 1024;
  // How many saved tensors are brought back ahead of the one a node asks for.
  int prefetch = 2;
  // How many of the latest offloaded tensors keep their device memory while their copies
  // run; older ones make their stream wait for the copy. 0 makes that stream wait for
  // each copy at once (the least memory, no overlap of copies with compute).
  int copy_window = 2;
};

// Counts since the process started, for tests and benchmarks.
struct OffloadStats {
  size_t offloaded = 0;       // tensors copied out
  size_t offloaded_bytes = 0;
  size_t prefetched = 0;      // copies in that ran ahead of their node
  size_t fetched_late = 0;    // copies in that started only when their node asked
  size_t deduplicated = 0;    // saves served by an earlier save's copy
};
OffloadStats offload_stats();

// The copy-out and copy-in streams of `device` (created at first use).
std::pair<Stream, Stream> offload_streams(Device device);

class OffloadGuard {
 public:
  explicit OffloadGuard(OffloadOptions options = {});
  OffloadGuard(const OffloadGuard&) = delete;
  OffloadGuard& operator=(const OffloadGuard&) = delete;
  // Gives the held device blocks back, each after its stream waits for its copy.
  ~OffloadGuard();

 private:
  struct State;
  std::shared_ptr<State> state_;
  SavedTensorsHooks hooks_;
};

}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_OFFLOAD_H_
