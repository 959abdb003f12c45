// STREAMGRAD_ALLOC_CONF (runtime/memory/alloc_conf.h): what it accepts and refuses, and
// what max_split_size_mb and garbage_collection_threshold do. The BUILD target sets
// STREAMGRAD_ALLOC_CONF=max_split_size_mb:32,garbage_collection_threshold:0.5 and gives
// each sim device 256 MiB.
#include <catch2/catch.hpp>

#include <string>

#include "runtime/memory/alloc_conf.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
const Device kDev("sim:0");

void start_empty() {
  synchronize(kDev);
  empty_cache(kDev);
  REQUIRE(memory_stats(kDev).reserved_bytes.current == 0);
}

TEST_CASE("STREAMGRAD_ALLOC_CONF refuses what it does not understand, by name",
          "[allocator][conf]") {
  const struct {
    const char* spec;
    const char* says;
  } bad[] = {
      {"max_split_size_mb", "'max_split_size_mb' is not key:value"},
      {"max_split_size_mb:abc", "max_split_size_mb:abc is not a whole number of MiB above 20"},
      {"max_split_size_mb:20", "above 20"},
      {"max_split_size_mb:-64", "above 20"},
      {"garbage_collection_threshold:1", "strictly between 0 and 1"},
      {"garbage_collection_threshold:nan", "strictly between 0 and 1"},
      {":0.5", "is not key:value"},
      {"max_split_size_mb:64,,", "'' is not key:value"},
      {"a:b:c", "'a:b:c' is not key:value"},
      {"colour:blue", "'colour' is not an option"},
      {"roundup_power2_divisions:4", "a PYTORCH_CUDA_ALLOC_CONF option that streamgrad does not"},
      {"backend:cudaMallocAsync", "streamgrad does not have"},
      {"expandable_segments:maybe", "is not True or False"},
  };
  for (const auto& b : bad) {
    INFO(b.spec);
    CHECK_THROWS_AS(parse_alloc_conf(b.spec), ValueError);
    CHECK_THROWS_WITH(parse_alloc_conf(b.spec),
                      Catch::Contains(std::string("STREAMGRAD_ALLOC_CONF=") + b.spec + ": ") &&
                          Catch::Contains(b.says) &&
                          Catch::Contains("Accepted: max_split_size_mb:M"));
  }
  const AllocConf none = parse_alloc_conf("  ");
  CHECK(none.max_split_size == AllocConf{}.max_split_size);
  CHECK(none.garbage_collection_threshold == 0);
  const AllocConf some =
      parse_alloc_conf(" max_split_size_mb : 64 , expandable_segments:False,"
                       "garbage_collection_threshold:0.75");
  CHECK(some.max_split_size == 64 * kMiB);
  CHECK(some.garbage_collection_threshold == 0.75);
  CHECK_FALSE(some.expandable_segments);
  CHECK(parse_alloc_conf("expandable_segments:True").expandable_segments);
}

TEST_CASE("the variable reaches the allocator", "[allocator][conf]") {
  CHECK(alloc_conf().max_split_size == 32 * kMiB);
  CHECK(alloc_conf().garbage_collection_threshold == 0.5);
}

TEST_CASE("max_split_size_mb keeps big cached blocks whole for big requests",
          "[allocator][conf]") {
  start_empty();
  const Stream s = Stream::create(kDev);
  void* big_at;
  {
    Storage big = Storage::allocate(64 * kMiB, s);
    big_at = big.data();
  }
  {
    Storage small = Storage::allocate(kMiB, s);  // would split the 64 MiB block otherwise
    const auto at = reinterpret_cast<uintptr_t>(small.data());
    const auto big_lo = reinterpret_cast<uintptr_t>(big_at);
    CHECK((at < big_lo || at >= big_lo + 64 * kMiB));
    CHECK(memory_stats(kDev).reserved_bytes.current == 65 * kMiB);
  }
  {
    Storage large = Storage::allocate(50 * kMiB, s);  // over the limit: takes it whole
    CHECK(large.data() == big_at);
    CHECK(memory_stats(kDev).allocated_bytes.current == 64 * kMiB);
  }
  Storage wasteful = Storage::allocate(40 * kMiB, s);  // would waste 24 MiB: a new segment
  CHECK(wasteful.data() != big_at);
}

TEST_CASE("garbage_collection_threshold frees the least recently freed segments first",
          "[allocator][conf]") {
  start_empty();
  const Stream s = Stream::create(kDev);
  void* a_at;
  void* b_at;
  {
    Storage a = Storage::allocate(40 * kMiB, s);
    Storage b = Storage::allocate(40 * kMiB, s);
    a_at = a.data();
    b_at = b.data();
    a = Storage();  // freed first
  }
  // 80 MiB cached + 60 MiB new would pass half of 256 MiB: a goes back, b stays.
  Storage c = Storage::allocate(60 * kMiB, s);
  CHECK(memory_stats(kDev).reserved_bytes.current == 100 * kMiB);
  Storage again = Storage::allocate(40 * kMiB, s);
  CHECK(again.data() == b_at);
  CHECK(again.data() != a_at);
}

}  // namespace
}  // namespace streamgrad
