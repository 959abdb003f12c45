#include "nn/data/sampler.h"

#include <numeric>
#include <random>
#include <utility>

namespace streamgrad {
namespace nn {

std::vector<int64_t> shuffled_indices(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(epoch));
  for (int64_t i = n - 1; i > 0; --i) {
    std::swap(order[static_cast<size_t>(i)],
              order[static_cast<size_t>(rng() % static_cast<uint64_t>(i + 1))]);
  }
  return order;
}

}  // namespace nn
}  // namespace streamgrad
