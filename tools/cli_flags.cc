#include "tools/cli_flags.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace {

constexpr int kMaxFlagfileDepth = 8;

// One argument: normalised (flag name with underscores) and as the user spelt it.
struct Arg {
  std::string text;
  std::string user;
};

// Flags are documented with dashes (--legacy-seed-streams); absl flags are C identifiers
// (legacy_seed_streams), so dashes in flag names become underscores. Values (after '=')
// are left alone.
std::string normalise(std::string a) {
  if (a.size() < 3 || a[0] != '-' || a == "--") return a;
  const size_t begin = a.find_first_not_of('-');
  const size_t end = std::min(a.find('='), a.size());
  for (size_t k = begin; k < end; ++k) {
    if (a[k] == '-') a[k] = '_';
  }
  return a;
}

// "--a_b=1" -> "a_b"; "" for anything that is not a flag.
std::string flag_name(const std::string& a) {
  if (a.size() < 2 || a[0] != '-' || a == "--") return "";
  const std::string body = a.substr(a[1] == '-' ? 2 : 1);
  return body.substr(0, body.find('='));
}

std::string dashed(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return "--" + name;
}

void expand(const std::vector<std::string>& raw, int depth, std::vector<Arg>& out);

// absl reads flagfiles in its own parser, which reports an unreadable one twice and exits
// with 1; reading them here gives one message, exit code 2, and the same checks for the
// flags inside as for those on the command line.
void read_flagfile(const std::string& path, int depth, std::vector<Arg>& out) {
  const std::string where = absl::StrCat("--flagfile=", path);
  if (depth > kMaxFlagfileDepth) {
    throw UsageError{absl::StrCat(where, ": flagfiles nested more than ", kMaxFlagfileDepth,
                                  " deep (does one include itself?)")};
  }
  const std::string full = user_path(path);
  std::error_code ec;
  if (std::filesystem::is_directory(full, ec)) {
    throw UsageError{absl::StrCat(where, ": is a directory, not a file of flags")};
  }
  std::ifstream in(full);
  if (!in) {
    throw UsageError{absl::StrCat(where, ": cannot read the file (", std::strerror(errno), ")")};
  }
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    const std::string t(absl::StripAsciiWhitespace(line));
    if (!t.empty() && t[0] != '#') lines.push_back(t);
  }
  expand(lines, depth, out);
}

void expand(const std::vector<std::string>& raw, int depth, std::vector<Arg>& out) {
  for (size_t i = 0; i < raw.size(); ++i) {
    const std::string a = normalise(raw[i]);
    if (a == "--") {  // what follows is positional (refused later), never a flag
      for (; i < raw.size(); ++i) out.push_back({raw[i], raw[i]});
      return;
    }
    if (flag_name(a) != "flagfile") {
      out.push_back({a, raw[i]});
      continue;
    }
    std::string value;
    if (a.find('=') != std::string::npos) {
      value = a.substr(a.find('=') + 1);
    } else if (i + 1 < raw.size()) {
      value = raw[++i];
    }
    if (value.empty()) throw UsageError{"flag '--flagfile' needs a file name"};
    for (const absl::string_view path : absl::StrSplit(value, ',')) {
      read_flagfile(std::string(path), depth + 1, out);
    }
  }
}

std::string number_text(long double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e20L) {
    return v < 0 ? absl::StrCat(static_cast<int64_t>(v)) : absl::StrCat(static_cast<uint64_t>(v));
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%Lg", v);
  return buf;
}

const ToolSpec::Range* range_of(const ToolSpec& spec, const std::string& name) {
  for (const ToolSpec::Range& r : spec.ranges) {
    if (r.flag == name) return &r;
  }
  return nullptr;
}

std::string range_text(const ToolSpec::Range& r) {
  const absl::CommandLineFlag* f = absl::FindCommandLineFlag(r.flag);
  const bool integral = f != nullptr && !f->IsOfType<double>() && !f->IsOfType<float>();
  return absl::StrCat(integral ? "an integer" : "a finite number", " from ", number_text(r.min),
                      " to ", number_text(r.max));
}

bool is_numeric(const absl::CommandLineFlag& f) {
  return f.IsOfType<short>() || f.IsOfType<unsigned short>() || f.IsOfType<int>() ||
         f.IsOfType<unsigned>() || f.IsOfType<long>() || f.IsOfType<unsigned long>() ||
         f.IsOfType<long long>() || f.IsOfType<unsigned long long>() ||
         f.IsOfType<double>() || f.IsOfType<float>();
}

// The tool's own flags, by name.
std::vector<absl::CommandLineFlag*> tool_flags(const ToolSpec& spec) {
  std::vector<absl::CommandLineFlag*> flags;
  for (const auto& entry : absl::GetAllFlags()) {
    if (entry.second->Filename() == spec.flags_file) flags.push_back(entry.second);
  }
  std::sort(flags.begin(), flags.end(),
            [](auto* a, auto* b) { return a->Name() < b->Name(); });
  return flags;
}

// A tool that adds a numeric flag without a range would accept inf or 1e308 again.
void check_spec(const ToolSpec& spec) {
  for (const absl::CommandLineFlag* f : tool_flags(spec)) {
    SG_INTERNAL_CHECK(!is_numeric(*f) || range_of(spec, std::string(f->Name())) != nullptr,
                      spec.name, ": numeric flag --", f->Name(), " has no range in its ToolSpec");
  }
  for (const ToolSpec::Range& r : spec.ranges) {
    const absl::CommandLineFlag* f = absl::FindCommandLineFlag(r.flag);
    SG_INTERNAL_CHECK(f != nullptr && is_numeric(*f), spec.name, ": the range of --", r.flag,
                      " names no numeric flag");
  }
}

void print_help(const ToolSpec& spec) {
  std::string s = absl::StrCat(spec.usage, "\n\nFlags (dashes or underscores; ",
                               "--flagfile=FILE reads more flags, one per line):\n");
  for (const absl::CommandLineFlag* f : tool_flags(spec)) {
    const std::string name(f->Name());
    const ToolSpec::Range* r = range_of(spec, name);
    const char* kind = f->IsOfType<bool>() ? "" : r != nullptr ? "=<number>" : "=<text>";
    const std::string def = f->IsOfType<std::string>() ? absl::StrCat("\"", f->DefaultValue(), "\"")
                                                       : f->DefaultValue();
    absl::StrAppend(&s, "  ", dashed(name), kind, "  (default ", def,
                    r != nullptr ? absl::StrCat("; ", range_text(*r)) : "", ")\n      ",
                    f->Help(), "\n");
  }
  absl::StrAppend(&s, "  --help\n      print this text and exit\n");
  std::cout << s;
}

void check_value(const ToolSpec& spec, const std::string& name, const std::string& value,
                 const std::string& user) {
  if (const ToolSpec::Range* r = range_of(spec, name)) {
    const long double v = std::strtold(value.c_str(), nullptr);
    if (!std::isfinite(v) || v < r->min || v > r->max) {
      throw UsageError{absl::StrCat("'", user, "' is out of range: ", dashed(name), " takes ",
                                    range_text(*r))};
    }
  }
  if (std::find(spec.lists.begin(), spec.lists.end(), name) != spec.lists.end()) {
    for (const absl::string_view entry : absl::StrSplit(value, ',')) {
      if (!absl::StripAsciiWhitespace(entry).empty()) continue;
      throw UsageError{absl::StrCat(
          "'", user, "' has an empty entry: ", dashed(name),
          " takes a comma-separated list of at least one name; leave the flag out for the "
          "default")};
    }
  }
}

bool is_help(const std::string& name) {
  return name == "help" || name == "h" || name == "helpshort" || name == "helpfull";
}

// absl's parser would exit with code 1 on a bad flag; every argument is checked and set
// here instead (absl's ParseCommandLine is not called).
void check_and_set(const ToolSpec& spec, const std::vector<Arg>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i].text;
    const std::string& user = args[i].user;
    if (a == "--") {
      if (i + 1 == args.size()) break;
      throw UsageError{absl::StrCat("unexpected argument '", args[i + 1].user,
                                    "' after '--'; it takes flags only")};
    }
    const std::string name = flag_name(a);
    if (name.empty()) {
      throw UsageError{absl::StrCat("unexpected argument '", user, "'; it takes flags only")};
    }
    if (name == "fromenv" || name == "tryfromenv" || name == "undefok") {
      throw UsageError{absl::StrCat("'", user, "' is not supported by the streamgrad tools; ",
                                    "pass flags on the command line or in a --flagfile")};
    }
    const bool has_value = a.find('=') != std::string::npos;
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    std::string value;
    if (flag == nullptr && !has_value && absl::StartsWith(name, "no")) {
      flag = absl::FindCommandLineFlag(name.substr(2));  // --nosanitizer
      if (flag != nullptr && !flag->IsOfType<bool>()) flag = nullptr;
      value = "false";
    }
    if (flag == nullptr) throw UsageError{absl::StrCat("unknown flag '", user, "'; see --help")};
    if (has_value) {
      value = a.substr(a.find('=') + 1);
    } else if (flag->IsOfType<bool>()) {
      if (value.empty()) value = "true";
    } else if (i + 1 < args.size()) {
      value = args[++i].user;
    } else {
      throw UsageError{absl::StrCat("flag '", user, "' needs a value")};
    }
    const std::string spelt = has_value || flag->IsOfType<bool>()
                                  ? user : absl::StrCat(user, " ", value);
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      const ToolSpec::Range* r = range_of(spec, std::string(flag->Name()));
      throw UsageError{absl::StrCat("bad value for '", spelt, "': ", error,
                                    r ? absl::StrCat("; ", dashed(r->flag), " takes ",
                                                     range_text(*r))
                                      : "")};
    }
    check_value(spec, std::string(flag->Name()), value, spelt);
  }
}

}  // namespace

int program_index(int argc, char** argv) {
  for (int k = 1; k < argc; ++k) {
    const std::string a = normalise(argv[k]);
    const std::string name = flag_name(a);
    if (a == "--" || name.empty()) return k;
    if (a.find('=') != std::string::npos || is_help(name)) continue;
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    // --flagfile is read by expand(), whether or not absl registered it.
    if (name == "flagfile" || (flag != nullptr && !flag->IsOfType<bool>())) ++k;
  }
  return argc;
}

ParseOutcome parse_flags_or_throw(const ToolSpec& spec, int argc, char** argv) {
  check_spec(spec);
  std::vector<Arg> args;
  expand(std::vector<std::string>(argv + 1, argv + argc), 0, args);
  for (const Arg& a : args) {
    if (a.text == "--") break;
    if (is_help(flag_name(a.text))) {
      print_help(spec);
      return ParseOutcome::kHelpShown;
    }
  }
  check_and_set(spec, args);
  return ParseOutcome::kRun;
}

int run_tool(const ToolSpec& spec, int argc, char** argv, const std::function<int()>& body) {
  try {
    if (parse_flags_or_throw(spec, argc, argv) == ParseOutcome::kHelpShown) return 0;
    return body();
  } catch (const UsageError& e) {
    std::cerr << spec.name << ": " << e.message << "\n";
  } catch (const Error& e) {
    std::cerr << spec.name << ": " << e.what() << "\n";
  }
  return 2;
}

void print_json_line(const nlohmann::ordered_json& report) {
  std::cout << report.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace)
            << std::endl;
}

std::string user_path(const std::string& path) {
  const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");
  if (path.empty() || path[0] == '/' || cwd == nullptr || *cwd == '\0') return path;
  return absl::StrCat(cwd, "/", path);
}

}  // namespace streamgrad
