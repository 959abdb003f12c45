// The handles and descriptors a stand-in library (cublas.cc, cudnn.cc) has handed out and
// not yet destroyed, so that an unknown, stale or never-created one is refused with the
// library's status instead of being dereferenced.
//
// Thread-safety: every member may be called from any thread. Failure: none (add may throw
// std::bad_alloc, which the callers turn into their allocation status).
#ifndef STREAMGRAD_RUNTIME_CUDAEMU_LIVE_SET_H_
#define STREAMGRAD_RUNTIME_CUDAEMU_LIVE_SET_H_

#include <mutex>
#include <unordered_set>

namespace streamgrad {
namespace cudaemu {

template <typename T>
class LiveSet {
 public:
  void add(T* p) {
    std::lock_guard<std::mutex> lk(mu_);
    live_.insert(p);
  }
  // True if p was live (and is no longer).
  bool remove(T* p) {
    std::lock_guard<std::mutex> lk(mu_);
    return live_.erase(p) == 1;
  }
  bool contains(const T* p) const {
    std::lock_guard<std::mutex> lk(mu_);
    return p != nullptr && live_.count(const_cast<T*>(p)) == 1;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_set<T*> live_;
};

}  // namespace cudaemu
}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_CUDAEMU_LIVE_SET_H_
