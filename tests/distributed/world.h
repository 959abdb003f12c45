// Test helpers for distributed/: a job of `world` processes played by threads of this
// process over loopback TCP, each with its own store client and process group, and
// thread-safe Catch2 checks for code running on those threads.
#ifndef STREAMGRAD_TESTS_DISTRIBUTED_WORLD_H_
#define STREAMGRAD_TESTS_DISTRIBUTED_WORLD_H_

#include <catch2/catch.hpp>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "distributed/process_group.h"
#include "engine/tensor.h"
#include "ops/ops.h"

namespace streamgrad {
namespace testing {

// Catch2's assertions are not thread-safe: the ranks' threads take turns. The operands
// are evaluated before the lock is taken: evaluating one may wait for a collective, which
// needs the other ranks, which may be waiting for this lock.
inline std::mutex& catch_mutex() {
  static std::mutex mu;
  return mu;
}
#define TCHECK_EQ(a, b)                                                  \
  do {                                                                   \
    const auto lhs = (a);                                                \
    const auto rhs = (b);                                                \
    std::lock_guard<std::mutex> lk(::streamgrad::testing::catch_mutex()); \
    CHECK(lhs == rhs);                                                   \
  } while (0)
#define TCHECK(cond)                                                     \
  do {                                                                   \
    const bool ok = (cond);                                              \
    std::lock_guard<std::mutex> lk(::streamgrad::testing::catch_mutex()); \
    CHECK(ok);                                                           \
  } while (0)

// Runs fn(rank, group) on `world` threads, one group of `backend` each; rethrows the first
// failure.
inline void run_world(int world, const std::function<void(int, distributed::ProcessGroup&)>& fn,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds(10000),
                      const std::string& backend = "gloo") {
  using distributed::TCPStore;
  auto master = std::make_shared<TCPStore>("127.0.0.1", 0, world, true, timeout, false);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        std::shared_ptr<distributed::Store> store =
            r == 0 ? std::static_pointer_cast<distributed::Store>(master)
                   : std::make_shared<TCPStore>("127.0.0.1", master->port(), world, false, timeout);
        auto group = distributed::init_process_group(backend, r, world, store, timeout);
        fn(r, *group);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e != nullptr) std::rethrow_exception(e);
  }
}

// A tensor's values as doubles on the host (synchronises its stream).
inline std::vector<double> values(const Tensor& t) {
  return to(to(t, DType::kFloat64), Device("cpu")).to_vector<double>();
}

}  // namespace testing
}  // namespace streamgrad

#endif  // STREAMGRAD_TESTS_DISTRIBUTED_WORLD_H_
