#include "distributed/store.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <algorithm>
#include <cstring>
#include <map>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace distributed {
namespace {

// The protocol: a request is op (1 byte), key length (4), key, value length (4), value; a
// reply is status (1 byte), length (4), payload. Lengths are host order: every process
// of a job runs this same code on one kind of machine.
constexpr char kSet = 'S', kGet = 'G', kAdd = 'A', kCheck = 'C';
constexpr auto kPoll = std::chrono::milliseconds(10);

std::string errno_text() { return std::strerror(errno); }

// Reads or writes exactly n bytes; false on EOF or error.
bool read_all(int fd, void* buf, size_t n) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r == 0) return false;
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool write_all(int fd, const void* buf, size_t n) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    // MSG_NOSIGNAL: a peer that is gone is an error to report, not a SIGPIPE that kills.
    const ssize_t r = ::send(fd, p, n, MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool write_string(int fd, const std::string& s) {
  const uint32_t n = static_cast<uint32_t>(s.size());
  return write_all(fd, &n, sizeof(n)) && write_all(fd, s.data(), s.size());
}

bool read_string(int fd, std::string* s) {
  uint32_t n = 0;
  if (!read_all(fd, &n, sizeof(n))) return false;
  s->resize(n);
  return n == 0 || read_all(fd, &(*s)[0], n);
}

}  // namespace

void Store::wait(const std::vector<std::string>& keys) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (!check(keys)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string names;
      for (const std::string& k : keys) {
        absl::StrAppend(&names, names.empty() ? "'" : ", '", k, "'");
      }
      throw DistributedError(absl::StrCat("wait: keys ", names, " were not all set within ",
                                          timeout_.count(), " ms at ", where(),
                                          "; a process may have failed or not started"));
    }
    std::this_thread::sleep_for(kPoll);
  }
}

void Store::wait_for_count(const std::string& key, int64_t count) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (;;) {
    const int64_t arrived = add(key, 0);
    if (arrived >= count) return;
    if (std::chrono::steady_clock::now() >= deadline) {
      throw DistributedError(absl::StrCat(
          "only ", arrived, " of ", count, " processes arrived at ", where(), " within ",
          timeout_.count(), " ms; a process failed to start, or was given another store "
          "(MASTER_ADDR/MASTER_PORT, or the file's path)"));
    }
    std::this_thread::sleep_for(kPoll);
  }
}

// The master's side: one thread polls the listening socket, every client and a pipe that
// wakes it to stop. Requests are answered at once (get of a missing key says so; clients
// poll), so one slow client never holds up the others.
class TCPStore::Server {
 public:
  explicit Server(int port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    SG_CHECK(listen_fd_ >= 0, DistributedError, "TCPStore: socket: ", errno_text());
    const int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);  // reachable from other hosts' ranks too
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(listen_fd_, 128) != 0) {
      const std::string why = errno_text();
      ::close(listen_fd_);
      throw DistributedError(absl::StrCat("TCPStore: the master cannot listen on port ", port,
                                          ": ", why,
                                          "; pick a free MASTER_PORT, or 0 for any free port"));
    }
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    SG_CHECK(::pipe(wake_) == 0, DistributedError, "TCPStore: pipe: ", errno_text());
    thread_ = std::thread([this] { serve(); });
  }
  ~Server() {
    const char stop = 0;
    (void)!::write(wake_[1], &stop, 1);
    thread_.join();
    for (int fd : {listen_fd_, wake_[0], wake_[1]}) ::close(fd);
  }
  int port() const { return port_; }

 private:
  void serve() {
    std::vector<int> clients;
    for (;;) {
      std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
      for (int c : clients) fds.push_back({c, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (fds[0].revents != 0) break;
      if ((fds[1].revents & POLLIN) != 0) {
        const int c = ::accept(listen_fd_, nullptr, nullptr);
        if (c >= 0) clients.push_back(c);
      }
      for (size_t i = 2; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        if (!answer(fds[i].fd)) {
          ::close(fds[i].fd);
          clients.erase(std::find(clients.begin(), clients.end(), fds[i].fd));
        }
      }
    }
    for (int c : clients) ::close(c);
  }

  // One request of client `fd`; false when the client has gone.
  bool answer(int fd) {
    char op = 0;
    std::string key, value;
    if (!read_all(fd, &op, 1) || !read_string(fd, &key) || !read_string(fd, &value)) {
      return false;
    }
    char status = 1;
    std::string reply;
    if (op == kSet) {
      data_[key] = value;
    } else if (op == kGet) {
      const auto it = data_.find(key);
      status = it != data_.end();
      if (status) reply = it->second;
    } else if (op == kAdd) {
      int64_t now = 0, delta = 0;
      const auto it = data_.find(key);
      if (it != data_.end()) (void)absl::SimpleAtoi(it->second, &now);
      (void)absl::SimpleAtoi(value, &delta);
      reply = data_[key] = std::to_string(now + delta);
    } else if (op == kCheck) {
      status = data_.count(key) == 1;
    } else {
      status = 2;  // unknown request: not a TCPStore client
    }
    return write_all(fd, &status, 1) && write_string(fd, reply);
  }

  int listen_fd_ = -1, port_ = 0;
  int wake_[2] = {-1, -1};
  std::map<std::string, std::string> data_;  // the serving thread's alone
  std::thread thread_;
};

TCPStore::TCPStore(const std::string& host, int port, int world_size, bool is_master,
                   std::chrono::milliseconds timeout, bool wait_for_workers)
    : Store(timeout), world_size_(world_size), host_(host), port_(port) {
  SG_CHECK(world_size >= 1, DistributedError, "TCPStore: world_size ", world_size,
           " must be at least 1");
  SG_CHECK(port >= 0 && port < 65536, DistributedError, "TCPStore: port ", port,
           " is not a TCP port (0 to 65535)");
  SG_CHECK(is_master || port > 0, DistributedError,
           "TCPStore: a client needs the master's port; only the master may pass 0");
  if (is_master) {
    server_ = std::make_unique<Server>(port);
    port_ = server_->port();
  }
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port_).c_str(), &hints, &found);
  SG_CHECK(rc == 0, DistributedError, "TCPStore: cannot resolve MASTER_ADDR '", host, "': ",
           gai_strerror(rc));
  // The master may not be listening yet: retry until the timeout.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string why;
  for (;;) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ >= 0 && ::connect(fd_, found->ai_addr, found->ai_addrlen) == 0) break;
    why = errno_text();
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(kPoll * 5);
  }
  ::freeaddrinfo(found);
  if (fd_ < 0) {
    server_.reset();
    throw DistributedError(absl::StrCat("TCPStore: no master at ", where(), " within ",
                                        timeout.count(), " ms (", why,
                                        "); start rank 0 first or check MASTER_ADDR/MASTER_PORT"));
  }
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  // A master that stops answering must not hang this process past the timeout.
  timeval tv{static_cast<time_t>(timeout.count() / 1000),
             static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  try {
    if (is_master) set("__world_size", std::to_string(world_size));
    int64_t theirs = 0;
    (void)absl::SimpleAtoi(get("__world_size"), &theirs);
    SG_CHECK(theirs == world_size, DistributedError, "TCPStore: this process was started with "
             "world_size ", world_size, " but the master (rank 0) with ", theirs,
             "; start every process with the same WORLD_SIZE");
    add("__joined", 1);
    if (!is_master || wait_for_workers) this->wait_for_workers();
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

TCPStore::~TCPStore() {
  if (fd_ >= 0) ::close(fd_);
}

std::string TCPStore::local_address() const {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  char text[INET_ADDRSTRLEN] = "127.0.0.1";
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    ::inet_ntop(AF_INET, &addr.sin_addr, text, sizeof(text));
  }
  return text;
}

std::string TCPStore::where() const { return absl::StrCat("the TCP store at ", host_, ":", port_); }

void TCPStore::wait_for_workers() { wait_for_count("__joined", world_size_); }

bool TCPStore::request(char op, const std::string& key, const std::string& value,
                       std::string* reply) {
  std::lock_guard<std::mutex> lk(mu_);
  char status = 0;
  if (!write_all(fd_, &op, 1) || !write_string(fd_, key) || !write_string(fd_, value) ||
      !read_all(fd_, &status, 1) || !read_string(fd_, reply)) {
    throw DistributedError(absl::StrCat(
        "TCPStore: lost ", where(), " during a request for key '", key, "' (", errno_text(),
        "); the master process (rank 0) has probably exited"));
  }
  SG_CHECK(status != 2, DistributedError, "TCPStore: ", where(), " did not understand a request; "
           "is something else listening on that port?");
  return status == 1;
}

void TCPStore::set(const std::string& key, const std::string& value) {
  std::string ignored;
  request(kSet, key, value, &ignored);
}

std::string TCPStore::get(const std::string& key) {
  const auto deadline = std::chrono::steady_clock::now() + timeout();
  for (;;) {
    std::string value;
    if (request(kGet, key, "", &value)) return value;
    if (std::chrono::steady_clock::now() >= deadline) {
      throw DistributedError(absl::StrCat("get: key '", key, "' was not set within ",
                                          timeout().count(), " ms at ", where(),
                                          "; a process may have failed or not started"));
    }
    std::this_thread::sleep_for(kPoll);
  }
}

int64_t TCPStore::add(const std::string& key, int64_t delta) {
  std::string sum;
  request(kAdd, key, std::to_string(delta), &sum);
  int64_t v = 0;
  (void)absl::SimpleAtoi(sum, &v);
  return v;
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  std::string ignored;
  for (const std::string& k : keys) {
    if (!request(kCheck, k, "", &ignored)) return false;
  }
  return true;
}

}  // namespace distributed
}  // namespace streamgrad
