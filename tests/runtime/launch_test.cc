// The launch entry point: observers see every launch with its stream and byte ranges
// (the sanitizer and trace will hang on this), copies and fills included.
#include "runtime/backend/launch.h"

#include <catch2/catch.hpp>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace streamgrad {
namespace {

class Recorder : public LaunchObserver {
 public:
  struct Seen {
    std::string name;
    Stream stream;
    std::vector<MemRange> reads, writes;
  };
  void on_launch(const Stream& s, const LaunchDesc& d) override {
    std::lock_guard<std::mutex> lk(mu);
    seen.push_back(Seen{d.name, s, {d.reads.begin(), d.reads.end()},
                        {d.writes.begin(), d.writes.end()}});
  }
  std::mutex mu;
  std::vector<Seen> seen;
};

TEST_CASE("observers see each launch with its stream and buffers", "[launch]") {
  Recorder rec;
  add_launch_observer(&rec);
  const Stream s = Stream::create("sim:0");
  Storage a = Storage::allocate(64, s), b = Storage::allocate(64, s);
  const MemRange r[] = {{a.data(), 64}};
  const MemRange w[] = {{b.data(), 32}};
  launch(s, {"my_kernel", r, w}, [] {});
  copy_async(s, b.data(), a.data(), 16);
  fill_async(s, a.data(), 0, 8);
  sleep(s, 10);
  s.synchronize();
  remove_launch_observer(&rec);
  launch(s, {"unobserved", {}, {}}, [] {});
  s.synchronize();

  REQUIRE(rec.seen.size() == 4);
  CHECK(rec.seen[0].name == "my_kernel");
  CHECK(rec.seen[0].stream == s);
  CHECK(rec.seen[0].reads[0].ptr == a.data());
  CHECK(rec.seen[0].writes[0].bytes == 32);
  CHECK(rec.seen[1].name == "copy");
  CHECK(rec.seen[1].reads[0].ptr == a.data());
  CHECK(rec.seen[1].writes[0].ptr == b.data());
  CHECK(rec.seen[2].name == "fill");
  CHECK(rec.seen[2].reads.empty());
  CHECK(rec.seen[3].name == "sleep");
}

TEST_CASE("cpu launches run before launch returns", "[launch]") {
  int x = 0;
  launch(Stream::default_for("cpu"), {"set", {}, {}}, [&x] { x = 3; });
  CHECK(x == 3);
}

}  // namespace
}  // namespace streamgrad
