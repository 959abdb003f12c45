// tools/launch: starts the processes of one node of a distributed job and watches them,
// as PyTorch's torchrun does.
//
//   launch --nproc=2 ./train --epochs=1         two ranks on this machine, a free port
//   launch --nproc=2 -- ./train --epochs=1      the same
//   launch --nnodes=2 --node-rank=1 --nproc=4 --master-addr=10.0.0.1 --master-port=29500
//          ./train                              ranks 4 to 7 of an 8-rank job
//
// As with torchrun, PROGRAM is the first argument that is not a flag of the launcher (nor
// the value of one, as in --nproc 2); it and everything after it, flags included, are the
// ranks' command line. Everything after a first "--" is the command too.
// Each of the --nproc children runs PROGRAM ARGS (looked up on PATH unless it holds a '/')
// with the launcher's environment plus what distributed::init_process_group_from_env reads:
// MASTER_ADDR, MASTER_PORT, RANK (node_rank * nproc + local rank), WORLD_SIZE (nnodes *
// nproc), LOCAL_RANK and LOCAL_WORLD_SIZE (nproc). Every line a child writes on stdout or
// stderr comes out whole on the launcher's stdout or stderr behind "[rank K] "; a last
// line without a newline gets one, a line longer than 64 KiB is cut into 64 KiB lines.
// The children stay in the launcher's process group, so Ctrl-C in a terminal reaches all.
//
// Exit code: 0 when every rank exits 0. 1 when a rank exits non-zero, is killed by a signal
// or cannot be started (a PROGRAM that cannot be run makes its child exit 127, or 126 when
// it exists but is not executable): the launcher says which rank on stderr, sends SIGTERM
// to the others, SIGKILLs those left after --grace-ms and exits when all are gone. 128+N
// when the launcher gets signal N (SIGINT, SIGTERM), as a shell reports it: it passes the
// signal on to the ranks and waits for them the same way; a second signal SIGKILLs them at
// once. 2 for bad usage (tools/cli_flags.h), before any child starts.
//
// Thread-safety: single-threaded; the signal handlers (launch_process.h) only write the
// signal's number into a pipe that the poll loop reads.
// Failure: a grandchild that keeps a child's pipe open does not hold the launcher up: once
// every child is reaped, what the pipes hold is forwarded and they are closed. When nobody
// reads the launcher's output any more, it is dropped and the job goes on.
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "tools/cli_flags.h"
#include "tools/launch_process.h"

extern char** environ;

ABSL_FLAG(int, nproc, 1, "processes (ranks) to start on this node: LOCAL_WORLD_SIZE");
ABSL_FLAG(int, nnodes, 1, "nodes in the job, one launcher each: WORLD_SIZE = nnodes * nproc");
ABSL_FLAG(int, node_rank, 0,
          "this node's index, 0 to nnodes - 1: RANK = node_rank * nproc + LOCAL_RANK");
ABSL_FLAG(std::string, master_addr, "127.0.0.1", "address of the node of rank 0: MASTER_ADDR");
ABSL_FLAG(int, master_port, 0,
          "port of rank 0's store: MASTER_PORT; 0 picks a free one (single-node jobs only)");
ABSL_FLAG(int, grace_ms, 5000,
          "once a rank failed or a signal came: how long the others get to exit before SIGKILL");

namespace streamgrad {
namespace {

using launch::Child;
using launch::Output;
using Clock = std::chrono::steady_clock;

void say(const std::string& line) { launch::write_all(2, absl::StrCat("launch: ", line, "\n")); }

const char* signame(int sig) { return sig == SIGINT ? "SIGINT" : "SIGTERM"; }

// bind() to port 0 makes the kernel pick a free port; rank 0's store binds it again soon
// after (a port nobody connected to is free at once, no TIME_WAIT).
int free_port(const std::string& addr) {
  addrinfo hints{}, *found = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  const int rc = getaddrinfo(addr.c_str(), "0", &hints, &found);
  if (rc != 0) {
    throw UsageError{absl::StrCat("--master-addr=", addr, ": cannot resolve it (",
                                  gai_strerror(rc), "); pass an address of this machine")};
  }
  int port = 0, err = 0;
  for (addrinfo* a = found; a != nullptr && port == 0; a = a->ai_next) {
    const int s = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    if (s >= 0 && bind(s, a->ai_addr, a->ai_addrlen) == 0 &&
        getsockname(s, reinterpret_cast<sockaddr*>(&bound), &len) == 0) {
      port = ntohs(bound.ss_family == AF_INET6
                       ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                       : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    }
    err = errno;
    if (s >= 0) close(s);
  }
  freeaddrinfo(found);
  if (port == 0) {
    throw UsageError{absl::StrCat("--master-addr=", addr, ": cannot bind a port on it (",
                                  std::strerror(err), "); pass an address of this machine, "
                                  "or an explicit --master-port")};
  }
  return port;
}

// The launcher's environment without the variables it sets, then those of every rank.
std::vector<std::string> base_environment(const std::string& addr, int port, int world,
                                          int nproc) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const absl::string_view name = absl::string_view(*e).substr(0, std::strcspn(*e, "="));
    if (name != "MASTER_ADDR" && name != "MASTER_PORT" && name != "RANK" &&
        name != "WORLD_SIZE" && name != "LOCAL_RANK" && name != "LOCAL_WORLD_SIZE") {
      env.push_back(*e);
    }
  }
  env.push_back(absl::StrCat("MASTER_ADDR=", addr));
  env.push_back(absl::StrCat("MASTER_PORT=", port));
  env.push_back(absl::StrCat("WORLD_SIZE=", world));
  env.push_back(absl::StrCat("LOCAL_WORLD_SIZE=", nproc));
  return env;
}

std::string plural(size_t n, const char* what) {
  return absl::StrCat(n, " ", what, n == 1 ? "" : "s");
}

std::string stopping_others(size_t n) {
  return n == 0 ? "" : absl::StrCat("; stopping the other ", plural(n, "rank"));
}

// The ranks of this node and what the launcher is doing about them.
struct Job {
  int wake = -1;  // catch_signals()
  std::vector<Child> children;
  std::chrono::milliseconds grace{0};
  bool stopping = false;  // the ranks were sent stop_sig at deadline - grace
  bool killed = false;    // ... and then SIGKILL
  bool failed = false;
  int caught = 0;  // the signal the launcher got, if any
  int stop_sig = SIGTERM;
  Clock::time_point deadline;

  size_t running() const {
    return static_cast<size_t>(std::count_if(children.begin(), children.end(),
                                              [](const Child& c) { return c.running; }));
  }
  void signal_all(int sig) {
    for (const Child& c : children) {
      if (c.running) kill(c.pid, sig);  // each pid: the ranks may have left our group
    }
  }
  void stop(int sig) {
    signal_all(sig);
    stopping = true;
    stop_sig = sig;
    deadline = Clock::now() + grace;
  }

  void on_launcher_signal(int sig) {
    if (!stopping) {
      caught = sig;
      say(absl::StrCat("got ", signame(sig), "; passing it on to the ",
                       plural(running(), "rank")));
      stop(sig);
    } else if (!killed) {  // the user means it
      say(absl::StrCat("got ", signame(sig), " again; killing the ", plural(running(), "rank")));
      signal_all(SIGKILL);
      killed = true;
    }
  }

  // The first rank to fail is reported; those exiting while stopping are not news.
  void reap() {
    for (Child& c : children) {
      if (!c.running) continue;
      int st = 0;
      const pid_t r = waitpid(c.pid, &st, WNOHANG);
      if (r == 0 || (r < 0 && errno == EINTR)) continue;
      c.running = false;
      for (Output& o : c.out) launch::drain(o);  // its last words come before the verdict
      if (stopping || (r == c.pid && WIFEXITED(st) && WEXITSTATUS(st) == 0)) continue;
      failed = true;
      say(absl::StrCat("rank ", c.rank, " (pid ", c.pid, ") ",
                       r == c.pid ? launch::describe_exit(st) : "could not be waited for",
                       stopping_others(running())));
      stop(SIGTERM);
    }
  }

  void kill_stragglers() {
    for (const Child& c : children) {
      if (!c.running) continue;
      say(absl::StrCat("rank ", c.rank, " (pid ", c.pid, ") is still running ", grace.count(),
                       " ms after ", signame(stop_sig), "; sending SIGKILL"));
      kill(c.pid, SIGKILL);
    }
    killed = true;
  }

  // Forwards output and signals until every rank is reaped; returns the exit code.
  int supervise() {
    while (running() > 0) {
      std::vector<pollfd> fds{{wake, POLLIN, 0}};
      std::vector<Output*> outs;
      for (Child& c : children) {
        for (Output& o : c.out) {
          if (o.fd < 0) continue;
          fds.push_back({o.fd, POLLIN, 0});
          outs.push_back(&o);
        }
      }
      int timeout = -1;
      if (stopping && !killed) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
        timeout = static_cast<int>(std::max<int64_t>(0, left.count()));
      }
      if (poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
        say(absl::StrCat("poll: ", std::strerror(errno), "; killing the ranks"));
        signal_all(SIGKILL);
        failed = stopping = killed = true;
      }
      for (size_t k = 1; k < fds.size(); ++k) {
        if (fds[k].revents != 0) launch::drain(*outs[k - 1]);
      }
      bool exited = false;  // SIGCHLD: some rank ended (signals of several may merge)
      unsigned char sigs[64];
      for (ssize_t n; (n = read(wake, sigs, sizeof sigs)) > 0;) {
        for (ssize_t k = 0; k < n; ++k) {
          if (sigs[k] == SIGCHLD) {
            exited = true;
          } else {
            on_launcher_signal(sigs[k]);
          }
        }
      }
      if (exited) reap();
      if (stopping && !killed && running() > 0 && Clock::now() >= deadline) kill_stragglers();
    }
    for (Child& c : children) {
      for (Output& o : c.out) launch::close_output(o);
    }
    return caught != 0 ? 128 + caught : failed ? 1 : 0;
  }
};

int run(const std::vector<std::string>& command) {
  const int nproc = absl::GetFlag(FLAGS_nproc), nnodes = absl::GetFlag(FLAGS_nnodes);
  const int node_rank = absl::GetFlag(FLAGS_node_rank);
  const std::string addr = absl::GetFlag(FLAGS_master_addr);
  if (command.empty()) {
    throw UsageError{"no PROGRAM to run; pass it after the launcher's flags, as in: "
                     "launch --nproc=2 ./train --epochs=1"};
  }
  if (node_rank >= nnodes) {
    throw UsageError{absl::StrCat("--node-rank=", node_rank, " is not a node of --nnodes=",
                                  nnodes, "; pass 0 to ", nnodes - 1)};
  }
  if (addr.empty()) throw UsageError{"--master-addr is empty; pass the address of rank 0's node"};
  if (nnodes > 1 && absl::GetFlag(FLAGS_master_port) == 0) {
    throw UsageError{absl::StrCat("--nnodes=", nnodes, " needs an explicit --master-port, the "
                                  "same on every node (a free port is picked for one node only)")};
  }
  const int port = absl::GetFlag(FLAGS_master_port) != 0 ? absl::GetFlag(FLAGS_master_port)
                                                         : free_port(addr);
  Job job;
  job.wake = launch::catch_signals();
  if (job.wake < 0) {
    say(absl::StrCat("pipe: ", std::strerror(errno)));
    return 1;
  }
  const std::vector<std::string> base = base_environment(addr, port, nnodes * nproc, nproc);
  job.children.resize(static_cast<size_t>(nproc));
  job.grace = std::chrono::milliseconds(absl::GetFlag(FLAGS_grace_ms));
  for (int local = 0; local < nproc; ++local) {
    Child& c = job.children[static_cast<size_t>(local)];
    c.rank = node_rank * nproc + local;
    std::vector<std::string> env = base;
    env.push_back(absl::StrCat("RANK=", c.rank));
    env.push_back(absl::StrCat("LOCAL_RANK=", local));
    std::string why;
    if (!launch::start_child(c, command, std::move(env), &why)) {
      say(absl::StrCat("cannot start rank ", c.rank, ": ", why, stopping_others(job.running())));
      job.failed = true;
      job.stop(SIGTERM);
      break;
    }
  }
  return job.supervise();
}

}  // namespace
}  // namespace streamgrad

int main(int argc, char** argv) {
  // The launcher's flags end at PROGRAM or at a first "--", which is not part of the command.
  const int flags_argc = streamgrad::program_index(argc, argv);
  const bool dashes = flags_argc < argc && std::strcmp(argv[flags_argc], "--") == 0;
  const std::vector<std::string> command(argv + flags_argc + (dashes ? 1 : 0), argv + argc);
  const streamgrad::ToolSpec spec{
      "launch",
      "launch: starts the --nproc processes of one node of a distributed job (like PyTorch's\n"
      "torchrun), each with MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK and\n"
      "LOCAL_WORLD_SIZE set; forwards their output line by line behind \"[rank K] \", and\n"
      "stops them all when one fails.\n"
      "Usage: launch --nproc=N [--nnodes=1 --node-rank=0] [--master-addr=127.0.0.1]\n"
      "              [--master-port=0] [--grace-ms=5000] [--] PROGRAM [ARGS...]\n"
      "PROGRAM is the first argument that is not a flag of the launcher; it and every\n"
      "argument after it are the ranks' command line.\n"
      "Exit code: 0 when every rank exits 0, 1 when one fails, 128+N after the launcher got\n"
      "signal N (SIGINT, SIGTERM), 2 for bad usage.",
      __FILE__,
      {{"nproc", 1, 256},
       {"nnodes", 1, 65536},
       {"node_rank", 0, 65535},
       {"master_port", 0, 65535},
       {"grace_ms", 0, 3600000}},
      {}};
  return streamgrad::run_tool(spec, flags_argc, argv, [&] { return streamgrad::run(command); });
}
