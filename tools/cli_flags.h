// Command-line parsing shared by the tools: absl flags, with the tools' conventions.
//
//   int main(int argc, char** argv) {
//     return run_tool("mytool", argc, argv, [] { ...; return failed ? 1 : 0; });
//   }
//
// Conventions: flag names may be spelt with dashes or underscores (--legacy-seed-streams
// and --legacy_seed_streams are the same flag; absl names are C identifiers); an unknown
// flag, a malformed value, a missing value or a positional argument is a UsageError, which
// the tools report with exit code 2 (absl's parser would exit with 1 on its own).
// --help and absl's other usage flags keep their usual behaviour.
//
// Thread-safety: call once, from main, before any other thread starts.
// Failure: UsageError naming the argument as the user spelt it (run_tool turns it, and
// any streamgrad::Error, into exit code 2).
#ifndef STREAMGRAD_TOOLS_CLI_FLAGS_H_
#define STREAMGRAD_TOOLS_CLI_FLAGS_H_

#include <functional>
#include <string>

namespace streamgrad {

// Bad flags: the tools print the message and exit with code 2.
struct UsageError {
  std::string message;
};

void parse_flags_or_throw(int argc, char** argv);

// Parses the flags, then runs `body` and returns its exit code. A UsageError or a
// streamgrad::Error (from either) is printed as "<tool>: <message>" on stderr and gives
// exit code 2.
int run_tool(const char* tool, int argc, char** argv, const std::function<int()>& body);

// A path the user typed: relative paths are taken from the folder `bazel run` was called
// in (BUILD_WORKING_DIRECTORY), not from the runfiles folder the tool runs in.
std::string user_path(const std::string& path);

}  // namespace streamgrad

#endif  // STREAMGRAD_TOOLS_CLI_FLAGS_H_
