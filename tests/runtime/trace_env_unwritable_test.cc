// STREAMGRAD_TRACE naming a path that cannot be written is reported on stderr when the
// variable is read, before any work, and turns tracing off; finding out at exit would
// lose the whole run's trace silently. The variable is set here, before anything reads
// the runtime's configuration.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "runtime/runtime.h"

namespace streamgrad {
namespace {

std::string tmpdir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir ? dir : "/tmp";
}

// Runs fn() with stderr going to a file and returns what was written there.
template <typename Fn>
std::string capture_stderr(Fn fn) {
  const std::string path = tmpdir() + "/stderr.txt";
  std::fflush(stderr);
  const int saved = dup(2);
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(fd >= 0);
  dup2(fd, 2);
  close(fd);
  fn();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST_CASE("an unwritable STREAMGRAD_TRACE is reported when read and traces nothing",
          "[trace]") {
  const std::string path = tmpdir() + "/no_such_folder/trace.json";
  REQUIRE(setenv("STREAMGRAD_TRACE", path.c_str(), 1) == 0);
  const std::string err = capture_stderr([] { (void)config(); });
  CHECK_THAT(err, Catch::Contains("STREAMGRAD_TRACE=" + path) &&
                      Catch::Contains("No such file or directory") &&
                      Catch::Contains("tracing is off"));
  CHECK(config().trace_path.empty());
  const Stream s = Stream::create("sim:0");
  launch(s, {"work", {}, {}}, [] {});
  s.synchronize();
  CHECK(global_trace() == nullptr);
}

TEST_CASE("unwritable_reason names why a path cannot be written", "[trace]") {
  const std::string dir = tmpdir();
  CHECK(unwritable_reason(dir + "/fresh.json").empty());
  { std::ofstream(dir + "/existing.json") << "{}"; }
  CHECK(unwritable_reason(dir + "/existing.json").empty());
  CHECK_THAT(unwritable_reason(dir + "/missing/x.json"),
             Catch::Contains(dir + "/missing") && Catch::Contains("No such file"));
  CHECK(unwritable_reason(dir) == "it is a folder");
  CHECK_THAT(unwritable_reason(dir + "/existing.json/x.json"),
             Catch::Contains("Not a directory"));
}

}  // namespace
}  // namespace streamgrad
