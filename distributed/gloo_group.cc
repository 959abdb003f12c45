// The "gloo" process group (distributed/process_group.h) over Gloo's TCP transport.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "distributed/collective_checks.h"
#include "distributed/process_group.h"
#include "distributed/stashed_inputs.h"
#include "engine/factories.h"
#include "kernels/view.h"
#include "ops/ops.h"
#include "runtime/backend/event.h"
#include "runtime/backend/launch.h"
#include "runtime/base/error.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace distributed {
namespace {

// Gloo's rendezvous reads and writes our store under a prefix of its own.
class GlooStore final : public gloo::rendezvous::Store {
 public:
  explicit GlooStore(std::shared_ptr<distributed::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set("gloo/" + key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    const std::string v = store_->get("gloo/" + key);
    return std::vector<char>(v.begin(), v.end());
  }
  void wait(const std::vector<std::string>& keys) override {
    std::vector<std::string> prefixed;
    for (const std::string& k : keys) prefixed.push_back("gloo/" + k);
    store_->wait(prefixed);
  }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) override {
    wait(keys);  // the store's own timeout applies
  }

 private:
  std::shared_ptr<distributed::Store> store_;
};

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <typename T>
ReduceFn reduce_fn(ReduceOp op) {
  switch (op) {
    case ReduceOp::kProduct:
      return &gloo::product<T>;
    case ReduceOp::kMin:
      return &gloo::min<T>;
    case ReduceOp::kMax:
      return &gloo::max<T>;
    default:
      return &gloo::sum<T>;  // kSum, and kAvg before its division
  }
}

template <typename Fn>
void dispatch(DType dt, Fn fn) {
  switch (dt) {
    case DType::kFloat32:
      fn(float{});
      return;
    case DType::kFloat64:
      fn(double{});
      return;
    default:
      fn(int64_t{});
      return;
  }
}

class GlooWork final : public Work {
 public:
  // `error` is null on cpu, where the collective ran (or threw) at the call.
  GlooWork(Device device, std::shared_ptr<std::exception_ptr> error, Event done,
           internal::StashedInputs inputs = {})
      : device_(device), error_(std::move(error)), done_(std::move(done)),
        inputs_(std::move(inputs)) {}
  void wait() override {
    if (error_ == nullptr) return;
    const Stream caller = current_stream(device_);
    done_.block(caller);
    // Queued after the wait, so it runs once the collective has: a failure becomes the
    // caller's stream's error, reported at its next synchronisation like its own kernels'.
    launch(caller, LaunchDesc{"collective_check", {}, {}}, [error = error_] {
      if (*error != nullptr) std::rethrow_exception(*error);
    });
    inputs_.release_after_wait(caller);
  }
  bool is_completed() const override { return done_.query(); }

 private:
  const Device device_;
  const std::shared_ptr<std::exception_ptr> error_;
  Event done_;
  internal::StashedInputs inputs_;
};

class GlooGroup final : public ProcessGroup {
 public:
  GlooGroup(int rank, int size, std::shared_ptr<Store> store, std::chrono::milliseconds timeout)
      : rank_(rank), size_(size), timeout_(timeout), store_(store) {
    // A peer killed mid-collective must be an error here, not a SIGPIPE that kills this
    // process too (Gloo's TCP pairs write without MSG_NOSIGNAL).
    ::signal(SIGPIPE, SIG_IGN);
    gloo::transport::tcp::attr attr;
    auto* tcp = dynamic_cast<TCPStore*>(store.get());
    attr.hostname = tcp != nullptr ? tcp->local_address() : "127.0.0.1";
    try {
      auto device = gloo::transport::tcp::CreateDevice(attr);
      auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
      context->setTimeout(timeout);
      GlooStore gloo_store(store);
      context->connectFullMesh(gloo_store, device);
      context_ = std::move(context);
    } catch (const DistributedError&) {
      throw;
    } catch (const std::exception& e) {
      throw DistributedError(absl::StrCat("init_process_group(gloo): rank ", rank, " of ", size,
                                          " could not connect to its peers: ", e.what()));
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "gloo"; }

  std::shared_ptr<Work> all_reduce_async(Tensor& t, ReduceOp op) override {
    check("all_reduce", t);
    SG_CHECK(op != ReduceOp::kAvg || is_floating(t.dtype()), ValueError,
             "all_reduce: kAvg needs a floating tensor, got ", t.describe(),
             "; sum integers with kSum and divide yourself");
    void* p = t.data_ptr();
    const size_t n = static_cast<size_t>(t.numel());
    const DType dt = t.dtype();
    const int size = size_;
    return run("all_reduce", {t}, [=](const gloo_ctx& ctx, uint32_t tag,
                                      std::chrono::milliseconds ms) {
      dispatch(dt, [&](auto zero) {
        using T = decltype(zero);
        gloo::AllreduceOptions o(ctx);
        o.setOutput(static_cast<T*>(p), n);
        o.setReduceFunction(reduce_fn<T>(op));
        o.setTag(tag);
        o.setTimeout(ms);
        gloo::allreduce(o);
        if (op == ReduceOp::kAvg) {
          for (size_t i = 0; i < n; ++i) static_cast<T*>(p)[i] /= static_cast<T>(size);
        }
      });
    });
  }

  void broadcast(Tensor& t, int root) override {
    check("broadcast", t);
    internal::check_collective_root("broadcast", root, size_);
    void* p = t.data_ptr();
    const size_t n = static_cast<size_t>(t.numel());
    const DType dt = t.dtype();
    run("broadcast", {t}, [=](const gloo_ctx& ctx, uint32_t tag, std::chrono::milliseconds ms) {
      dispatch(dt, [&](auto zero) {
        using T = decltype(zero);
        gloo::BroadcastOptions o(ctx);
        o.setOutput(static_cast<T*>(p), n);
        o.setRoot(root);
        o.setTag(tag);
        o.setTimeout(ms);
        gloo::broadcast(o);
      });
    })->wait();
  }

  void all_gather(std::vector<Tensor>& output, const Tensor& input) override {
    check("all_gather", input);
    check_parts("all_gather", output, input);
    Tensor in = input, all = empty({size_ * input.numel()},
                                   TensorOptions().dtype(input.dtype()).device(input.device()));
    const void* src = in.data_ptr();
    void* dst = all.data_ptr();
    const size_t n = static_cast<size_t>(input.numel());
    const DType dt = input.dtype();
    run("all_gather", {in, all},
        [=](const gloo_ctx& ctx, uint32_t tag, std::chrono::milliseconds ms) {
          dispatch(dt, [&](auto zero) {
            using T = decltype(zero);
            gloo::AllgatherOptions o(ctx);
            o.setInput(const_cast<T*>(static_cast<const T*>(src)), n);
            o.setOutput(static_cast<T*>(dst), n * static_cast<size_t>(ctx->size));
            o.setTag(tag);
            o.setTimeout(ms);
            gloo::allgather(o);
          });
        })->wait();
    for (int i = 0; i < size_; ++i) {
      copy_(output[i], reshape(narrow(all, 0, i * input.numel(), input.numel()), input.sizes()));
    }
  }

  void reduce_scatter(Tensor& output, const std::vector<Tensor>& input, ReduceOp op) override {
    check("reduce_scatter", output);
    check_parts("reduce_scatter", input, output);
    std::vector<Tensor> flat;
    for (const Tensor& t : input) flat.push_back(reshape(t, {-1}));
    Tensor all = cat(flat, 0);
    all_reduce(all, op);
    copy_(output, reshape(narrow(all, 0, rank_ * output.numel(), output.numel()), output.sizes()));
  }

  void barrier() override {
    const uint32_t tag = next_tag_++;
    try {
      gloo::BarrierOptions o(context_);
      o.setTag(tag);
      o.setTimeout(timeout_);
      gloo::barrier(o);
    } catch (const std::exception& e) {
      throw failure("barrier", e);
    }
  }

 private:
  using gloo_ctx = std::shared_ptr<gloo::Context>;

  void check(const char* op, const Tensor& t) const {
    internal::check_collective_tensor(op, t);
    SG_CHECK(t.device().is_cpu() || t.device().type() == DeviceType::kSim, DistributedError, op,
             ": the gloo backend serves cpu and sim tensors, not ", t.describe(),
             "; cuda tensors need the nccl backend (init_process_group(\"nccl\", ...))");
  }

  void check_parts(const char* op, const std::vector<Tensor>& parts, const Tensor& like) const {
    internal::check_collective_parts(op, parts, like, size_);
  }

  DistributedError failure(const char* op, const std::exception& e) const {
    return internal::collective_failure(op, rank_, size_, timeout_, e.what());
  }

  // Starts body(context, tag, timeout) over `tensors` (read and written): at once on cpu;
  // on sim on the device's communication stream, after the caller's stream.
  template <typename Body>
  std::shared_ptr<Work> run(const char* op, std::vector<Tensor> tensors, Body body) {
    const uint32_t tag = next_tag_++;  // in issue order: the same on every process
    const Device d = tensors.front().device();
    std::vector<MemRange> ranges;
    for (const Tensor& t : tensors) ranges.push_back(t.view().byte_range());
    const LaunchDesc desc{op, ranges, ranges};
    const gloo_ctx ctx = context_;
    const std::chrono::milliseconds ms = timeout_;
    const Stream caller = current_stream(d);
    if (d.is_cpu()) {
      launch(caller, desc, [=] {
        try {
          body(ctx, tag, ms);
        } catch (const std::exception& e) {
          throw failure(op, e);
        }
      });
      return std::make_shared<GlooWork>(d, nullptr, Event());
    }
    // A failure on the communication stream would stay there (a stream's error is reported
    // by synchronizing that stream) while the caller's stream went on with a stale result:
    // the task keeps it instead, for Work::wait to raise on the caller's stream.
    auto error = std::make_shared<std::exception_ptr>();
    const Stream comm = comm_stream(d);
    comm.wait_stream(caller);
    // The Work holds the tensors (stashed_inputs.h): their memory is not reused before
    // the task has run, whether the caller waits for it or drops the Work.
    launch(comm, desc, [=] {
      try {
        body(ctx, tag, ms);
      } catch (const std::exception& e) {
        *error = std::make_exception_ptr(failure(op, e));
      }
    });
    Event done;
    done.record(comm);
    return std::make_shared<GlooWork>(d, std::move(error), std::move(done),
                                      internal::StashedInputs(tensors, comm));
  }

  Stream comm_stream(Device d) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = comm_.find(d);
    if (it == comm_.end()) it = comm_.emplace(d, Stream::create(d)).first;
    return it->second;
  }

  const int rank_, size_;
  const std::chrono::milliseconds timeout_;
  // Held for the group's life: rank 0's store serves the others' rendezvous, which may go
  // on after rank 0's own connections are made (with 4 processes, 2 and 3 still pair up).
  const std::shared_ptr<Store> store_;
  gloo_ctx context_;
  std::atomic<uint32_t> next_tag_{0};
  std::mutex mu_;
  std::map<Device, Stream> comm_;  // one communication stream per device
};

std::shared_ptr<ProcessGroup> make_gloo_group(int rank, int world_size,
                                              std::shared_ptr<Store> store,
                                              std::chrono::milliseconds timeout) {
  return std::make_shared<GlooGroup>(rank, world_size, std::move(store), timeout);
}

const bool kRegistered = [] {
  register_process_group_backend("gloo", make_gloo_group);
  return true;
}();

}  // namespace

}  // namespace distributed
}  // namespace streamgrad
