// STREAMGRAD_SANITIZE_STREAMS=1 (set by the BUILD target) installs a process-wide
// sanitizer in throw mode: a racing launch throws before its work is enqueued, and
// SanitizerSuppression turns that off for code that races on purpose.
#include <catch2/catch.hpp>

#include "runtime/runtime.h"

namespace streamgrad {
namespace {

TEST_CASE("the environment variable turns the sanitizer on in throw mode", "[sanitizer]") {
  REQUIRE(config().sanitize_streams);
  const Stream a = Stream::create("sim:0"), b = Stream::create("sim:0");
  Storage buf = Storage::allocate(32, a);
  const MemRange r[] = {{buf.data(), 32}};
  launch(a, {"writer", {}, r}, [] {});
  REQUIRE(global_stream_sanitizer() != nullptr);
  CHECK_THROWS_WITH(launch(b, {"reader", r, {}}, [] {}),
                    Catch::Contains("reader on sim:0/s") && Catch::Contains("writer"));
  {
    SanitizerSuppression on_purpose;
    launch(b, {"reader_again", r, {}}, [] {});  // collected, not thrown
    CHECK(global_stream_sanitizer()->findings().size() >= 1);
  }
  CHECK(global_stream_sanitizer()->findings().empty());  // dropped with the scope
  b.wait_stream(a);
  launch(b, {"ordered_reader", r, {}}, [] {});  // fine once ordered
  synchronize("sim:0");
}

}  // namespace
}  // namespace streamgrad
