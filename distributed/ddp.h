// DistributedDataParallel: one process per device, gradients averaged over the processes
// of a group during backward, as the reference framework's
// torch.nn.parallel.DistributedDataParallel.
//
//   auto pg = distributed::init_process_group_from_env("gloo");   // under tools/launch
//   model->to(Device("sim:0"));
//   auto ddp = std::make_shared<distributed::DistributedDataParallel>(model, pg);
//   nn::SGD opt(ddp->parameters(), 0.1);
//   Tensor loss = cross_entropy(ddp->forward(local_batch), labels);
//   loss.backward();   // .grad is the average over the processes: every process steps alike
//   opt.step();
//
// Construction broadcasts rank 0's parameters and buffers to every process (and checks
// that every process has the same parameter shapes). Gradients are bucketed (at most
// bucket_cap_mb MiB per bucket, in reverse registration order) and each bucket is
// all-reduced on the group's communication stream as soon as its last gradient has been
// accumulated, overlapping the rest of backward; backward() returns with the caller's
// stream ordered after every reduction (S6), without a host synchronisation. With equal
// local batches and a mean loss, each step equals one process's step on the global batch.
//
//   {
//     auto guard = ddp->no_sync();                  // gradient accumulation: the forward
//     cross_entropy(ddp->forward(a), ya).backward(); // and backward under the guard
//   }                                               // stay local;
//   cross_entropy(ddp->forward(b), yb).backward();  // this one reduces the sum of both
//
// find_unused_parameters: a forward may leave parameters out (branches); they are found
// by walking the forward's graph, count as ready with zero gradient, and get the average
// when another process used them (a parameter no process used keeps its .grad). Without
// it, a parameter that gets no gradient makes backward throw, naming it.
// broadcast_buffers: rank 0's buffers (BatchNorm statistics) are broadcast before each
// forward, as in the reference.
// Not done (the reference does them): rebuilding buckets in the order gradients arrived
// in the first step, a smaller first bucket, gradient_as_bucket_view, static_graph,
// communication hooks, several devices per process.
//
// Thread-safety: as Module; one thread trains. Every process must call forward and
// backward the same number of times (the collectives must match).
// Failure: ValueError at construction for parameters on several devices; DistributedError
// when the processes' parameter shapes differ (naming the rank), and from collectives (a
// dead or late peer); Error from backward as described under find_unused_parameters.
#ifndef STREAMGRAD_DISTRIBUTED_DDP_H_
#define STREAMGRAD_DISTRIBUTED_DDP_H_

#include <memory>
#include <vector>

#include "distributed/process_group.h"
#include "nn/module.h"
#include "nn/options.h"

namespace streamgrad {
namespace distributed {

namespace ddp_internal {
class Reducer;
}

struct DistributedDataParallelOptions {
  SG_NN_OPTION(double, bucket_cap_mb) = 25;
  SG_NN_OPTION(bool, find_unused_parameters) = false;
  SG_NN_OPTION(bool, broadcast_buffers) = true;
};

class DistributedDataParallel : public nn::Module {
 public:
  DistributedDataParallel(std::shared_ptr<nn::Module> module, std::shared_ptr<ProcessGroup> group,
                          DistributedDataParallelOptions options = {});
  ~DistributedDataParallel() override;

  Tensor forward(const Tensor& input) override;

  // While the returned guard lives, forward/backward pairs accumulate .grad locally.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel* ddp) : ddp_(ddp) { ddp_->sync_ = false; }
    ~NoSync() { ddp_->sync_ = true; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel* ddp_;
  };
  NoSync no_sync() { return NoSync(this); }

  ProcessGroup& process_group() const { return *group_; }
  const DistributedDataParallelOptions& options() const { return options_; }
  // Indices into module->parameters() of the parameters that require grad, bucket by
  // bucket, and the buckets started by the last backward in start order.
  std::vector<std::vector<size_t>> bucket_indices() const;
  std::vector<size_t> last_launch_order() const;

  std::shared_ptr<nn::Module> module;

 private:
  void broadcast_state(bool buffers_only);

  std::shared_ptr<ProcessGroup> group_;
  DistributedDataParallelOptions options_;
  std::vector<size_t> grad_params_;  // module->parameters() indices that require grad
  std::shared_ptr<ddp_internal::Reducer> reducer_;
  bool sync_ = true;
};

}  // namespace distributed
}  // namespace streamgrad

#endif  // STREAMGRAD_DISTRIBUTED_DDP_H_
