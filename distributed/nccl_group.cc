#include "distributed/nccl_group.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <condition_variable>
#include <list>
#include <optional>
#include <mutex>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "distributed/collective_checks.h"
#include "distributed/stashed_inputs.h"
#include "engine/factories.h"
#include "ops/ops.h"
#include "runtime/backend/devices.h"
#include "runtime/backend/event.h"
#include "runtime/backend/guard.h"
#include "runtime/backend/launch.h"
#include "runtime/backend/stream.h"
#include "runtime/base/error.h"
#include "runtime/cuda/cuda_stream.h"

namespace streamgrad {
namespace distributed {
namespace {

ncclDataType_t nccl_type(DType dt) {
  switch (dt) {
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kFloat64:
      return ncclFloat64;
    default:
      return ncclInt64;  // the checks admit nothing else
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kAvg:
      return ncclAvg;
    case ReduceOp::kProduct:
      return ncclProd;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    default:
      return ncclSum;
  }
}

void check_nccl(ncclResult_t r, const char* what) {
  SG_CHECK(r == ncclSuccess, DistributedError, what, ": ", ncclGetErrorString(r), " (",
           ncclGetLastError(nullptr), ")");
}

// What the watchdog and the works share: the communicator's fate.
struct CommState {
  std::mutex mu;
  std::string error ABSL_GUARDED_BY(mu);  // set once the communicator is aborted
};

class NcclWork final : public Work {
 public:
  NcclWork(Device d, std::shared_ptr<CommState> state, Event done,
           internal::StashedInputs inputs)
      : device_(d), state_(std::move(state)), done_(std::move(done)),
        inputs_(std::move(inputs)) {}
  void wait() override {
    {
      std::lock_guard<std::mutex> lk(state_->mu);
      SG_CHECK(state_->error.empty(), DistributedError, state_->error);
    }
    const Stream caller = current_stream(device_);
    done_.block(caller);
    inputs_.release_after_wait(caller);
  }
  bool is_completed() const override { return done_.query(); }

 private:
  const Device device_;
  const std::shared_ptr<CommState> state_;
  Event done_;
  internal::StashedInputs inputs_;
};

class NcclGroup final : public ProcessGroup {
 public:
  NcclGroup(int rank, int size, std::shared_ptr<Store> store, std::chrono::milliseconds timeout)
      : rank_(rank), size_(size), timeout_(timeout), store_(std::move(store)),
        state_(std::make_shared<CommState>()) {
    SG_CHECK(device_count(DeviceType::kCuda) > 0, DistributedError,
             "init_process_group(nccl): no cuda device is usable (", cuda_unavailable_reason(),
             "); the nccl backend serves cuda tensors, use \"gloo\" for cpu and sim");
    watchdog_ = std::thread([this] { watch(); });
  }

  ~NcclGroup() override {
    {
      std::lock_guard<std::mutex> lk(watch_mu_);
      stop_ = true;
    }
    watch_cv_.notify_all();
    watchdog_.join();
    bool aborted = false;
    {
      std::lock_guard<std::mutex> lk(state_->mu);
      aborted = !state_->error.empty();
    }
    std::lock_guard<std::mutex> lk(watch_mu_);
    for (Pending& p : pending_) {
      if (!aborted) cudaEventSynchronize(p.event);  // nothing left in flight
      cudaEventDestroy(p.event);
    }
    if (comm_ != nullptr && !aborted) ncclCommDestroy(comm_);  // abort already freed it
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }

  std::shared_ptr<Work> all_reduce_async(Tensor& t, ReduceOp op) override {
    check("all_reduce", t);
    void* p = t.data_ptr();
    const size_t n = static_cast<size_t>(t.numel());
    const ncclDataType_t dt = nccl_type(t.dtype());
    return run("all_reduce", {t}, [=](ncclComm_t c, cudaStream_t s) {
      return ncclAllReduce(p, p, n, dt, nccl_op(op), c, s);
    });
  }

  void broadcast(Tensor& t, int root) override {
    check("broadcast", t);
    internal::check_collective_root("broadcast", root, size_);
    void* p = t.data_ptr();
    const size_t n = static_cast<size_t>(t.numel());
    const ncclDataType_t dt = nccl_type(t.dtype());
    run("broadcast", {t}, [=](ncclComm_t c, cudaStream_t s) {
      return ncclBroadcast(p, p, n, dt, root, c, s);
    })->wait();
  }

  void all_gather(std::vector<Tensor>& output, const Tensor& input) override {
    check("all_gather", input);
    internal::check_collective_parts("all_gather", output, input, size_);
    Tensor in = input;
    Tensor all = empty({size_ * input.numel()},
                       TensorOptions().dtype(input.dtype()).device(input.device()));
    const void* src = in.data_ptr();
    void* dst = all.data_ptr();
    const size_t n = static_cast<size_t>(input.numel());
    const ncclDataType_t dt = nccl_type(input.dtype());
    run("all_gather", {in, all}, [=](ncclComm_t c, cudaStream_t s) {
      return ncclAllGather(src, dst, n, dt, c, s);
    })->wait();
    for (int i = 0; i < size_; ++i) {
      copy_(output[i], reshape(narrow(all, 0, i * input.numel(), input.numel()), input.sizes()));
    }
  }

  void reduce_scatter(Tensor& output, const std::vector<Tensor>& input, ReduceOp op) override {
    check("reduce_scatter", output);
    internal::check_collective_parts("reduce_scatter", input, output, size_);
    std::vector<Tensor> flat;
    for (const Tensor& t : input) flat.push_back(reshape(t, {-1}));
    Tensor all = cat(flat, 0);
    const void* src = all.data_ptr();
    void* dst = output.data_ptr();
    const size_t n = static_cast<size_t>(output.numel());
    const ncclDataType_t dt = nccl_type(output.dtype());
    run("reduce_scatter", {all, output}, [=](ncclComm_t c, cudaStream_t s) {
      return ncclReduceScatter(src, dst, n, dt, nccl_op(op), c, s);
    })->wait();
  }

  void barrier() override {
    SG_CHECK(device_.has_value(), DistributedError,
             "barrier (nccl): no collective has chosen this process's cuda device yet; run "
             "one first (a broadcast of the model, as DistributedDataParallel does)");
    Tensor one = ones({1}, TensorOptions().device(*device_));
    all_reduce(one);
    current_stream(*device_).synchronize();
  }

 private:
  struct Pending {
    cudaEvent_t event;
    std::chrono::steady_clock::time_point deadline;
    const char* op;
  };

  void check(const char* op, const Tensor& t) {
    internal::check_collective_tensor(op, t);
    SG_CHECK(t.device().type() == DeviceType::kCuda, DistributedError, op,
             ": the nccl backend serves cuda tensors, not ", t.describe(),
             "; use the gloo backend for cpu and sim tensors");
    if (!device_.has_value()) init_comm(t.device());
    SG_CHECK(t.device() == *device_, DistributedError, op, ": ", t.describe(), " is on ",
             t.device().str(), " but this process's communicator is on ", device_->str(),
             "; a process drives one GPU (LOCAL_RANK picks it)");
    std::lock_guard<std::mutex> lk(state_->mu);
    SG_CHECK(state_->error.empty(), DistributedError, state_->error);
  }

  void init_comm(Device d) {
    ncclUniqueId id;
    const std::string key = "nccl/unique_id";
    if (rank_ == 0) {
      check_nccl(ncclGetUniqueId(&id), "init_process_group(nccl): ncclGetUniqueId");
      store_->set(key, std::string(reinterpret_cast<const char*>(&id), sizeof(id)));
    } else {
      const std::string bytes = store_->get(key);  // waits, within the store's timeout
      SG_CHECK(bytes.size() == sizeof(id), DistributedError,
               "init_process_group(nccl): rank 0 published a malformed NCCL id");
      std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(&id));
    }
    DeviceGuard guard(d);
    check_nccl(ncclCommInitRank(&comm_, size_, id, rank_),
               absl::StrCat("init_process_group(nccl): ncclCommInitRank on ", d.str()).c_str());
    device_ = d;
    comm_stream_ = Stream::create(d);
  }

  // Queues call(comm, stream) on the communication stream after the caller's stream.
  template <typename Call>
  std::shared_ptr<Work> run(const char* op, const std::vector<Tensor>& tensors, Call call) {
    const Device d = *device_;
    std::vector<MemRange> ranges;
    for (const Tensor& t : tensors) ranges.push_back(t.view().byte_range());
    const Stream comm = *comm_stream_;
    comm.wait_stream(current_stream(d));
    cudaEvent_t finished = nullptr;
    const ncclComm_t c = comm_;
    launch(comm, LaunchDesc{op, ranges, ranges}, [&] {
      check_nccl(call(c, raw_cuda_stream(comm)), op);
      check_cuda(cudaEventCreateWithFlags(&finished, cudaEventDisableTiming), op);
      check_cuda(cudaEventRecord(finished, raw_cuda_stream(comm)), op);
    });
    {
      std::lock_guard<std::mutex> lk(watch_mu_);
      pending_.push_back({finished, std::chrono::steady_clock::now() + timeout_, op});
    }
    Event done;
    done.record(comm);
    return std::make_shared<NcclWork>(d, state_, std::move(done),
                                      internal::StashedInputs(tensors, comm));
  }

  // Retires finished collectives; aborts the communicator when one is overdue.
  void watch() {
    std::unique_lock<std::mutex> lk(watch_mu_);
    while (!stop_) {
      watch_cv_.wait_for(lk, std::chrono::milliseconds(100));
      // The events belong to the communicator's device; device_ was set before the first
      // collective was listed (under this lock).
      if (!pending_.empty()) cudaSetDevice(device_->index());
      for (auto it = pending_.begin(); it != pending_.end();) {
        if (cudaEventQuery(it->event) == cudaSuccess) {
          cudaEventDestroy(it->event);
          it = pending_.erase(it);
        } else if (std::chrono::steady_clock::now() > it->deadline) {
          {
            std::lock_guard<std::mutex> st(state_->mu);
            if (!state_->error.empty()) break;
            state_->error = internal::collective_failure(it->op, rank_, size_, timeout_,
                                                         "the watchdog aborted the communicator")
                                .what();
          }
          ncclCommAbort(comm_);  // unblocks the stream; the communicator is unusable
          break;
        } else {
          ++it;
        }
      }
    }
  }

  const int rank_, size_;
  const std::chrono::milliseconds timeout_;
  const std::shared_ptr<Store> store_;
  const std::shared_ptr<CommState> state_;
  std::optional<Device> device_;
  std::optional<Stream> comm_stream_;
  ncclComm_t comm_ = nullptr;
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  std::list<Pending> pending_ ABSL_GUARDED_BY(watch_mu_);
  bool stop_ ABSL_GUARDED_BY(watch_mu_) = false;
  std::thread watchdog_;
};

}  // namespace

std::shared_ptr<ProcessGroup> make_nccl_group(int rank, int size, std::shared_ptr<Store> store,
                                              std::chrono::milliseconds timeout) {
  return std::make_shared<NcclGroup>(rank, size, std::move(store), timeout);
}

namespace {
const bool kRegistered = [] {
  register_process_group_backend("nccl", make_nccl_group);
  return true;
}();
}  // namespace

}  // namespace distributed
}  // namespace streamgrad
