#include "tools/cli_flags.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/error.h"

namespace streamgrad {
namespace {

// Flags are documented with dashes (--legacy-seed-streams); absl flags are C identifiers
// (legacy_seed_streams), so dashes in flag names become underscores before parsing.
// Values (after '=') and everything after a bare "--" are left alone.
std::vector<std::string> normalise_flag_names(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& a = args[i];
    if (a == "--") break;
    if (a.size() < 3 || a[0] != '-') continue;
    const size_t begin = a.find_first_not_of('-');
    const size_t end = std::min(a.find('='), a.size());
    for (size_t k = begin; k < end; ++k) {
      if (a[k] == '-') a[k] = '_';
    }
  }
  return args;
}

// absl's parser exits with code 1 on an unknown flag or a malformed value, and the tool's
// contract is 2 for bad flags: the (normalised) arguments are checked here first. Setting
// a valid value here is harmless, the parser sets the same one again.
// `original` (same length) spells the arguments as the user did, for the messages.
void check_flags(const std::vector<std::string>& args, char** original) {
  // absl's usage flags are handled by its parser and are not in the flag registry.
  static const std::set<std::string> kUsageFlags{
      "help", "helpfull", "helpshort", "helppackage", "helpon", "helpmatch", "version",
      "only_check_args"};
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    const std::string user(original[i]);
    if (a == "--") break;
    if (a.size() < 2 || a[0] != '-') {
      throw UsageError{absl::StrCat("unexpected argument '", user, "'; it takes flags only")};
    }
    const std::string body = a.substr(a[1] == '-' ? 2 : 1);
    const size_t eq = body.find('=');
    const std::string name = body.substr(0, eq);
    if (kUsageFlags.count(name) > 0) continue;
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr && eq == std::string::npos && absl::StartsWith(name, "no")) {
      absl::CommandLineFlag* negated = absl::FindCommandLineFlag(name.substr(2));
      if (negated != nullptr && negated->IsOfType<bool>()) continue;  // --nosanitizer
    }
    if (flag == nullptr) {
      throw UsageError{absl::StrCat("unknown flag '", user, "'; see --help")};
    }
    std::string value;
    if (eq != std::string::npos) {
      value = body.substr(eq + 1);
    } else if (flag->IsOfType<bool>()) {
      continue;
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      throw UsageError{absl::StrCat("flag '", user, "' needs a value")};
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      throw UsageError{absl::StrCat("bad value for '", user, "': ", error)};
    }
  }
}

}  // namespace

void parse_flags_or_throw(int argc, char** argv) {
  std::vector<std::string> args = normalise_flag_names(argc, argv);
  check_flags(args, argv);
  std::vector<char*> arg_ptrs;
  for (std::string& a : args) arg_ptrs.push_back(a.data());
  absl::ParseCommandLine(static_cast<int>(arg_ptrs.size()), arg_ptrs.data());
}

int run_tool(const char* tool, int argc, char** argv, const std::function<int()>& body) {
  try {
    parse_flags_or_throw(argc, argv);
    return body();
  } catch (const UsageError& e) {
    std::cerr << tool << ": " << e.message << "\n";
  } catch (const Error& e) {
    std::cerr << tool << ": " << e.what() << "\n";
  }
  return 2;
}

std::string user_path(const std::string& path) {
  const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");
  if (path.empty() || path[0] == '/' || cwd == nullptr || *cwd == '\0') return path;
  return absl::StrCat(cwd, "/", path);
}

}  // namespace streamgrad
