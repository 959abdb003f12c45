// IDX reading and the DataLoader: the real Fashion-MNIST files (expected values computed
// independently with Python's gzip module: first labels 9 0 0 3 0 2 7 2 5 5, 6000 nines,
// pixel sums 76247 for image 0 and 16684 for image 59999, pixel (0, 14, 14) = 217), every
// corrupted variant, and the loader's epochs, order, bounds, early exit and errors —
// behaviours of PyTorch's DataLoader tests (test/test_dataloader.py) on cpu and sim:0.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <set>

#include "nn/data/dataset.h"
#include "nn/data/idx.h"
#include "nn/data/loader.h"
#include "runtime/runtime.h"
#include "tests/device_names.h"

namespace streamgrad {
namespace {

const char* kDir = "/usr/share/datasets/fashion-mnist";

std::string temp_file(const std::string& name, const std::string& bytes, bool gz) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/" + name;
  if (gz) {
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(path, std::ios::binary) << bytes;
  }
  return path;
}

std::string idx_bytes(std::vector<uint32_t> dims, size_t data_bytes, uint8_t type = 0x08) {
  std::string s{'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int k = 3; k >= 0; --k) s.push_back(static_cast<char>((d >> (8 * k)) & 0xff));
  }
  for (size_t i = 0; i < data_bytes; ++i) s.push_back(static_cast<char>(i % 251));
  return s;
}

TEST_CASE("the real Fashion-MNIST files read as the reference says", "[data][idx]") {
  auto train = nn::load_fashion_mnist(kDir, true, /*normalize=*/false);
  REQUIRE(train.ok());
  auto test = nn::load_fashion_mnist(kDir, false, false);
  REQUIRE(test.ok());
  CHECK((*train)->size() == 60000);
  CHECK((*test)->size() == 10000);
  CHECK((*train)->example_shape() == Shape{1, 28, 28});
  std::vector<float> img(784);
  int64_t label = -1;
  std::vector<int64_t> first;
  for (int i = 0; i < 10; ++i) first.push_back((*train)->label(i));
  CHECK(first == std::vector<int64_t>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5});
  int nines = 0;
  for (int64_t i = 0; i < 60000; ++i) nines += (*train)->label(i) == 9;
  CHECK(nines == 6000);
  (*train)->get(0, img.data(), &label);
  double s = 0;
  for (float v : img) s += v * 255;
  CHECK(s == Approx(76247).epsilon(1e-6));
  CHECK(img[14 * 28 + 14] * 255 == Approx(217));
  (*train)->get(59999, img.data(), &label);
  s = 0;
  for (float v : img) s += v * 255;
  CHECK(s == Approx(16684).epsilon(1e-6));
}

TEST_CASE("corrupted IDX files are refused naming the file and the problem", "[data][idx]") {
  const bool gz = GENERATE(false, true);
  struct Bad {
    std::string name, bytes, says;
  };
  std::string trailing = idx_bytes({2, 2}, 4);
  trailing.push_back('x');
  std::string bad_magic = idx_bytes({4}, 4);
  bad_magic[1] = 1;
  const Bad cases[] = {
      {"short", "\0\0", "shorter than the 4-byte"},
      {"magic", bad_magic, "not an IDX file"},
      {"type", idx_bytes({4}, 16, 0x0D), "0x0d is not supported"},
      {"rank", idx_bytes({}, 0), "rank 0"},
      {"dims", idx_bytes({3, 3}, 0).substr(0, 9), "truncated in the size of dimension 1"},
      {"data", idx_bytes({10, 10}, 99), "truncated: the dimensions need 100 bytes"},
      {"trailing", trailing, "trailing bytes"},
      {"overflow", idx_bytes({65536, 65536}, 0), "overflows"},
  };
  for (const Bad& b : cases) {
    const std::string path = temp_file("bad_" + b.name + (gz ? ".gz" : ""), b.bytes, gz);
    const absl::StatusOr<nn::IdxArray> r = nn::read_idx(path);
    INFO(b.name << ": " << r.status());
    REQUIRE_FALSE(r.ok());
    CHECK(std::string(r.status().message()).find(b.says) != std::string::npos);
    CHECK(std::string(r.status().message()).find(path) != std::string::npos);
  }
  CHECK(absl::IsNotFound(nn::read_idx("/nonexistent/file").status()));
  const std::string images = temp_file("imgs", idx_bytes({3, 2, 2}, 12), gz);
  const std::string labels = temp_file("labs", idx_bytes({4}, 4), gz);
  const auto mismatch = nn::load_idx_images(images, labels);
  REQUIRE_FALSE(mismatch.ok());
  CHECK(std::string(mismatch.status().message()).find("4 labels but") != std::string::npos);
}

// Example i is the constant image i with label i % 10; `fail_at` throws from get().
class Counting : public nn::Dataset {
 public:
  explicit Counting(int64_t n, int64_t fail_at = -1) : n_(n), fail_at_(fail_at) {}
  int64_t size() const override { return n_; }
  Shape example_shape() const override { return {2}; }
  void get(int64_t i, float* d, int64_t* t) const override {
    if (i == fail_at_) throw ValueError("example " + std::to_string(i) + " is broken");
    d[0] = d[1] = static_cast<float>(i);
    *t = i % 10;
    ++calls;
  }
  mutable std::atomic<int64_t> calls{0};

 private:
  int64_t n_, fail_at_;
};

std::vector<int64_t> epoch_order(nn::DataLoader& loader, int64_t epoch, std::vector<int64_t>* sizes = nullptr) {
  std::vector<int64_t> seen;
  loader.start_epoch(epoch);
  for (nn::Batch b; loader.next(&b);) {
    REQUIRE(b.data.device() == loader.options().device());
    if (sizes != nullptr) sizes->push_back(b.target.size(0));
    for (float v : b.data.to_vector<float>()) seen.push_back(static_cast<int64_t>(v));
  }
  std::vector<int64_t> one_each;
  for (size_t i = 0; i < seen.size(); i += 2) one_each.push_back(seen[i]);
  return one_each;
}

TEST_CASE("every example once per epoch, seeded shuffles, drop_last", "[data][loader]") {
  const Device d(GENERATE(from_range(testing::device_names())));
  const int workers = GENERATE(1, 3);
  auto data = std::make_shared<Counting>(103);
  nn::DataLoader loader(data, nn::DataLoaderOptions().batch_size(10).seed(5).device(d).workers(workers));
  CHECK(loader.batches_per_epoch() == 11);
  std::vector<int64_t> sizes;
  const std::vector<int64_t> e0 = epoch_order(loader, 0, &sizes);
  CHECK(sizes.back() == 3);  // the last partial batch is kept
  CHECK(std::set<int64_t>(e0.begin(), e0.end()).size() == 103);
  CHECK(e0 != epoch_order(loader, 1));  // a new order each epoch
  CHECK(e0 == epoch_order(loader, 0));  // the same order for the same (seed, epoch)
  nn::DataLoader same_seed(data, nn::DataLoaderOptions().batch_size(7).seed(5).device(d));
  CHECK(epoch_order(same_seed, 0) == e0);  // the order does not depend on the batch size
  nn::DataLoader dropping(data, nn::DataLoaderOptions().batch_size(10).drop_last(true).shuffle(false).device(d));
  const std::vector<int64_t> in_order = epoch_order(dropping, 0);
  CHECK(in_order.size() == 100);
  CHECK(in_order.front() == 0);
  CHECK(in_order.back() == 99);
}

TEST_CASE("the loader stays at most prefetch batches ahead", "[data][loader]") {
  auto data = std::make_shared<Counting>(100);
  nn::DataLoader loader(data, nn::DataLoaderOptions().batch_size(5).prefetch(3).workers(2));
  loader.start_epoch(0);
  nn::Batch b;
  REQUIRE(loader.next(&b));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let workers run ahead
  CHECK(data->calls.load() <= (1 + 3) * 5);
}

TEST_CASE("stopping mid-epoch neither hangs nor leaks; worker errors keep their type",
          "[data][loader]") {
  const Device d(GENERATE(from_range(testing::device_names())));
  {
    nn::DataLoader loader(std::make_shared<Counting>(1000), nn::DataLoaderOptions().batch_size(4).device(d).workers(2));
    loader.start_epoch(0);
    nn::Batch b;
    CHECK(loader.next(&b));
  }  // destroyed with workers mid-epoch
  nn::DataLoader failing(std::make_shared<Counting>(40, 13),
                         nn::DataLoaderOptions().batch_size(4).shuffle(false).device(d));
  failing.start_epoch(0);
  nn::Batch b;
  for (int i = 0; i < 3; ++i) CHECK(failing.next(&b));
  CHECK_THROWS_AS(failing.next(&b), ValueError);  // batch 3 holds example 13
  CHECK(failing.next(&b));                         // later batches still come
  CHECK_THROWS_AS(nn::DataLoader(nullptr, nn::DataLoaderOptions()), ValueError);
  CHECK_THROWS_AS(nn::DataLoader(std::make_shared<Counting>(4), nn::DataLoaderOptions().batch_size(0)), ValueError);
  nn::DataLoader unstarted(std::make_shared<Counting>(4), nn::DataLoaderOptions());
  CHECK_THROWS_WITH(unstarted.next(&b), Catch::Contains("start_epoch"));
}

}  // namespace
}  // namespace streamgrad
