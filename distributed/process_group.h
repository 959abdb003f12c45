// Process groups: collectives between the processes of a job, as the reference
// framework's torch.distributed (backends "gloo": cpu and sim tensors, over TCP; "nccl":
// cuda tensors, where the build has CUDA, distributed/nccl_group.h):
//
//   auto store = std::make_shared<TCPStore>(addr, port, world, rank == 0);
//   auto pg = init_process_group("gloo", rank, world, store);
//   pg->all_reduce(grad);                 // every process now holds the sum
//   pg->broadcast(weights, /*root=*/0);   // everyone gets rank 0's
//   pg->barrier();
//
// or from the launcher's environment (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE):
//   auto pg = init_process_group_from_env("gloo");
//
// Every process must issue the same collectives in the same order (as in the reference).
// Tensors are contiguous, of float32, float64 or int64, and the same shape on every
// process. On a sim device each collective runs on the group's communication stream of
// that device, after the caller's current stream (an event wait), and the caller's
// stream waits for it: later work on the caller's stream sees the result, with no host
// synchronisation, and the stream sanitizer and the trace see the launch with what it
// reads and writes. On cpu it runs at once. reduce_scatter is an all_reduce of the
// concatenated inputs of which each process keeps its part (Gloo's own has no generic
// form); kAvg divides the sum by the world size, as NCCL's AVG.
//
// Thread-safety: one thread issues a group's collectives (the order must match across
// processes). Failure: ValueError for tensors that do not fit the call (naming the op,
// tensors and what to do); DistributedError when a peer does not answer within the timeout
// or its connection breaks (a killed rank), naming the op and the rank: at the call on cpu,
// at the next synchronisation of the stream on sim (Work::wait). An unknown backend, "nccl"
// in a build without CUDA or on a machine without a usable GPU, and tensors a backend does
// not serve are DistributedErrors naming what is available.
#ifndef STREAMGRAD_DISTRIBUTED_PROCESS_GROUP_H_
#define STREAMGRAD_DISTRIBUTED_PROCESS_GROUP_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "distributed/store.h"
#include "engine/tensor.h"

namespace streamgrad {
namespace distributed {

enum class ReduceOp { kSum, kAvg, kProduct, kMin, kMax };

// A collective started by an *_async call (the reference's async_op=True). On sim it is
// queued on the communication stream; wait() makes the caller's current stream of the
// tensor's device wait for it (device-side: the host goes on) and raises its failure at
// that stream's next synchronisation. On cpu the collective has finished (or thrown) by
// the time the call returns, and wait() does nothing. wait() may be called more than once,
// from one thread at a time.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  // Whether the collective has finished (host query; never blocks).
  virtual bool is_completed() const = 0;
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;

  void all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::kSum) {
    all_reduce_async(tensor, op)->wait();
  }
  // As all_reduce, but the caller's stream does not wait until Work::wait(): the
  // collective overlaps whatever the caller queues meanwhile (which must not touch
  // `tensor`). DistributedDataParallel reduces its buckets this way during backward.
  virtual std::shared_ptr<Work> all_reduce_async(Tensor& tensor,
                                                 ReduceOp op = ReduceOp::kSum) = 0;
  virtual void broadcast(Tensor& tensor, int root) = 0;
  // output[i] gets process i's input; output has size() tensors shaped like input.
  virtual void all_gather(std::vector<Tensor>& output, const Tensor& input) = 0;
  // output gets the reduction over processes of their input[rank()]; input has size()
  // tensors shaped like output.
  virtual void reduce_scatter(Tensor& output, const std::vector<Tensor>& input,
                              ReduceOp op = ReduceOp::kSum) = 0;
  virtual void barrier() = 0;
};

// A process group of the backend registered under `backend`: "gloo" (cpu and sim tensors)
// in the full library (//:streamgrad), "nccl" (cuda tensors) where it was built with the
// CUDA toolkit; the lean library (//:streamgrad_lean) has none. DistributedError for a
// backend this program does not link, naming the ones it does.
std::shared_ptr<ProcessGroup> init_process_group(
    const std::string& backend, int rank, int world_size, std::shared_ptr<Store> store,
    std::chrono::milliseconds timeout = kDefaultStoreTimeout);
// MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE from the environment (tools/launch sets
// them); rank 0 hosts the TCPStore. DistributedError naming a missing or malformed one.
std::shared_ptr<ProcessGroup> init_process_group_from_env(
    const std::string& backend, std::chrono::milliseconds timeout = kDefaultStoreTimeout);

// Makes `backend`'s process group; called by init_process_group after it checked the rank,
// the world size and the store.
using ProcessGroupFactory = std::shared_ptr<ProcessGroup> (*)(int rank, int world_size,
                                                              std::shared_ptr<Store> store,
                                                              std::chrono::milliseconds timeout);
// For the backends' libraries, from a static initialiser: linking a backend is what makes
// it available. Thread-safe. InternalError when `name` is registered twice.
void register_process_group_backend(const std::string& name, ProcessGroupFactory factory);

}  // namespace distributed
}  // namespace streamgrad

#endif  // STREAMGRAD_DISTRIBUTED_PROCESS_GROUP_H_
