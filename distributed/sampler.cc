#include "distributed/sampler.h"

#include <numeric>

#include "runtime/base/error.h"

namespace streamgrad {
namespace distributed {

DistributedSampler::DistributedSampler(int64_t dataset_size, int num_replicas, int rank,
                                       DistributedSamplerOptions options)
    : dataset_size_(dataset_size), num_replicas_(num_replicas), rank_(rank), options_(options) {
  SG_CHECK(num_replicas >= 1, ValueError, "DistributedSampler: num_replicas ", num_replicas,
           " must be at least 1 (the process group's size)");
  SG_CHECK(rank >= 0 && rank < num_replicas, ValueError, "DistributedSampler: rank ", rank,
           " is not in [0, ", num_replicas, ")");
  SG_CHECK(dataset_size >= 0, ValueError, "DistributedSampler: dataset size ", dataset_size,
           " is negative");
  num_samples_ = options.drop_last() ? dataset_size / num_replicas
                                     : (dataset_size + num_replicas - 1) / num_replicas;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> all;
  if (options_.shuffle()) {
    all = nn::shuffled_indices(dataset_size_, options_.seed(), epoch);
  } else {
    all.resize(static_cast<size_t>(dataset_size_));
    std::iota(all.begin(), all.end(), 0);
  }
  const size_t total = static_cast<size_t>(num_samples_) * static_cast<size_t>(num_replicas_);
  // Padding repeats the permutation's head (cyclically when it is shorter than the gap).
  for (size_t i = 0; all.size() < total; ++i) all.push_back(all[i]);
  all.resize(total);
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  for (size_t i = static_cast<size_t>(rank_); i < total; i += static_cast<size_t>(num_replicas_)) {
    mine.push_back(all[i]);
  }
  return mine;
}

}  // namespace distributed
}  // namespace streamgrad
