// Command-line parsing shared by the tools: absl flags, with the tools' conventions.
//
//   const ToolSpec kSpec{"mytool", "Does X.\nUsage: mytool [--repeat=N]", __FILE__,
//                        {{"repeat", 1, 1e7}}, {"names"}};
//   int main(int argc, char** argv) {
//     return run_tool(kSpec, argc, argv, [] { ...; return failed ? 1 : 0; });
//   }
//
// Conventions:
// - flag names may be spelt with dashes or underscores (--legacy-seed-streams and
//   --legacy_seed_streams are the same flag; absl names are C identifiers);
// - --flagfile=FILE[,FILE] reads more flags, one per line ('#' starts a comment line);
//   relative paths are taken from the caller's folder (user_path);
// - every numeric flag of a tool has an allowed range (ToolSpec::ranges): a value that
//   is not finite or lies outside it is refused, naming the flag, the value and the range;
// - a list flag (ToolSpec::lists), when given, must name at least one entry and no empty
//   one ("--ops=," is refused, leave the flag out for the default);
// - an unknown flag, a malformed value, a missing value, a positional argument (also
//   after "--"), an unreadable flagfile and absl's --fromenv / --tryfromenv / --undefok are
//   UsageErrors: one message on stderr, exit code 2 (absl's own parser would print some of
//   them twice and exit with 1);
// - --help (also -h, --helpshort, --helpfull) prints the usage text and every flag of the
//   tool with its help text, default and range, and exits 0;
// - --json output is one line on stdout (print_json_line), keys in the order written.
//
// Thread-safety: call once, from main, before any other thread starts.
// Failure: UsageError naming the argument as the user spelt it (run_tool turns it, and
// any streamgrad::Error, into exit code 2).
#ifndef STREAMGRAD_TOOLS_CLI_FLAGS_H_
#define STREAMGRAD_TOOLS_CLI_FLAGS_H_

#include <functional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace streamgrad {

// Bad flags: the tools print the message and exit with code 2.
struct UsageError {
  std::string message;
};

// What a tool declares about its flags. Flag names are spelt as in ABSL_FLAG.
struct ToolSpec {
  struct Range {
    std::string flag;
    long double min;  // inclusive; long double holds every uint64 exactly
    long double max;
  };
  std::string name;        // prefix of the error messages
  std::string usage;       // first lines of --help
  std::string flags_file;  // __FILE__ of the tool's main: --help lists the flags defined there
  std::vector<Range> ranges;       // one per numeric flag of the tool (checked at start)
  std::vector<std::string> lists;  // comma-separated list flags
};

enum class ParseOutcome { kRun, kHelpShown };

// Checks and sets the flags; prints the help text on stdout when it was asked for.
ParseOutcome parse_flags_or_throw(const ToolSpec& spec, int argc, char** argv);

// Parses the flags, then runs `body` and returns its exit code (0 after --help). A
// UsageError or a streamgrad::Error (from either) is printed as "<tool>: <message>" on
// stderr and gives exit code 2.
int run_tool(const ToolSpec& spec, int argc, char** argv, const std::function<int()>& body);

// Where a tool that runs another program (tools/launch, as torchrun) finds it: the index
// in argv of "--" or of the first argument that is neither a flag nor the value of the
// flag before it (a flag without '=' that is not a bool flag takes the next argument as
// its value, as the parser does), or argc when there is none. argv[1 .. index) are the
// tool's flags.
int program_index(int argc, char** argv);

// A path the user typed: relative paths are taken from the folder `bazel run` was called
// in (BUILD_WORKING_DIRECTORY), not from the runfiles folder the tool runs in.
std::string user_path(const std::string& path);

// Prints `report` on stdout as one line. Its strings may quote exceptions and backend
// descriptions: bytes that are not UTF-8 are written as U+FFFD instead of making dump()
// throw. A double that is not finite is written as null (JSON has no NaN).
void print_json_line(const nlohmann::ordered_json& report);

}  // namespace streamgrad

#endif  // STREAMGRAD_TOOLS_CLI_FLAGS_H_
