// What the emulated CUDA runtime (cuda_runtime_api.h) offers beyond the CUDA API: the entry
// points that launch helpers and the cuBLAS / cuDNN stand-ins use to put work on a stream,
// the error detail behind a cudaError_t, the scheduler that runs the streams, and a reset
// for tests.
//
// Offers (namespace streamgrad::cudaemu):
//   enqueue_on_stream(stream, what, fn)   runs fn() on `stream` in stream order, after the
//       work enqueued before it and before the work enqueued after (stream 0 /
//       cudaStreamLegacy: the current device's legacy default stream, with its implicit
//       ordering). Returns at once: fn runs later on a worker thread (threaded scheduler) or
//       while a host thread waits (deterministic). An exception from fn becomes the device's
//       sticky error; `what` names the work in its detail.
//       kernel example:  enqueue_on_stream(s, "axpy", [=] {
//                          emu_launch("axpy", grid, block, 0, axpy_kernel, n, a, x, y); });
//   set_last_error(err, detail) / last_error_detail()   the calling thread's last error as
//       an API call sets it, and the detail of the most recent error set on this thread
//       (the interpreter's message for a kernel fault; kept when cudaGetLastError clears
//       the code, so check_cuda can print it after reading the code).
//   set_scheduler(options) / scheduler()   the SimSchedulerOptions the emulated devices'
//       streams run under (runtime/sim/sim.h explains each scheduler and policy). The
//       first use takes them from STREAMGRAD_SIM_SCHEDULER, _POLICY, _SEED, _JITTER_US,
//       _PCT_DEPTH and _PCT_STEPS, as the sim backend does; queue depth and workers from
//       STREAMGRAD_SIM_QUEUE_DEPTH and STREAMGRAD_SIM_WORKERS. The emulated devices have
//       their own executor: sim devices and cuda devices schedule independently.
//   step()   deterministic scheduler: runs one queued task; false if none can run.
//   set_user_data(stream or event, value)   a value of the caller's kept with a stream or
//       an event made by cudaStreamCreate* / cudaEventCreate* (0 until set), handed back to
//       the ordering listener.
//   set_ordering_listener(listener)   one process-wide OrderingListener (nullptr: none),
//       told of every cudaEventRecord and cudaStreamWaitEvent that enqueued something, on
//       the calling thread, after the runtime has let go of its lock. It sees the ordering
//       the streams really follow, not what the caller meant to ask for: the cuda backend
//       forwards it to the stream sanitizer, so that a wait the backend forgets to make is
//       a finding (a wait on an event never recorded orders nothing and is not reported).
//   reset_for_testing()   waits for all work, frees every allocation, forgets streams,
//       events, peer access and sticky errors (not the ordering listener), and re-reads STREAMGRAD_CUDAEMU_DEVICES and
//       STREAMGRAD_CUDAEMU_MEMORY_BYTES. Handles from before the reset become invalid. Call
//       it while no other host thread uses the runtime.
//
// Configuration: STREAMGRAD_CUDAEMU_DEVICES=N (default 2, 0..16) emulated devices;
// STREAMGRAD_CUDAEMU_MEMORY_BYTES=B (default 4 GiB) each device's totalGlobalMem, against
// which cudaMalloc accounts. A malformed value makes cudaGetDeviceCount fail with
// cudaErrorInvalidValue naming the variable (last_error_detail()).
//
// Where the emulation deliberately differs from CUDA:
//   - device memory is host memory: host code can dereference it, and kernels can touch
//     any device's memory whether or not peer access was enabled.
//   - cudaMemcpyAsync from or to pageable host memory is always asynchronous (CUDA may
//     return only once a pageable copy is staged); cudaFree waits for all work of the
//     allocation's device, as CUDA's implicit synchronisation does.
//   - a copy or fill that touches a device allocation must lie inside it: otherwise the
//     call fails with cudaErrorInvalidValue at once (CUDA would fault later, or not).
//   - a launch configuration the interpreter refuses (emu_launch checks it when the work
//     runs) is a sticky cudaErrorLaunchFailure, not an immediate
//     cudaErrorInvalidConfiguration; launch helpers should check shapes before enqueuing.
//   - after a sticky error, work still queued on that device is skipped (not run).
//   - under the deterministic scheduler work runs only while a host thread waits
//     (synchronize, cudaMemcpy, cudaFree) or calls step(): cudaStreamQuery / cudaEventQuery
//     keep answering cudaErrorNotReady to a host that only polls.
//   - cudaEventElapsedTime measures host time between the records' execution.
//   - the driver's virtual memory (cuda.h): a handle is mapped at one address at a time,
//     at offset 0; any read-write grant makes a range accessible to every device; an
//     unmapped range faults (SIGSEGV) when touched, where a GPU reports an illegal address.
//   - at exit, queued work is not waited for (the runtime is never destroyed, so work may
//     still run while static objects are destroyed); cudaFree and cudaFreeHost called
//     after the runtime's exit handler (from static destructors) return
//     cudaErrorCudartUnloading and free nothing.
//
// Thread-safety: all functions may be called from any thread; fn and the work it does must
// not call the runtime's enqueue or wait functions (they return cudaErrorNotPermitted
// there, as CUDA forbids API calls from stream callbacks).
// Failure: enqueue_on_stream returns cudaErrorInvalidResourceHandle for a destroyed or
// unknown stream, the device's sticky error if it has one, cudaErrorNotPermitted from
// inside a task, cudaErrorLaunchFailure when no worker thread can be started (nothing is
// enqueued then), and sets the last error as an API call does; set_scheduler throws
// streamgrad::ValueError for options out of range (as set_sim_scheduler does).
#ifndef STREAMGRAD_RUNTIME_CUDAEMU_INCLUDE_CUDAEMU_RUNTIME_H_
#define STREAMGRAD_RUNTIME_CUDAEMU_INCLUDE_CUDAEMU_RUNTIME_H_

#include <cstdint>
#include <functional>
#include <string>

#include "cuda_runtime_api.h"
#include "runtime/sim/sim.h"

namespace streamgrad {
namespace cudaemu {

cudaError_t enqueue_on_stream(cudaStream_t stream, const char* what, std::function<void()> fn);

void set_last_error(cudaError_t err, std::string detail);
std::string last_error_detail();

void set_scheduler(const SimSchedulerOptions& options);
SimSchedulerOptions scheduler();
bool step();

class OrderingListener {
 public:
  virtual ~OrderingListener() = default;
  // `event` was recorded on `stream` (of `device`): it now captures the stream's work.
  virtual void on_record(uintptr_t event_data, uintptr_t stream_data, int device) = 0;
  // `stream` (of `device`) now waits for the event's latest record.
  virtual void on_wait(uintptr_t stream_data, int device, uintptr_t event_data) = 0;
};

cudaError_t set_user_data(cudaStream_t stream, uintptr_t value);
cudaError_t set_user_data(cudaEvent_t event, uintptr_t value);
void set_ordering_listener(OrderingListener* listener);

void reset_for_testing();

}  // namespace cudaemu
}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_CUDAEMU_INCLUDE_CUDAEMU_RUNTIME_H_
