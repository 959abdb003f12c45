// STREAMGRAD_TRACE=path starts a process-wide recorder at the first launch. The variable is
// set here, before anything reads the runtime's configuration, so the path can live in
// the test's own temporary folder. (Writing at exit is checked through a tool in
// tests/tools/devices_test.sh.)
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "nlohmann/json.hpp"
#include "runtime/runtime.h"

namespace streamgrad {
namespace {

TEST_CASE("STREAMGRAD_TRACE records every launch and write_global_trace writes it",
          "[trace]") {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/global_trace.json";
  REQUIRE(setenv("STREAMGRAD_TRACE", path.c_str(), 1) == 0);
  REQUIRE(config().trace_path == path);  // fails if something read the config earlier
  const Stream s = Stream::create("sim:0");
  launch(s, {"first_launch", {}, {}}, [] {});
  REQUIRE(global_trace() != nullptr);
  s.synchronize();
  write_global_trace();
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json doc = nlohmann::json::parse(text.str());
  int found = 0;
  for (const nlohmann::json& e : doc.at("traceEvents")) {
    found +=
        e.at("ph").get<std::string>() == "X" && e.at("name").get<std::string>() == "first_launch";
  }
  CHECK(found == 1);
}

}  // namespace
}  // namespace streamgrad
