// The gloo process group: collectives of the reference framework's torch.distributed
// (test/distributed/test_c10d_gloo.py: all_reduce with each op, broadcast from any root,
// all_gather, reduce_scatter, barrier, argument checks, a peer that is gone or late) over
// loopback TCP, each process of a job played by a thread with its own store client and
// group. On sim devices the collectives run on a communication stream ordered by events
// against the caller's stream, which CI also checks under the stream sanitizer.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "distributed/process_group.h"
#include "engine/factories.h"
#include "ops/ops.h"
#include "runtime/observe/stream_sanitizer.h"
#include "runtime/runtime.h"
#include "tests/distributed/world.h"

namespace streamgrad {
namespace {

using distributed::ProcessGroup;
using distributed::ReduceOp;
using distributed::TCPStore;
using std::chrono::milliseconds;
using testing::run_world;
using testing::values;

TEST_CASE("all_reduce, broadcast, all_gather, reduce_scatter and barrier on cpu",
          "[distributed]") {
  const int world = GENERATE(2, 4);
  const double n = world;
  run_world(world, [n](int rank, ProcessGroup& pg) {
    TCHECK_EQ(pg.rank(), rank);
    TCHECK_EQ(pg.size(), static_cast<int>(n));
    const TensorOptions f32 = TensorOptions().dtype(DType::kFloat32);
    Tensor sum_t = full({3}, rank + 1, f32);
    pg.all_reduce(sum_t);
    TCHECK_EQ(values(sum_t), std::vector<double>(3, n * (n + 1) / 2));
    Tensor max_t = full({2}, rank, TensorOptions().dtype(DType::kInt64));
    pg.all_reduce(max_t, ReduceOp::kMax);
    TCHECK_EQ(values(max_t), std::vector<double>(2, n - 1));
    Tensor min_t = full({2}, rank + 5, TensorOptions().dtype(DType::kFloat64));
    pg.all_reduce(min_t, ReduceOp::kMin);
    TCHECK_EQ(values(min_t), std::vector<double>(2, 5));
    Tensor avg_t = full({4}, 2 * rank, f32);
    pg.all_reduce(avg_t, ReduceOp::kAvg);
    TCHECK_EQ(values(avg_t), std::vector<double>(4, n - 1));
    Tensor prod_t = full({1}, 2, TensorOptions().dtype(DType::kInt64));
    pg.all_reduce(prod_t, ReduceOp::kProduct);
    TCHECK_EQ(values(prod_t)[0], std::pow(2.0, n));

    Tensor b = full({2, 2}, rank == 1 ? 7 : -1, f32);
    pg.broadcast(b, /*root=*/1);
    TCHECK_EQ(values(b), std::vector<double>(4, 7));

    const Tensor mine = full({2}, rank * 10, f32);
    std::vector<Tensor> all;
    for (int i = 0; i < pg.size(); ++i) all.push_back(zeros({2}, f32));
    pg.all_gather(all, mine);
    for (int i = 0; i < pg.size(); ++i) TCHECK_EQ(values(all[i]), std::vector<double>(2, i * 10));

    std::vector<Tensor> parts;  // part i of every process holds i + rank
    for (int i = 0; i < pg.size(); ++i) parts.push_back(full({2}, i + rank, f32));
    Tensor out = zeros({2}, f32);
    pg.reduce_scatter(out, parts);
    // sum over processes r of (rank + r) = n * rank + n (n - 1) / 2
    TCHECK_EQ(values(out), std::vector<double>(2, n * rank + n * (n - 1) / 2));
    pg.barrier();
  });
}

TEST_CASE("collectives on sim tensors run on a communication stream, ordered by events",
          "[distributed][sim]") {
  run_world(2, [](int rank, ProcessGroup& pg) {
    const Device d(DeviceType::kSim, rank);
    StreamGuard side(Stream::create(d));  // the caller's stream is a side stream
    Tensor t = full({1000}, rank + 1, TensorOptions().device(d));
    Tensor u = mul(t, 2.0);  // queued before the collective: it must read the old value
    pg.all_reduce(t);
    Tensor v = add(t, 1.0);  // queued after: it must read the sum
    TCHECK_EQ(values(u), std::vector<double>(1000, 2.0 * (rank + 1)));
    TCHECK_EQ(values(v), std::vector<double>(1000, 4.0));
    std::vector<Tensor> all{empty({3}, TensorOptions().device(d)),
                            empty({3}, TensorOptions().device(d))};
    pg.all_gather(all, full({3}, rank, TensorOptions().device(d)));
    TCHECK_EQ(values(all[1]), std::vector<double>(3, 1.0));
  });
}

// Issue 28: the group keeps a collective's tensors alive with its Work, not with
// record_stream. Under the deterministic scheduler nothing runs until a host wait, so the
// communication stream has not run the collective when the tensor is dropped.
TEST_CASE("a waited collective's memory goes back to the caller's stream at once, an "
          "unwaited one's only after the collective", "[distributed][sim][S8]") {
  SimSchedulerOptions o;
  o.kind = SimSchedulerKind::kDeterministic;
  SimSchedulerScope scope(o);
  StreamSanitizer san(StreamSanitizer::Mode::kCollect);
  run_world(1, [](int, ProcessGroup& pg) {
    const Device d("sim:2");
    const TensorOptions on = TensorOptions().device(d);
    StreamGuard side(Stream::create(d));
    void* first;
    {
      Tensor t = full({4096}, 1.0, on);
      first = t.data_ptr();
      pg.all_reduce_async(t)->wait();  // the side stream now waits for the collective
    }
    Tensor again = full({4096}, 2.0, on);
    TCHECK(again.data_ptr() == first);  // record_stream would hold it until comm ran
    void* second;
    {
      Tensor t = full({4096}, 3.0, on);
      second = t.data_ptr();
      pg.all_reduce_async(t);  // dropped without wait(): the collective may still read t
    }
    Tensor other = full({4096}, 4.0, on);
    TCHECK(other.data_ptr() != second);
    TCHECK_EQ(values(again), std::vector<double>(4096, 2.0));
    TCHECK_EQ(values(other), std::vector<double>(4096, 4.0));
  });
  synchronize(Device("sim:2"));
  CHECK(san.findings().empty());
}

TEST_CASE("repeated collectives on sim streams keep their order and their results",
          "[distributed][sim]") {
  run_world(2, [](int rank, ProcessGroup& pg) {
    const TensorOptions on = TensorOptions().device(Device(DeviceType::kSim, rank));
    for (int it = 0; it < 20; ++it) {
      Tensor t = full({1000}, rank + it, on);
      pg.all_reduce(t);
      std::vector<Tensor> all{empty({3}, on), empty({3}, on)};
      pg.all_gather(all, full({3}, rank + it, on));
      Tensor b = full({5}, rank == 0 ? it : -1, on);
      pg.broadcast(b, 0);
      TCHECK_EQ(values(t), std::vector<double>(1000, 1 + 2 * it));
      TCHECK_EQ(values(all[0]), std::vector<double>(3, it));
      TCHECK_EQ(values(all[1]), std::vector<double>(3, 1 + it));
      TCHECK_EQ(values(b), std::vector<double>(5, it));
    }
  });
}

TEST_CASE("collectives refuse tensors they cannot take, before any communication",
          "[distributed][errors]") {
  run_world(1, [](int, ProcessGroup& pg) {
    Tensor t = transpose(zeros({2, 3}), 0, 1);
    CHECK_THROWS_WITH(pg.all_reduce(t), Catch::Contains("not contiguous"));
    Tensor flags = zeros({2}, TensorOptions().dtype(DType::kBool));
    CHECK_THROWS_WITH(pg.all_reduce(flags), Catch::Contains("not float32, float64 or int64"));
    Tensor ints = zeros({2}, TensorOptions().dtype(DType::kInt64));
    CHECK_THROWS_WITH(pg.all_reduce(ints, ReduceOp::kAvg), Catch::Contains("kAvg"));
    Tensor f = zeros({2});
    CHECK_THROWS_WITH(pg.broadcast(f, 3), Catch::Contains("root 3"));
    std::vector<Tensor> two{zeros({2}), zeros({2})};
    CHECK_THROWS_WITH(pg.all_gather(two, f), Catch::Contains("2 tensors for a group of 1"));
  });
  CHECK_THROWS_WITH(distributed::init_process_group(
                        "mpi", 0, 1, std::make_shared<TCPStore>("127.0.0.1", 0, 1, true)),
                    Catch::Contains("backend 'mpi' is not in this program (it has 'gloo'"));

}

TEST_CASE("a peer that is gone or never joins is an error within the timeout, not a hang",
          "[distributed][errors]") {
  SECTION("a peer exits") {
    CHECK_THROWS_WITH(run_world(2,
                                [](int rank, ProcessGroup& pg) {
                                  pg.barrier();  // both connected before one leaves
                                  if (rank == 1) return;  // its group is destroyed
                                  Tensor t = ones({4});
                                  pg.all_reduce(t);
                                },
                                milliseconds(2000)),
                      Catch::Contains("all_reduce on rank 0 of 2 failed"));
  }
  SECTION("a peer exits while a sim collective is queued: the caller's stream reports it") {
    CHECK_THROWS_WITH(
        run_world(2,
                  [](int rank, ProcessGroup& pg) {
                    pg.barrier();
                    if (rank == 1) return;
                    Tensor t = ones({4}, TensorOptions().device(Device(DeviceType::kSim, 0)));
                    pg.all_reduce(t);  // returns at once; fails on the communication stream
                    Tensor u = add(t, 1.0);
                    u.to_vector<float>();  // synchronises the caller's stream: raises it
                  },
                  milliseconds(2000)),
        Catch::Contains("all_reduce on rank 0 of 2 failed"));
  }
  SECTION("a peer never joins the collective") {
    std::promise<void> done;
    std::shared_future<void> finished = done.get_future().share();
    CHECK_THROWS_WITH(run_world(2,
                                [&](int rank, ProcessGroup& pg) {
                                  if (rank == 1) {  // alive, but elsewhere
                                    finished.wait();
                                    return;
                                  }
                                  Tensor t = ones({4});
                                  try {
                                    pg.all_reduce(t);
                                  } catch (...) {
                                    done.set_value();
                                    throw;
                                  }
                                  done.set_value();
                                },
                                milliseconds(500)),
                      Catch::Contains("did not join this collective within 500 ms"));
  }
}

TEST_CASE("init_process_group_from_env reads the launcher's variables", "[distributed]") {
  ::unsetenv("MASTER_ADDR");
  CHECK_THROWS_WITH(distributed::init_process_group_from_env("gloo"),
                    Catch::Contains("MASTER_ADDR is not set"));
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", "0", 1);
  ::setenv("RANK", "0", 1);
  ::setenv("WORLD_SIZE", "x", 1);
  CHECK_THROWS_WITH(distributed::init_process_group_from_env("gloo"),
                    Catch::Contains("WORLD_SIZE is malformed ('x')"));
  ::setenv("WORLD_SIZE", "1", 1);
  auto pg = distributed::init_process_group_from_env("gloo");
  CHECK(pg->size() == 1);
  Tensor t = full({2}, 3);
  pg->all_reduce(t);
  CHECK(values(t) == std::vector<double>{3, 3});
}

}  // namespace
}  // namespace streamgrad

namespace streamgrad {
namespace {

TEST_CASE("a gloo group over a file store (init_method file://)", "[distributed][file]") {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/pg_filestore";
  std::remove(path.c_str());
  std::vector<std::thread> ranks;
  std::vector<std::vector<double>> got(2);
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      auto store = std::make_shared<distributed::FileStore>(path, 2);
      auto pg = distributed::init_process_group("gloo", r, 2, store);
      Tensor t = full({3}, r + 1);
      pg->all_reduce(t);
      got[static_cast<size_t>(r)] = testing::values(t);
    });
  }
  for (std::thread& t : ranks) t.join();
  CHECK(got[0] == std::vector<double>(3, 3));
  CHECK(got[1] == std::vector<double>(3, 3));
}

}  // namespace
}  // namespace streamgrad
