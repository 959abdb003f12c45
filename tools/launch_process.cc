#include "tools/launch_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

extern char** environ;

namespace streamgrad {
namespace launch {
namespace {

// The launcher catches these; its children get them back with their default actions.
constexpr int kCaught[] = {SIGINT, SIGTERM, SIGCHLD, SIGPIPE};
int g_wake[2] = {-1, -1};  // signal handlers -> the launcher's poll loop

void on_signal(int sig) {
  const int saved = errno;  // the handler interrupts code that may read errno next
  const unsigned char b = static_cast<unsigned char>(sig);
  if (write(g_wake[1], &b, 1) < 0) {}  // a full pipe has woken the loop already
  errno = saved;
}

// A handler rather than SIG_IGN, which the children would inherit through exec.
void on_sigpipe(int) {}

// One write per line: the launcher is the only writer of its stdout and stderr, so lines
// of different ranks never mix.
void forward(Output& o, bool eof) {
  size_t begin = 0;
  while (begin < o.pending.size()) {
    const size_t nl = o.pending.find('\n', begin);
    size_t end = nl, next = nl + 1;
    if (nl == std::string::npos) {
      if (!eof && o.pending.size() - begin < kMaxLine) break;
      end = next = std::min(o.pending.size(), begin + kMaxLine);
    }
    const absl::string_view line = absl::string_view(o.pending).substr(begin, end - begin);
    write_all(o.to, absl::StrCat(o.prefix, line, "\n"));
    begin = next;
  }
  o.pending.erase(0, begin);
}

}  // namespace

int catch_signals() {
  for (int fd = 0; fd < 3; ++fd) {
    if (fcntl(fd, F_GETFD) < 0) open("/dev/null", O_RDWR);
  }
  if (pipe(g_wake) != 0) return -1;
  for (int fd : g_wake) {
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    fcntl(fd, F_SETFL, O_NONBLOCK);
  }
  struct sigaction sa {}, was {};
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  for (int sig : kCaught) {
    sa.sa_handler = sig == SIGPIPE ? on_sigpipe : on_signal;
    const bool ignored = sigaction(sig, nullptr, &was) == 0 && was.sa_handler == SIG_IGN;
    if (!ignored || sig == SIGCHLD) sigaction(sig, &sa, nullptr);
  }
  return g_wake[0];
}

void write_all(int fd, absl::string_view s) {
  while (!s.empty()) {
    const ssize_t n = write(fd, s.data(), s.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the job matters more than its output
    s.remove_prefix(static_cast<size_t>(n));
  }
}

void drain(Output& o) {
  char buf[4096];
  for (int k = 0; k < 16 && o.fd >= 0; ++k) {
    const ssize_t n = read(o.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n > 0) {
      o.pending.append(buf, static_cast<size_t>(n));
      forward(o, false);
      continue;
    }
    forward(o, true);  // EOF, or an error no retry mends
    close(o.fd);
    o.fd = -1;
  }
}

void close_output(Output& o) {
  drain(o);
  if (o.fd < 0) return;
  forward(o, true);
  close(o.fd);
  o.fd = -1;
}

bool start_child(Child& c, const std::vector<std::string>& command,
                 std::vector<std::string> env, std::string* why) {
  int fds[2][2] = {{-1, -1}, {-1, -1}};
  for (auto& p : fds) {
    if (pipe(p) != 0) {
      *why = absl::StrCat("pipe: ", std::strerror(errno));
      for (auto& q : fds) {
        for (int fd : q) {
          if (fd >= 0) close(fd);
        }
      }
      return false;
    }
    for (int fd : p) fcntl(fd, F_SETFD, FD_CLOEXEC);  // no child holds another's pipe
  }
  // Everything the child needs is built before fork: between fork and exec it makes only
  // async-signal-safe calls (no malloc), and strerror, which is safe enough in a process
  // whose other threads (none, or a sanitizer's) hold no locale lock.
  std::vector<char*> argv, envp;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  for (std::string& e : env) envp.push_back(&e[0]);
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  const std::string cannot_run = absl::StrCat("launch: cannot run ", command[0], ": ");
  // The launcher's handlers must never run in the child (they would wake the launcher's
  // loop): the signals stay blocked across fork until the child has reset the handlers,
  // and a signal that came meanwhile then gets its default action.
  sigset_t block, old;
  sigemptyset(&block);
  for (int sig : kCaught) sigaddset(&block, sig);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  const pid_t pid = fork();
  if (pid == 0) {
    struct sigaction dfl {}, now {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : kCaught) {  // an ignored one stays ignored, as exec would keep it
      if (sigaction(sig, nullptr, &now) == 0 && now.sa_handler != SIG_IGN) {
        sigaction(sig, &dfl, nullptr);
      }
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    dup2(fds[0][1], 1);
    dup2(fds[1][1], 2);
    environ = envp.data();
    execvp(argv[0], argv.data());
    const int e = errno;
    const char* reason = std::strerror(e);
    write_all(2, cannot_run);
    write_all(2, absl::string_view(reason, std::strlen(reason)));
    write_all(2, "\n");
    _exit(e == ENOENT ? 127 : 126);
  }
  const int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  for (auto& p : fds) {
    close(p[1]);
    if (pid < 0) close(p[0]);
  }
  if (pid < 0) {
    *why = absl::StrCat("fork: ", std::strerror(fork_errno));
    return false;
  }
  for (int k = 0; k < 2; ++k) {
    fcntl(fds[k][0], F_SETFL, O_NONBLOCK);
    c.out[k] = Output{fds[k][0], k + 1, absl::StrCat("[rank ", c.rank, "] "), ""};
  }
  c.pid = pid;
  c.running = true;
  return true;
}

std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return absl::StrFormat("was killed by signal %d (%s)", sig, strsignal(sig));
  }
  return absl::StrCat("exited with status ", WEXITSTATUS(status));
}

}  // namespace launch
}  // namespace streamgrad
