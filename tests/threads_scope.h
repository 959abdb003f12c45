// ThreadsScope: sets the kernels' thread count (set_num_threads) for a scope and restores
// the previous count when the scope ends, for tests that run a case at 1 and 2 threads.
//
// Thread-safety: changes a process-wide setting; call from the test thread. Failure: none.
#ifndef STREAMGRAD_TESTS_THREADS_SCOPE_H_
#define STREAMGRAD_TESTS_THREADS_SCOPE_H_

#include "runtime/runtime.h"

namespace streamgrad {
namespace testing {

class ThreadsScope {
 public:
  explicit ThreadsScope(int n) : saved_(get_num_threads()) { set_num_threads(n); }
  ~ThreadsScope() { set_num_threads(saved_); }
  ThreadsScope(const ThreadsScope&) = delete;
  ThreadsScope& operator=(const ThreadsScope&) = delete;

 private:
  int saved_;
};

}  // namespace testing
}  // namespace streamgrad

#endif  // STREAMGRAD_TESTS_THREADS_SCOPE_H_
