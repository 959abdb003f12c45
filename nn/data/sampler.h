// Samplers: which examples a DataLoader visits in an epoch, and in what order (the
// reference framework's torch.utils.data.Sampler). DataLoaderOptions::sampler takes one;
// distributed/sampler.h has the DistributedSampler that shards a data set over processes.
//
// shuffled_indices(n, seed, epoch) is the permutation of 0..n-1 that every shuffle in
// streamgrad draws: a fixed generator (mt19937_64) and a Fisher-Yates shuffle written here,
// because std::shuffle's algorithm is the standard library's choice and an order must be
// the same on every machine and in every process of a job.
//
// Thread-safety: samplers are immutable; indices() may be called from any thread.
// Failure: none beyond allocation.
#ifndef STREAMGRAD_NN_DATA_SAMPLER_H_
#define STREAMGRAD_NN_DATA_SAMPLER_H_

#include <cstdint>
#include <vector>

namespace streamgrad {
namespace nn {

class Sampler {
 public:
  virtual ~Sampler() = default;
  // How many indices each epoch yields.
  virtual int64_t size() const = 0;
  // The epoch's indices into the data set, size() of them.
  virtual std::vector<int64_t> indices(int64_t epoch) const = 0;
};

std::vector<int64_t> shuffled_indices(int64_t n, uint64_t seed, int64_t epoch);

}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_DATA_SAMPLER_H_
