// The process plumbing of tools/launch: its children, each one process of PROGRAM ARGS with
// its stdout and stderr on pipes forwarded line by line behind "[rank K] ", and the
// launcher's signals, delivered to its poll loop through a pipe.
//
//   const int wake = launch::catch_signals();  // before the first start_child
//   launch::Child c;
//   c.rank = 3;
//   std::string why;
//   if (!launch::start_child(c, {"sh", "-c", "echo hi"}, env, &why)) ...;
//   launch::drain(c.out[0]);  // once poll() finds c.out[0].fd readable: "[rank 3] hi"
//
// Lines are written whole, one write() each, to the launcher's stdout (out[0]) or stderr
// (out[1]); a last line without a newline gets one at EOF, and a line longer than
// kMaxLine comes out as lines of kMaxLine bytes, which bounds what a child costs.
//
// Thread-safety: none; made for the single-threaded launcher. start_child forks: call it
// while no other thread runs.
// Failure: start_child returns false with the reason when the pipes or the fork fail. A
// child whose exec fails writes "launch: cannot run PROGRAM: <reason>" on its stderr and
// exits 127 when PROGRAM is not found, 126 otherwise, as a shell does.
#ifndef STREAMGRAD_TOOLS_LAUNCH_PROCESS_H_
#define STREAMGRAD_TOOLS_LAUNCH_PROCESS_H_

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace streamgrad {
namespace launch {

constexpr size_t kMaxLine = 64 * 1024;

// The read end (non-blocking, close-on-exec) of one of a child's pipes, and the part of a
// line not forwarded yet.
struct Output {
  int fd = -1;  // -1 once closed
  int to = 1;   // the launcher's stdout or stderr
  std::string prefix;
  std::string pending;
};

struct Child {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;  // started and not reaped yet
  Output out[2];         // stdout, stderr
};

// From now on SIGINT, SIGTERM and SIGCHLD write their number as one byte into a pipe
// whose read end (non-blocking, close-on-exec) it returns; -1 with errno when there is no
// pipe. SIGPIPE is caught and dropped: output nobody reads any more is discarded by
// write_all, and the job goes on. A signal ignored on entry stays ignored, for the
// launcher and its children (a shell starts background jobs with SIGINT ignored, so that
// Ctrl-C spares them), except SIGCHLD: ignored, it would reap the children before
// waitpid() could tell how they ended. Also opens /dev/null on any of fds 0-2 that is
// closed, or a pipe would get its number.
int catch_signals();

// Writes all of `s`, retrying after signals; stops quietly when nobody reads any more.
// Async-signal-safe.
void write_all(int fd, absl::string_view s);

// Forwards the complete lines the pipe holds now (at most 16 reads: one chatty child must
// not starve the others); at EOF also the unfinished line, and closes the pipe.
void drain(Output& o);

// Forwards what drain() finds and the unfinished line, and closes the pipe even without
// EOF: a grandchild may hold it open for as long as it likes.
void close_output(Output& o);

// Starts `command` (command[0] looked up on PATH unless it holds a '/') with exactly the
// environment `env` ("NAME=value" entries) and stdout/stderr into c.out, prefixed
// "[rank <c.rank>] "; sets c.pid and c.running. The child gets the signals catch_signals
// caught back with their default actions and the launcher's signal mask, and holds no pipe
// of another child.
bool start_child(Child& c, const std::vector<std::string>& command,
                 std::vector<std::string> env, std::string* why);

// "exited with status 3", "was killed by signal 9 (Killed)": how a child ended, from the
// status waitpid() gave.
std::string describe_exit(int status);

}  // namespace launch
}  // namespace streamgrad

#endif  // STREAMGRAD_TOOLS_LAUNCH_PROCESS_H_
