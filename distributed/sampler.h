// DistributedSampler: each process's share of a data set, as the reference framework's
// torch.utils.data.distributed.DistributedSampler.
//
//   auto sampler = std::make_shared<distributed::DistributedSampler>(
//       train->size(), pg->size(), pg->rank());
//   nn::DataLoader loader(train, nn::DataLoaderOptions().batch_size(32).sampler(sampler));
//   for (epoch ...) { loader.start_epoch(epoch); ... }   // a new shuffle every epoch
//
// Every process draws the same permutation of the data set from (seed, epoch); process
// `rank` takes the indices rank, rank + R, rank + 2R, ... of it (R = num_replicas), so the
// shards are disjoint and together cover the data set. Without drop_last the permutation
// is padded with its own first indices up to a multiple of R (a few examples are seen
// twice, every process gets ceil(N / R)); with drop_last the tail is cut (floor(N / R)).
// shuffle(false) keeps 0..N-1 in order before sharding.
//
// Thread-safety: immutable. Failure: ValueError for a rank outside [0, num_replicas) or a
// non-positive num_replicas, naming them.
#ifndef STREAMGRAD_DISTRIBUTED_SAMPLER_H_
#define STREAMGRAD_DISTRIBUTED_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "nn/data/sampler.h"
#include "nn/options.h"

namespace streamgrad {
namespace distributed {

struct DistributedSamplerOptions {
  SG_NN_OPTION(bool, shuffle) = true;
  SG_NN_OPTION(uint64_t, seed) = 0;
  SG_NN_OPTION(bool, drop_last) = false;
};

class DistributedSampler final : public nn::Sampler {
 public:
  DistributedSampler(int64_t dataset_size, int num_replicas, int rank,
                     DistributedSamplerOptions options = {});
  int64_t size() const override { return num_samples_; }
  std::vector<int64_t> indices(int64_t epoch) const override;

 private:
  const int64_t dataset_size_;
  const int num_replicas_, rank_;
  const DistributedSamplerOptions options_;
  int64_t num_samples_;
};

}  // namespace distributed
}  // namespace streamgrad

#endif  // STREAMGRAD_DISTRIBUTED_SAMPLER_H_
