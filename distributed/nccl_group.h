// The "nccl" process group (distributed/process_group.h) for cuda tensors, over the NCCL
// of the CUDA toolkit. Built only where nvcc exists (init_process_group reports "not in
// this build" elsewhere); it has not run on a GPU yet (none was lent when it was written:
// tests/distributed/nccl_test.cc runs it where one is).
//
// One communicator per process, for the cuda device of the first collective (a process
// drives one GPU, as the reference's DDP expects); rank 0 draws the NCCL unique id and
// hands it to the others through the store. Each collective is queued on a communication
// stream of the device, after the caller's current stream (an event wait); Work::wait makes
// the caller's stream wait for it. The host never blocks, except in barrier().
//
// A watchdog thread polls every collective's completion: one not done within the timeout
// (a dead or stuck peer: NCCL has no timeout of its own) aborts the communicator, and that
// collective's wait() and every later call throw DistributedError naming the op and rank.
// ncclCommInitRank itself waits for every rank without a timeout; the store's rendezvous
// before it (which has one) is where a rank that never arrives is reported.
//
// Thread-safety: as ProcessGroup (one thread issues the collectives); the watchdog only
// reads completion and aborts. Failure: ValueError / DistributedError as the gloo group;
// DistributedError when no cuda device is usable, naming why.
#ifndef STREAMGRAD_DISTRIBUTED_NCCL_GROUP_H_
#define STREAMGRAD_DISTRIBUTED_NCCL_GROUP_H_

#include <chrono>
#include <memory>

#include "distributed/process_group.h"
#include "distributed/store.h"

namespace streamgrad {
namespace distributed {

std::shared_ptr<ProcessGroup> make_nccl_group(int rank, int size, std::shared_ptr<Store> store,
                                              std::chrono::milliseconds timeout);

}  // namespace distributed
}  // namespace streamgrad

#endif  // STREAMGRAD_DISTRIBUTED_NCCL_GROUP_H_
