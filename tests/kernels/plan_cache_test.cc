// PlanCache (kernels/plan_cache.h): least recently used out first, max_size 0 caching
// nothing, shrinking and clear(), plans outliving eviction while held, one cache per
// device, and concurrent use (run under TSan by CI). The cuDNN plans themselves are
// covered in tests/ops/conv_grad_test where a GPU is present.
#include "kernels/plan_cache.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace streamgrad {
namespace {

std::shared_ptr<const void> plan(int v) { return std::make_shared<const int>(v); }
int value_of(const std::shared_ptr<const void>& p) { return *static_cast<const int*>(p.get()); }

TEST_CASE("PlanCache evicts the least recently used plan first", "[kernels][plan_cache]") {
  PlanCache cache;
  CHECK(cache.max_size() == PlanCache::kDefaultMaxSize);
  cache.set_max_size(2);
  cache.insert("a", plan(1));
  cache.insert("b", plan(2));
  REQUIRE(cache.find("a") != nullptr);  // "a" is now the most recent: "b" goes next
  cache.insert("c", plan(3));
  CHECK(cache.size() == 2);
  CHECK(cache.find("b") == nullptr);
  CHECK(value_of(cache.find("a")) == 1);
  CHECK(value_of(cache.find("c")) == 3);
  cache.insert("a", plan(10));  // replaces, does not grow
  CHECK(cache.size() == 2);
  CHECK(value_of(cache.find("a")) == 10);
}

TEST_CASE("PlanCache max_size 0 caches nothing; shrinking and clear drop plans",
          "[kernels][plan_cache]") {
  PlanCache cache;
  for (int i = 0; i < 5; ++i) cache.insert(std::to_string(i), plan(i));
  CHECK(cache.size() == 5);
  cache.set_max_size(3);  // keeps the three most recent
  CHECK(cache.size() == 3);
  CHECK(cache.find("0") == nullptr);
  CHECK(cache.find("1") == nullptr);
  CHECK(value_of(cache.find("4")) == 4);
  const std::shared_ptr<const void> held = cache.find("2");
  cache.clear();
  CHECK(cache.size() == 0);
  CHECK(value_of(held) == 2);  // a launch holding a plan keeps it past clear()
  cache.set_max_size(0);
  cache.insert("x", plan(7));
  CHECK(cache.size() == 0);
  CHECK(cache.find("x") == nullptr);
}

TEST_CASE("each cuda device index has its own plan cache", "[kernels][plan_cache]") {
  PlanCache& zero = cudnn_conv_plan_cache(0);
  PlanCache& one = cudnn_conv_plan_cache(1);
  CHECK(&zero != &one);
  CHECK(&zero == &cudnn_conv_plan_cache(0));
  const size_t before = one.size();
  zero.insert("test-key", plan(1));
  CHECK(one.size() == before);
  zero.clear();
  CHECK_THROWS_AS(cudnn_conv_plan_cache(-1), ValueError);
}

TEST_CASE("PlanCache is safe to use from many threads", "[kernels][plan_cache]") {
  PlanCache cache;
  cache.set_max_size(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < 500; ++i) {
        const std::string key = std::to_string((t * 7 + i) % 12);
        if (std::shared_ptr<const void> p = cache.find(key)) {
          (void)value_of(p);
        } else {
          cache.insert(key, plan(i));
        }
        if (i % 97 == 0) cache.set_max_size(4 + i % 5);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  CHECK(cache.size() <= cache.max_size());
}

}  // namespace
}  // namespace streamgrad
