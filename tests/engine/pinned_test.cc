// pin_memory() / is_pinned() tensors (engine/pinned.h). Behaviours from the reference
// framework (test_cuda.py, test_torch.py): pin_memory returns a pinned copy with the same
// values and an already-pinned tensor as it is; a non_blocking copy from a pinned tensor
// does not block the host; dropping a pinned tensor right after a non_blocking copy
// does not let its memory be reused under the copy (the caching host allocator records
// the copy's stream).
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "engine/pinned.h"
#include "tests/engine/engine_test_util.h"

namespace streamgrad {
namespace {

using testing::adversarial;

const Device kDev("sim:0");

std::vector<float> iota(int n, float first) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = first + static_cast<float>(i);
  return v;
}

// A pageable cpu tensor, whatever the current device.
Tensor host(const std::vector<float>& v) {
  return from_vector<float>(v, {static_cast<int64_t>(v.size())}, TensorOptions().device("cpu"));
}

TEST_CASE("dropping a pinned tensor under a pending non-blocking copy does not free it for reuse",
          "[pinned][S8]") {
  for (uint64_t seed = 0; seed < 5; ++seed) {
    SimSchedulerScope scope(adversarial(seed));  // the copy runs only when the host waits
    const Stream side = Stream::create(kDev);
    StreamGuard g(side);
    Tensor p = pin_memory(host(iota(64, 1)));
    REQUIRE(is_pinned(p));
    const void* block = p.data_ptr();
    Tensor d = to(p, kDev, /*non_blocking=*/true);
    REQUIRE_FALSE(side.query());
    p = Tensor();
    Tensor q = pin_memory(host(std::vector<float>(64, -1.0f)));
    INFO("seed " << seed);
    CHECK(q.data_ptr() != block);
    CHECK(d.to_vector<float>() == iota(64, 1));
    CHECK(q.to_vector<float>() == std::vector<float>(64, -1.0f));
  }
}

TEST_CASE("threads pinning, copying and dropping at once each get their own values",
          "[pinned][S8][threads]") {
  SimSchedulerScope scope(testing::threaded_jitter(3, 50));  // copies start late
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &wrong] {
      const Stream s = Stream::create(kDev);
      StreamGuard g(s);
      for (int i = 0; i < 20; ++i) {
        const std::vector<float> want(16, static_cast<float>(t * 1000 + i));
        Tensor d = to(pin_memory(host(want)), kDev, /*non_blocking=*/true);  // pinned dropped
        Tensor other = pin_memory(host(std::vector<float>(16, -1.0f)));
        if (d.to_vector<float>() != want) ++wrong[t];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  CHECK(wrong == std::vector<int>(4, 0));
}

TEST_CASE("the stream sanitizer sees no race when a pinned tensor is dropped under a copy",
          "[pinned][sanitizer]") {
  SimSchedulerScope scope(adversarial(1));
  StreamSanitizer san(StreamSanitizer::Mode::kCollect);
  const Stream side = Stream::create(kDev);
  StreamGuard g(side);
  Tensor p = pin_memory(host(iota(16, 0)));
  Tensor d = to(p, kDev, /*non_blocking=*/true);
  p = Tensor();
  Tensor q = pin_memory(host(iota(16, 100)));  // written by a cpu launch
  CHECK(d.to_vector<float>() == iota(16, 0));
  for (const SanitizerFinding& f : san.findings()) FAIL(f.message);
}

TEST_CASE("a pinned tensor dropped after its copy completed gives its block to the next one",
          "[pinned]") {
  for (const Device target : {Device("sim:0"), Device("sim:1")}) {
    synchronize(target);
    host_empty_cache();
    const int64_t hits = host_memory_stats().num_cache_hits;
    Tensor p = pin_memory(host(iota(32, 0)));
    const void* block = p.data_ptr();
    Tensor d = to(p, target, /*non_blocking=*/true);
    current_stream(target).synchronize();
    p = Tensor();
    Tensor q = pin_memory(host(iota(32, 5)));
    INFO(target.str());
    CHECK(q.data_ptr() == block);
    CHECK(host_memory_stats().num_cache_hits == hits + 1);
    CHECK(d.to_vector<float>() == iota(32, 0));
  }
}

TEST_CASE("pin_memory copies values, sizes and dtype into a contiguous pinned tensor",
          "[pinned]") {
  Tensor a = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK_FALSE(is_pinned(a));
  Tensor t = transpose(a, 0, 1);  // non-contiguous view
  Tensor p = pin_memory(t);
  CHECK(is_pinned(p));
  CHECK(p.device() == Device("cpu"));
  CHECK(p.dtype() == DType::kFloat64);
  CHECK(p.sizes() == Shape{3, 2});
  CHECK(p.is_contiguous());
  CHECK(p.to_vector<double>() == std::vector<double>{1, 4, 2, 5, 3, 6});
  CHECK(pin_memory(p).is_same(p));  // already pinned: returned as it is
  CHECK(is_pinned(pin_memory(host({}))));
}

TEST_CASE("a non-blocking copy from a pinned tensor does not block; from pageable it does",
          "[pinned]") {
  SimSchedulerScope scope(adversarial(0));
  const Stream side = Stream::create(kDev);
  StreamGuard g(side);
  Tensor pageable = host(iota(8, 0));
  Tensor d1 = to(pageable, kDev, /*non_blocking=*/true);
  CHECK(side.query());  // pageable: the copy completed before to() returned
  Tensor d2 = to(pin_memory(pageable), kDev, /*non_blocking=*/true);
  CHECK_FALSE(side.query());
  CHECK(d2.to_vector<float>() == iota(8, 0));
}

TEST_CASE("pin_memory refuses what it cannot pin, allocating nothing", "[pinned][errors]") {
  const int64_t allocs = host_memory_stats().num_allocs;
  CHECK_THROWS_WITH(pin_memory(zeros({2}, TensorOptions().device(kDev))),
                    Catch::Contains("pin_memory") && Catch::Contains("sim:0") &&
                        Catch::Contains("not on cpu"));
  CHECK_THROWS_AS(pin_memory(zeros({2}, TensorOptions().device(kDev))), DeviceError);
  CHECK_THROWS_AS(pin_memory(host({1, 2}).requires_grad_()), ValueError);
  CHECK_THROWS_AS(pin_memory(Tensor()), Error);
  CHECK_THROWS_AS(is_pinned(Tensor()), Error);
  CHECK(host_memory_stats().num_allocs == allocs);
}

}  // namespace
}  // namespace streamgrad
