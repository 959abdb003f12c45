// The key-value stores processes meet at (rendezvous), as the reference framework's
// torch.distributed.TCPStore and FileStore (at the end of this file):
//
//   // rank 0 hosts it; every process (rank 0 too) is a client
//   TCPStore store("127.0.0.1", 29500, /*world_size=*/2, /*is_master=*/rank == 0);
//   store.set("addr/1", "...");
//   std::string peer = store.get("addr/0");     // waits until rank 0 has set it
//   int64_t n = store.add("arrived", 1);        // atomic counter
//
// The master listens on the port (0: a free one, port() tells which) and serves every
// client from one thread. Constructing a store is a rendezvous: it returns once all
// world_size processes have connected and agree on world_size, or throws — except a
// master made with wait_for_workers false (as the reference's), which returns at once
// (so that port() can be handed out) and waits in wait_for_workers().
// get() and wait() wait up to the store's timeout (default 30 s, as the reference's).
//
// Thread-safety: one store object may be used by several threads (requests are
// serialised). Failure: DistributedError — naming the key, the address and the timeout —
// when a key does not appear in time, when processes do not arrive (saying how many did),
// when they disagree on world_size, when the address cannot be listened on or reached, and
// when the connection to the master breaks (a dead master). Never hangs past the timeout.
#ifndef STREAMGRAD_DISTRIBUTED_STORE_H_
#define STREAMGRAD_DISTRIBUTED_STORE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace streamgrad {
namespace distributed {

constexpr std::chrono::milliseconds kDefaultStoreTimeout{30000};

class Store {
 public:
  explicit Store(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  virtual void set(const std::string& key, const std::string& value) = 0;
  // The value of `key`, waiting for it to be set.
  virtual std::string get(const std::string& key) = 0;
  // Adds delta to the integer stored at `key` (0 when absent); returns the sum.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Whether every key is set now.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Waits until every key is set.
  void wait(const std::vector<std::string>& keys);

  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }

 protected:
  // Where this store is, for messages ("the TCP store at 127.0.0.1:29500").
  virtual std::string where() const = 0;
  // The rendezvous of both stores: waits until the counter at `key` reaches `count`;
  // DistributedError after the timeout, saying how many processes arrived.
  void wait_for_count(const std::string& key, int64_t count);

 private:
  std::chrono::milliseconds timeout_;
};

class TCPStore final : public Store {
 public:
  TCPStore(const std::string& host, int port, int world_size, bool is_master,
           std::chrono::milliseconds timeout = kDefaultStoreTimeout,
           bool wait_for_workers = true);
  ~TCPStore() override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  int port() const { return port_; }
  // This process's address on the connection to the master ("10.0.0.2"): the interface
  // that reaches rank 0, which process groups announce so that peers can reach them.
  std::string local_address() const;
  // Returns once world_size processes have joined; DistributedError after the timeout,
  // saying how many did.
  void wait_for_workers();

 protected:
  std::string where() const override;

 private:
  class Server;
  // One request (store.cc's protocol): its reply in *reply, and whether the key was
  // found (for get and check). Throws when the master is gone.
  bool request(char op, const std::string& key, const std::string& value, std::string* reply);
  int world_size_;

  std::string host_;
  int port_;
  std::unique_ptr<Server> server_;  // on the master only
  int fd_ = -1;
  std::mutex mu_;  // one request at a time on fd_
};

// A store in a file that every process can open (the reference's FileStore, init_method
// "file://"), for the processes of one host (a gloo group over it connects on loopback):
//   auto pg = init_process_group("gloo", rank, 2, std::make_shared<FileStore>("/tmp/job", 2));
// Every request locks the file (flock), reads its records and appends; construction is a
// rendezvous of world_size processes (DistributedError after the timeout, saying how many
// arrived), and the last process to destroy its store removes the file, so the path can
// be reused. A file left by a crashed job must be removed before the next one starts (the
// rendezvous then reports more arrivals than world_size).
class FileStore final : public Store {
 public:
  FileStore(std::string path, int world_size,
            std::chrono::milliseconds timeout = kDefaultStoreTimeout);
  ~FileStore() override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;

 protected:
  std::string where() const override;

 private:
  class Locked;
  const std::string path_;
  const int world_size_;
};

}  // namespace distributed
}  // namespace streamgrad

#endif  // STREAMGRAD_DISTRIBUTED_STORE_H_
