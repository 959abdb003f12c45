// DistributedSampler, with the behaviours the reference framework's data loader tests check
// for it (test/test_dataloader.py): the shards are disjoint and cover the data set, padding
// or drop_last make them equal, each epoch reshuffles alike on every rank, and a
// DataLoader given the sampler yields exactly the shard.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <set>
#include <vector>

#include "distributed/sampler.h"
#include "nn/data/dataset.h"
#include "nn/data/loader.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace {

using distributed::DistributedSampler;
using distributed::DistributedSamplerOptions;

TEST_CASE("shards are disjoint, equal in size and cover the data set", "[sampler]") {
  const int replicas = GENERATE(1, 2, 3, 4);
  const int64_t n = GENERATE(8, 10, 11);
  const bool shuffle = GENERATE(true, false);
  CAPTURE(replicas, n, shuffle);
  std::multiset<int64_t> seen;
  for (int r = 0; r < replicas; ++r) {
    DistributedSampler s(n, replicas, r, DistributedSamplerOptions().shuffle(shuffle));
    const std::vector<int64_t> mine = s.indices(0);
    CHECK(static_cast<int64_t>(mine.size()) == (n + replicas - 1) / replicas);
    CHECK(s.size() == static_cast<int64_t>(mine.size()));
    seen.insert(mine.begin(), mine.end());
  }
  for (int64_t i = 0; i < n; ++i) CHECK(seen.count(i) >= 1);  // covered
  // Padding repeats exactly enough examples to even the shards out.
  CHECK(static_cast<int64_t>(seen.size()) == (n + replicas - 1) / replicas * replicas);
  CHECK(std::set<int64_t>(seen.begin(), seen.end()).size() == static_cast<size_t>(n));
}

TEST_CASE("drop_last cuts the tail instead of padding", "[sampler]") {
  std::set<int64_t> seen;
  for (int r = 0; r < 3; ++r) {
    DistributedSampler s(10, 3, r, DistributedSamplerOptions().drop_last(true));
    const std::vector<int64_t> mine = s.indices(4);
    CHECK(mine.size() == 3);
    for (int64_t i : mine) CHECK(seen.insert(i).second);  // no example twice
  }
  CHECK(seen.size() == 9);
}

TEST_CASE("without shuffle, rank r takes r, r + R, ...", "[sampler]") {
  DistributedSampler s(7, 2, 1, DistributedSamplerOptions().shuffle(false));
  CHECK(s.indices(0) == std::vector<int64_t>{1, 3, 5, 0});  // 7 padded with index 0
  CHECK(s.indices(3) == s.indices(0));
}

TEST_CASE("each epoch reshuffles, the same way on every rank and every run", "[sampler]") {
  DistributedSampler a(100, 2, 0), b(100, 2, 1), again(100, 2, 0);
  CHECK(a.indices(0) != a.indices(1));
  CHECK(a.indices(1) == again.indices(1));
  std::vector<int64_t> both = a.indices(1);
  const std::vector<int64_t> other = b.indices(1);
  both.insert(both.end(), other.begin(), other.end());
  std::sort(both.begin(), both.end());
  CHECK(std::adjacent_find(both.begin(), both.end()) == both.end());  // disjoint in epoch 1
  DistributedSampler seeded(100, 2, 0, DistributedSamplerOptions().seed(5));
  CHECK(seeded.indices(1) != a.indices(1));
}

// Example i is the image filled with i, target i.
class Counting final : public nn::Dataset {
 public:
  int64_t size() const override { return 10; }
  Shape example_shape() const override { return {1}; }
  void get(int64_t i, float* data, int64_t* target) const override {
    data[0] = static_cast<float>(i);
    *target = i;
  }
};

TEST_CASE("a DataLoader with the sampler yields exactly the rank's shard", "[sampler]") {
  auto sampler = std::make_shared<DistributedSampler>(10, 3, 2);
  nn::DataLoader loader(std::make_shared<Counting>(),
                        nn::DataLoaderOptions().batch_size(2).sampler(sampler));
  CHECK(loader.examples_per_epoch() == 4);
  CHECK(loader.batches_per_epoch() == 2);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    loader.start_epoch(epoch);
    std::vector<int64_t> got;
    for (nn::Batch b; loader.next(&b);) {
      for (int64_t t : b.target.to_vector<int64_t>()) got.push_back(t);
    }
    CHECK(got == sampler->indices(epoch));
  }
  auto too_big = std::make_shared<DistributedSampler>(20, 1, 0);
  nn::DataLoader bad(std::make_shared<Counting>(),
                     nn::DataLoaderOptions().sampler(too_big));
  CHECK_THROWS_WITH(bad.start_epoch(0), Catch::Contains("for a data set of 10 examples"));
}

TEST_CASE("DistributedSampler refuses a rank outside the world", "[sampler][errors]") {
  CHECK_THROWS_AS(DistributedSampler(10, 2, 2), ValueError);
  CHECK_THROWS_WITH(DistributedSampler(10, 0, 0), Catch::Contains("num_replicas 0"));
}

}  // namespace
}  // namespace streamgrad
