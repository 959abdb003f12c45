// TCPStore: the rendezvous and key-value behaviours of the reference framework's
// TCPStore (test/distributed/test_store.py: set/get/add/check/wait across clients, a
// get that times out, world sizes that disagree, a rank that never arrives, a port in
// use) — each process of a job played here by a thread with its own store object,
// talking over loopback TCP.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "distributed/store.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace {

using distributed::TCPStore;
using std::chrono::milliseconds;

// A master on a free port that does not wait for its workers (they need its port first).
std::unique_ptr<TCPStore> master(int world_size, milliseconds timeout = milliseconds(5000)) {
  return std::make_unique<TCPStore>("127.0.0.1", 0, world_size, /*is_master=*/true, timeout,
                                    /*wait_for_workers=*/false);
}

TEST_CASE("processes share keys, counters and waits through the TCP store", "[distributed]") {
  auto m = master(3);
  const int port = m->port();
  CHECK(port > 0);
  auto client = [port] {
    return std::make_unique<TCPStore>("127.0.0.1", port, 3, /*is_master=*/false);
  };
  auto f1 = std::async(std::launch::async, client);
  auto f2 = std::async(std::launch::async, client);
  m->wait_for_workers();
  std::unique_ptr<TCPStore> a = f1.get(), b = f2.get();
  m->set("addr/0", "host-a:1234");
  CHECK(a->get("addr/0") == "host-a:1234");
  CHECK_FALSE(b->check({"addr/0", "addr/1"}));
  auto late = std::async(std::launch::async, [&] { return b->get("addr/1"); });  // waits
  std::this_thread::sleep_for(milliseconds(50));
  a->set("addr/1", std::string("with\0nul", 8));
  CHECK(late.get() == std::string("with\0nul", 8));
  b->wait({"addr/0", "addr/1"});
  CHECK(b->check({"addr/0", "addr/1"}));
  a->set("addr/0", "replaced");
  CHECK(m->get("addr/0") == "replaced");
  // add is atomic across processes and threads.
  std::vector<std::thread> adders;
  for (TCPStore* s : {m.get(), a.get(), b.get()}) {
    adders.emplace_back([s] {
      for (int i = 0; i < 100; ++i) s->add("count", 2);
    });
  }
  for (std::thread& t : adders) t.join();
  CHECK(m->add("count", 0) == 600);
  CHECK(a->add("count", -600) == 0);
}

TEST_CASE("a key that never comes is an error after the timeout, naming it", "[distributed]") {
  auto m = std::make_unique<TCPStore>("127.0.0.1", 0, 1, true, milliseconds(200));
  CHECK_THROWS_AS(m->get("nope"), DistributedError);
  CHECK_THROWS_WITH(m->get("nope"), Catch::Contains("key 'nope' was not set within 200 ms") &&
                                        Catch::Contains("127.0.0.1:"));
  CHECK_THROWS_WITH(m->wait({"nope"}), Catch::Contains("'nope'"));
}

TEST_CASE("rendezvous reports a rank that never arrives and world sizes that disagree",
          "[distributed]") {
  SECTION("one of two arrives") {
    CHECK_THROWS_WITH(TCPStore("127.0.0.1", 0, 2, true, milliseconds(300)),
                      Catch::Contains("only 1 of 2 processes arrived") &&
                          Catch::Contains("within 300 ms"));
  }
  SECTION("world sizes differ") {
    auto m = master(2, milliseconds(300));
    CHECK_THROWS_WITH(TCPStore("127.0.0.1", m->port(), 3, false, milliseconds(300)),
                      Catch::Contains("started with world_size 3") &&
                          Catch::Contains("the master (rank 0) with 2"));
    CHECK_THROWS_WITH(m->wait_for_workers(), Catch::Contains("only 1 of 2"));
  }
  SECTION("no master") {
    int port = 0;
    { port = master(1)->port(); }  // a port nobody listens on any more
    CHECK_THROWS_WITH(TCPStore("127.0.0.1", port, 2, false, milliseconds(200)),
                      Catch::Contains("no master at") && Catch::Contains("within 200 ms"));
  }
}

TEST_CASE("a dead master is an error on the clients, not a hang", "[distributed]") {
  auto m = master(2);
  auto f = std::async(std::launch::async, [port = m->port()] {
    return std::make_unique<TCPStore>("127.0.0.1", port, 2, false);
  });
  m->wait_for_workers();
  std::unique_ptr<TCPStore> client = f.get();
  m.reset();  // rank 0 exits
  CHECK_THROWS_WITH(client->get("anything"),
                    Catch::Contains("lost the TCP store") && Catch::Contains("rank 0"));
}

TEST_CASE("bad addresses and ports are refused with the reason", "[distributed]") {
  auto m = master(1);
  CHECK_THROWS_WITH(TCPStore("127.0.0.1", m->port(), 1, true, milliseconds(200)),
                    Catch::Contains("cannot listen on port"));
  CHECK_THROWS_WITH(TCPStore("no-such-host.invalid", 29500, 2, false, milliseconds(200)),
                    Catch::Contains("cannot resolve MASTER_ADDR 'no-such-host.invalid'"));
  CHECK_THROWS_WITH(TCPStore("127.0.0.1", 70000, 2, false), Catch::Contains("not a TCP port"));
  CHECK_THROWS_WITH(TCPStore("127.0.0.1", 29500, 0, false), Catch::Contains("world_size 0"));
}

}  // namespace
}  // namespace streamgrad

namespace streamgrad {
namespace {

using distributed::FileStore;

std::string fresh_path(const char* name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::remove(path.c_str());
  return path;
}

TEST_CASE("the file store: a rendezvous, shared keys and counters, removed by the last",
          "[distributed][file]") {
  const std::string path = fresh_path("filestore_shared");
  std::vector<std::future<std::string>> peers;
  for (int r = 0; r < 3; ++r) {
    peers.push_back(std::async(std::launch::async, [&path, r] {
      FileStore store(path, 3, milliseconds(5000));
      store.set("rank/" + std::to_string(r), std::string("\0r", 2) + std::to_string(r));
      store.add("count", 10);
      std::string all;
      for (int p = 0; p < 3; ++p) all += store.get("rank/" + std::to_string(p)).substr(1);
      store.wait({"rank/0", "rank/1", "rank/2"});
      while (store.add("count", 0) < 30) std::this_thread::sleep_for(milliseconds(1));
      return all;
    }));
  }
  for (auto& p : peers) CHECK(p.get() == "r0r1r2");
  std::ifstream gone(path);
  CHECK_FALSE(gone.good());  // the last store removed the file
}

TEST_CASE("the file store reports a process that never arrives and a stale file",
          "[distributed][file][errors]") {
  const std::string path = fresh_path("filestore_late");
  CHECK_THROWS_WITH(FileStore(path, 2, milliseconds(200)),
                    Catch::Contains("1 of 2 processes arrived") &&
                        Catch::Contains("within 200 ms"));
  std::remove(path.c_str());
  {
    std::ofstream stale(path);  // as a crashed job of one leaves it: arrived = 1
  }
  FileStore first(path, 1, milliseconds(200));  // arrives as the only process
  CHECK_THROWS_WITH(FileStore(path, 1, milliseconds(200)),
                    Catch::Contains("2 processes arrived") && Catch::Contains("remove it"));
  CHECK_THROWS_WITH(FileStore("/nonexistent-dir/x", 1), Catch::Contains("cannot open"));
  CHECK_THROWS_WITH(FileStore(fresh_path("filestore_get"), 1, milliseconds(100)).get("never"),
                    Catch::Contains("'never'") && Catch::Contains("the file store"));
}

}  // namespace
}  // namespace streamgrad
