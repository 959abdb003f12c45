// PlanCache: a bounded cache of prepared library plans (cuDNN convolution descriptors and
// algorithm choices, oneDNN convolution primitives), least recently used first out, with
// the controls users know from the reference framework's FFT plan caches:
//
//   PlanCache& cache = cudnn_conv_plan_cache(0);   // cuda:0's cache
//   cache.set_max_size(16);                        // keep at most 16 plans
//   cache.size();                                  // plans held now
//   cache.clear();                                 // drop them all
//
// A max_size of 0 turns caching off: every launch prepares its plan and drops it after.
// Plans are shared pointers: one evicted or cleared while a launch still holds it lives
// until that launch lets go. The caches exist in every build; without cuDNN the cuda ones
// stay empty.
//
// Thread-safety: every method may be called from any thread. Failure: ValueError for a
// negative device index; find/insert never throw except std::bad_alloc.
#ifndef STREAMGRAD_KERNELS_PLAN_CACHE_H_
#define STREAMGRAD_KERNELS_PLAN_CACHE_H_

#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "runtime/base/error.h"

namespace streamgrad {

class PlanCache {
 public:
  // The reference framework's cuFFT caches hold 4096 plans by default.
  static constexpr size_t kDefaultMaxSize = 4096;

  size_t max_size() const {
    std::lock_guard<std::mutex> lk(mu_);
    return max_size_;
  }
  // Evicts the least recently used plans beyond `n` at once.
  void set_max_size(size_t n) {
    std::lock_guard<std::mutex> lk(mu_);
    max_size_ = n;
    trim();
  }
  size_t size() const {
    std::lock_guard<std::mutex> lk(mu_);
    return order_.size();
  }
  void clear() {
    std::lock_guard<std::mutex> lk(mu_);
    index_.clear();
    order_.clear();
  }

  // The plan stored under `key` (now the most recently used), or null.
  std::shared_ptr<const void> find(const std::string& key) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->second;
  }
  // Stores `plan` under `key` as the most recently used, replacing any plan there; kept
  // only while max_size allows.
  void insert(const std::string& key, std::shared_ptr<const void> plan) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      order_.erase(it->second);
      index_.erase(it);
    }
    order_.emplace_front(key, std::move(plan));
    index_[key] = order_.begin();
    trim();
  }

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const void>>;

  void trim() {
    while (order_.size() > max_size_) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
  }

  mutable std::mutex mu_;
  size_t max_size_ = kDefaultMaxSize;
  std::list<Entry> order_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

// The cuDNN convolution plan cache of cuda device `index` (as
// torch.backends.cuda.cufft_plan_cache[index]); any index >= 0 has one, used or not.
inline PlanCache& cudnn_conv_plan_cache(int index) {
  SG_CHECK(index >= 0, ValueError, "cudnn_conv_plan_cache: device index ", index,
           " is negative; pass the index of a cuda device (0 for cuda:0)");
  static std::mutex mu;
  static auto* caches = new std::map<int, std::unique_ptr<PlanCache>>();  // leaked, as streams
  std::lock_guard<std::mutex> lk(mu);
  std::unique_ptr<PlanCache>& c = (*caches)[index];
  if (c == nullptr) c = std::make_unique<PlanCache>();
  return *c;
}

// The oneDNN convolution plan cache of the host (cpu and sim streams share it: their
// kernels are the same code on the same processor).
inline PlanCache& onednn_conv_plan_cache() {
  static auto* cache = new PlanCache();  // leaked: plans may be used by sim threads at exit
  return *cache;
}

}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_PLAN_CACHE_H_
