// IDX reading and the DataLoader: the real Fashion-MNIST files (expected values computed
// independently with Python's gzip module: first labels 9 0 0 3 0 2 7 2 5 5, 6000 nines,
// pixel sums 76247 for image 0 and 16684 for image 59999, pixel (0, 14, 14) = 217), every
// corrupted variant and unreadable file (the exception's type, errno and message), and
// the loader's epochs, order, bounds, early exit and errors — behaviours of PyTorch's
// DataLoader tests (test/test_dataloader.py) on cpu and sim:0.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <stdexcept>
#include <typeinfo>

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

std::string temp_dir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  std::filesystem::create_directories(dir);
  return dir;
}

// The exception `f` throws, which must be exactly an E; fails the test otherwise.
template <typename E, typename F>
E thrown(F&& f) {
  try {
    f();
  } catch (const E& e) {
    CHECK(typeid(e) == typeid(E));
    return e;
  } catch (const std::exception& e) {
    FAIL("threw " << typeid(e).name() << " instead: " << e.what());
  }
  FAIL("did not throw");
  throw std::logic_error("not reached");
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE("the real Fashion-MNIST files read as the reference says", "[data][idx]") {
  std::shared_ptr<nn::ImageDataset> train = nn::load_fashion_mnist(kDir, true, /*normalize=*/false);
  std::shared_ptr<nn::ImageDataset> test = nn::load_fashion_mnist(kDir, false, false);
  CHECK(train->size() == 60000);
  CHECK(test->size() == 10000);
  CHECK(train->example_shape() == Shape{1, 28, 28});
  std::vector<float> img(784);
  int64_t label = -1;
  std::vector<int64_t> first;
  for (int i = 0; i < 10; ++i) first.push_back(train->label(i));
  CHECK(first == std::vector<int64_t>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5});
  int nines = 0;
  for (int64_t i = 0; i < 60000; ++i) nines += train->label(i) == 9;
  CHECK(nines == 6000);
  train->get(0, img.data(), &label);
  double s = 0;
  for (float v : img) s += v * 255;
  CHECK(s == Approx(76247).epsilon(1e-6));
  CHECK(img[14 * 28 + 14] * 255 == Approx(217));
  train->get(59999, img.data(), &label);
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
      {"short", std::string("\0\0", 2), "shorter than the 4-byte"},
      {"magic", bad_magic, "not an IDX file (magic starts 00 01"},
      {"unknown_type", idx_bytes({4}, 4, 0x01), "element type 0x01 is none the format defines"},
      {"rank", idx_bytes({}, 0), "rank 0"},
      {"dims", idx_bytes({3, 3}, 0).substr(0, 9), "truncated in the size of dimension 1"},
      {"data", idx_bytes({10, 10}, 99), "truncated: the dimensions need 100 bytes"},
      {"trailing", trailing, "trailing bytes"},
      {"overflow", idx_bytes({65536, 65536}, 0), "overflows"},
  };
  for (const Bad& b : cases) {
    const std::string path = temp_file("bad_" + b.name + (gz ? ".gz" : ""), b.bytes, gz);
    INFO(b.name << (gz ? " (gzip)" : ""));
    const IOError e = thrown<IOError>([&] { nn::read_idx(path); });
    const std::string m = e.what();
    INFO(m);
    CHECK(has(m, "read_idx '" + path + "': "));
    CHECK(has(m, b.says));
    CHECK(has(m, "download or install it again"));  // what to do
    CHECK(e.error_number() == 0);                    // the bytes, not the system
  }
  // A type the format defines but streamgrad does not read is unsupported, not corrupt.
  const std::string floats = temp_file(gz ? "floats.gz" : "floats", idx_bytes({4}, 16, 0x0D), gz);
  const ValueError v = thrown<ValueError>([&] { nn::read_idx(floats); });
  CHECK(has(v.what(), "read_idx '" + floats + "': IDX element type 0x0d (32-bit floats) is not "
                      "supported"));
  CHECK(has(v.what(), "convert the file to unsigned bytes"));

  const std::string images = temp_file("imgs", idx_bytes({3, 2, 2}, 12), gz);
  const std::string labels = temp_file("labs", idx_bytes({4}, 4), gz);
  const IOError mismatch = thrown<IOError>([&] { nn::load_idx_images(images, labels); });
  CHECK(has(mismatch.what(), "load_idx_images: '" + labels + "' holds 4 labels but '" + images +
                                 "' holds 3 images; they must match"));
  CHECK(mismatch.error_number() == 0);
  const IOError swapped = thrown<IOError>([&] { nn::load_idx_images(labels, images); });
  CHECK(has(swapped.what(), "'" + labels + "' has 1 dimensions, expected 3"));
  const std::string labels2d = temp_file("labs2d", idx_bytes({3, 2}, 6), gz);
  const IOError flat = thrown<IOError>([&] { nn::load_idx_images(images, labels2d); });
  CHECK(has(flat.what(), "'" + labels2d + "' has 2 dimensions, expected 1"));
  // read_idx's errors reach the caller of load_idx_images with its name first, type kept.
  const std::string cut = temp_file("labs_cut", idx_bytes({3}, 2), gz);
  const IOError inner = thrown<IOError>([&] { nn::load_idx_images(images, cut); });
  CHECK(has(inner.what(), "load_idx_images: read_idx '" + cut + "': truncated"));
  const ValueError inner_type = thrown<ValueError>([&] { nn::load_idx_images(floats, labels); });
  CHECK(has(inner_type.what(), "load_idx_images: read_idx '" + floats + "'"));
}

TEST_CASE("a limit reads the first items only and no further into the file", "[data][idx]") {
  const bool gz = GENERATE(false, true);
  INFO((gz ? "gzip" : "plain"));
  const std::string sfx = gz ? ".gz" : "";
  const std::string images = temp_file("lim_imgs" + sfx, idx_bytes({5, 2, 3}, 30), gz);
  const std::string labels = temp_file("lim_labs" + sfx, idx_bytes({5}, 5), gz);
  const nn::IdxArray all = nn::read_idx(images);
  CHECK(all.dims == std::vector<int64_t>{5, 2, 3});
  CHECK(all.file_items == 5);
  const nn::IdxArray three = nn::read_idx(images, 3);
  CHECK(three.dims == std::vector<int64_t>{3, 2, 3});
  CHECK(three.file_items == 5);
  CHECK(three.data == std::vector<uint8_t>(all.data.begin(), all.data.begin() + 18));
  CHECK(nn::read_idx(images, 5).data == all.data);  // a limit at or above the count: all
  CHECK(nn::read_idx(images, 9).dims == all.dims);

  // The bytes after the items asked for are not read: a file cut inside item 4 reads its
  // first 3, and is refused as truncated when item 4 is asked for.
  const std::string cut = temp_file("lim_cut" + sfx, idx_bytes({5, 2, 3}, 20), gz);
  CHECK(nn::read_idx(cut, 3).data == three.data);
  CHECK(has(thrown<IOError>([&] { nn::read_idx(cut, 4); }).what(),
            "truncated: the first 4 items need 24 bytes of data but the file has 20"));
  CHECK(has(thrown<IOError>([&] { nn::read_idx(cut); }).what(),
            "truncated: the dimensions need 30 bytes"));

  const std::shared_ptr<nn::ImageDataset> two = nn::load_idx_images(images, labels, 0, 1, 2);
  CHECK(two->size() == 2);
  CHECK(two->example_shape() == Shape{1, 2, 3});
  std::vector<float> img(6);
  int64_t label = -1;
  two->get(1, img.data(), &label);
  CHECK(label == 1);
  CHECK(img[5] * 255 == Approx(11));
  CHECK(nn::load_idx_images(images, labels, 0, 1, 0)->size() == 5);
  // The files' stated counts must still agree, however few examples are kept.
  const std::string four = temp_file("lim_labs4" + sfx, idx_bytes({4}, 4), gz);
  CHECK(has(thrown<IOError>([&] { nn::load_idx_images(images, four, 0, 1, 2); }).what(),
            "holds 4 labels but '" + images + "' holds 5 images"));
  const ValueError neg = thrown<ValueError>([&] { nn::load_idx_images(images, labels, 0, 1, -1); });
  CHECK(has(neg.what(), "load_idx_images: max_examples is -1; pass 0"));
  CHECK(has(thrown<ValueError>([&] { nn::read_idx(images, -2); }).what(),
            "read_idx '" + images + "': max_items is -2"));
}

TEST_CASE("the first Fashion-MNIST examples read alone are the reference's", "[data][idx]") {
  const std::shared_ptr<nn::ImageDataset> ten = nn::load_fashion_mnist(kDir, true, false, 10);
  REQUIRE(ten->size() == 10);
  std::vector<int64_t> labels;
  for (int i = 0; i < 10; ++i) labels.push_back(ten->label(i));
  CHECK(labels == std::vector<int64_t>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5});
  std::vector<float> img(784);
  int64_t label = -1;
  ten->get(0, img.data(), &label);
  double s = 0;
  for (float v : img) s += v * 255;
  CHECK(s == Approx(76247).epsilon(1e-6));
  CHECK(img[14 * 28 + 14] * 255 == Approx(217));
  CHECK(nn::load_fashion_mnist(kDir, false, true, 20000)->size() == 10000);
}

TEST_CASE("a file that cannot be read is an IOError carrying errno", "[data][idx]") {
  const IOError missing = thrown<IOError>([] { nn::read_idx("/nonexistent/file"); });
  CHECK(missing.error_number() == ENOENT);
  CHECK(has(missing.what(), "read_idx '/nonexistent/file': cannot open the file: "));
  CHECK(has(missing.what(), std::strerror(ENOENT)));
  CHECK(has(missing.what(), "check the path"));
  // A folder opens but cannot be read.
  const std::string dir = temp_dir("a_folder");
  const IOError folder = thrown<IOError>([&] { nn::read_idx(dir); });
  CHECK(folder.error_number() == EISDIR);
  CHECK(has(folder.what(), "read_idx '" + dir + "': read failed: "));
}

TEST_CASE("gzip data that does not decompress is refused as corrupt", "[data][idx]") {
  // A valid .gz whose CRC-32 trailer is wrong: every element decompresses, the check fails.
  const std::string good = temp_file("good.gz", idx_bytes({2, 3}, 6), true);
  std::ifstream in(good, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(bytes.size() > 8);
  CHECK(nn::read_idx(good).dims == std::vector<int64_t>{2, 3});
  std::string bad_crc = bytes;
  bad_crc[bad_crc.size() - 8] ^= 0x5a;
  const std::string crc = temp_file("bad_crc.gz", bad_crc, false);
  const IOError e = thrown<IOError>([&] { nn::read_idx(crc); });
  CHECK(has(e.what(), "read_idx '" + crc + "': corrupt gzip data ("));
  CHECK(e.error_number() == 0);
  // The trailer cut off: the data is all there, the stream is not complete.
  const std::string cut = temp_file("cut.gz", bytes.substr(0, bytes.size() - 8), false);
  CHECK(has(thrown<IOError>([&] { nn::read_idx(cut); }).what(), "corrupt gzip data ("));
}

TEST_CASE("load_fashion_mnist says how to get the data set when it is missing", "[data][idx]") {
  const std::string empty = temp_dir("no_fashion_mnist");
  const IOError e = thrown<IOError>([&] { nn::load_fashion_mnist(empty, /*train=*/true); });
  const std::string m = e.what();
  INFO(m);
  CHECK(e.error_number() == ENOENT);
  CHECK(has(m, "load_fashion_mnist: cannot open the file '" + empty +
                   "/train-images-idx3-ubyte.gz' (nor '" + empty + "/train-images-idx3-ubyte')"));
  CHECK(has(m, "tools/bootstrap.sh"));
  CHECK(has(m, "dataset-fashion-mnist"));
  CHECK(has(m, "/usr/share/datasets/fashion-mnist"));
  CHECK(has(thrown<IOError>([&] { nn::load_fashion_mnist(empty, false); }).what(),
            "/t10k-images-idx3-ubyte.gz"));
}

TEST_CASE("load_fashion_mnist reads unpacked files too, and names a damaged one", "[data][idx]") {
  const std::string dir = temp_dir("small_fashion_mnist");
  std::ofstream(dir + "/t10k-images-idx3-ubyte", std::ios::binary) << idx_bytes({2, 28, 28}, 1568);
  temp_file("small_fashion_mnist/t10k-labels-idx1-ubyte.gz", idx_bytes({2}, 2), true);
  std::shared_ptr<nn::ImageDataset> test = nn::load_fashion_mnist(dir, false, false);
  CHECK(test->size() == 2);
  CHECK(test->label(1) == 1);
  temp_file("small_fashion_mnist/t10k-labels-idx1-ubyte.gz", idx_bytes({3}, 2), true);
  const IOError e = thrown<IOError>([&] { nn::load_fashion_mnist(dir, false); });
  CHECK(has(e.what(), "load_fashion_mnist: read_idx '" + dir +
                          "/t10k-labels-idx1-ubyte.gz': truncated"));
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
