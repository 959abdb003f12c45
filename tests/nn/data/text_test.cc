// nn/data/text.h: the corpus split by documents with a seed, the byte vocabulary, and
// windows whose target is the input shifted by one token.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "nn/data/loader.h"
#include "nn/data/text.h"
#include "runtime/runtime.h"
#include "tests/device_names.h"

namespace streamgrad {
namespace {

// A folder under the test's temporary directory with the given files.
std::string make_folder(const std::string& name,
                        const std::vector<std::pair<std::string, std::string>>& files) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  REQUIRE(std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()) == 0);
  for (const auto& [file, text] : files) std::ofstream(dir + "/" + file) << text;
  return dir;
}

std::string fortunes(int first, int count) {
  std::string s;
  for (int i = first; i < first + count; ++i) s += "fortune " + std::to_string(i) + "\n%\n";
  return s;
}

TEST_CASE("the corpus is split by documents, reproducibly for a seed", "[nn][text]") {
  const std::string dir = make_folder(
      "corpus", {{"b", fortunes(10, 10)}, {"a", fortunes(0, 10)}, {"a.dat", "\x01\x02 index"}});
  REQUIRE(symlink((dir + "/a").c_str(), (dir + "/a.u8").c_str()) == 0);
  const nn::TextCorpus c = nn::load_text_corpus(dir, 0.25, 7);
  CHECK(c.train_documents + c.validation_documents == 20);  // .dat and .u8 skipped
  CHECK(c.validation_documents == 5);
  // Whole documents on either side, none twice, none lost; training text keeps file order.
  std::multiset<std::string> all;
  for (const std::string* part : {&c.train, &c.validation}) {
    std::istringstream in(*part);
    for (std::string line; std::getline(in, line);) all.insert(line);
  }
  CHECK(all.size() == 20);
  CHECK(std::set<std::string>(all.begin(), all.end()).size() == 20);
  CHECK(c.train.find("fortune 0\n") < c.train.size());
  const nn::TextCorpus again = nn::load_text_corpus(dir, 0.25, 7);
  CHECK(again.validation == c.validation);
  const nn::TextCorpus other = nn::load_text_corpus(dir, 0.25, 8);
  CHECK(other.validation != c.validation);
  CHECK(nn::load_text_corpus(dir, 0, 7).validation.empty());
  // One file without separators is one document.
  const std::string one = make_folder("one", {{"plain.txt", "just text\nmore\n"}});
  CHECK(nn::load_text_corpus(one + "/plain.txt", 0.5, 1).train == "just text\nmore\n");
}

TEST_CASE("corpus errors name the path and what to do", "[nn][text]") {
  REQUIRE_THROWS_WITH(nn::load_text_corpus("/nonexistent/corpus", 0.1, 1),
                      Catch::Contains("/nonexistent/corpus") &&
                          Catch::Contains("No such file") && Catch::Contains("bootstrap"));
  try {
    nn::load_text_corpus("/nonexistent/corpus", 0.1, 1);
  } catch (const IOError& e) {
    CHECK(e.error_number() == ENOENT);
  }
  const std::string empty = make_folder("empty", {});
  REQUIRE_THROWS_AS(nn::load_text_corpus(empty, 0.1, 1), IOError);
  REQUIRE_THROWS_AS(nn::load_text_corpus(empty, 1.0, 1), ValueError);
}

TEST_CASE("the vocabulary holds the bytes of the text, in byte order", "[nn][text]") {
  const nn::CharVocab v = nn::CharVocab::from_text("hello, world\n");
  CHECK(v.symbols() == "\n ,dehlorw");
  CHECK(v.size() == 10);
  const std::vector<int64_t> ids = v.encode("world");
  CHECK(ids == std::vector<int64_t>{9, 7, 8, 6, 3});
  CHECK(v.decode(ids) == "world");
  REQUIRE_THROWS_WITH(v.encode("wordz"),
                      Catch::Contains("byte 122") && Catch::Contains("offset 4"));
  REQUIRE_THROWS_AS(v.decode({10}), ValueError);
  REQUIRE_THROWS_AS(v.decode({-1}), ValueError);
}

TEST_CASE("windows: the target is the input one token further on", "[nn][text]") {
  const Device d(GENERATE(from_range(testing::device_names())));
  std::vector<int64_t> tokens(50);
  for (int64_t i = 0; i < 50; ++i) tokens[static_cast<size_t>(i)] = i;
  const nn::TextWindows w(tokens, 8);
  CHECK(w.num_windows() == 42);
  auto [x, y] = w.batch_at({0, 41}, d);
  CHECK(x.sizes() == Shape({2, 8}));
  CHECK(x.dtype() == DType::kInt64);
  CHECK(x.device() == d);
  const std::vector<int64_t> xv = x.to_vector<int64_t>(), yv = y.to_vector<int64_t>();
  CHECK(xv[0] == 0);
  CHECK(xv[8] == 41);
  CHECK(yv[15] == 49);  // the last token is a target only
  for (size_t i = 0; i < xv.size(); ++i) CHECK(yv[i] == xv[i] + 1);
  std::mt19937_64 a(3), b(3);
  CHECK(w.sample(4, a, d).first.to_vector<int64_t>() ==
        w.sample(4, b, d).first.to_vector<int64_t>());
  REQUIRE_THROWS_AS(w.batch_at({42}, d), ValueError);
  REQUIRE_THROWS_AS(w.sample(0, a, d), ValueError);
  REQUIRE_THROWS_WITH(nn::TextWindows(std::vector<int64_t>(8, 0), 8),
                      Catch::Contains("needs at least 9 tokens"));
}

TEST_CASE("a text data set serves windows every stride tokens through the loader",
          "[nn][text][loader]") {
  const Device d(GENERATE(from_range(testing::device_names())));
  std::vector<int64_t> tokens(50);
  for (int64_t i = 0; i < 50; ++i) tokens[static_cast<size_t>(i)] = 100 + i;
  auto windows = std::make_shared<nn::TextWindows>(tokens, 8);  // starts 0..41
  auto data = std::make_shared<nn::TextDataset>(windows, 8);
  CHECK(data->size() == 6);  // starts 0, 8, ..., 40
  CHECK(nn::TextDataset(windows, 1).size() == 42);
  CHECK(data->example_shape() == Shape({8}));
  CHECK(data->target_shape() == Shape({8}));
  CHECK(data->data_dtype() == DType::kInt64);
  nn::DataLoader loader(data, nn::DataLoaderOptions().batch_size(4).shuffle(false).device(d));
  loader.start_epoch(0);
  nn::Batch b;
  REQUIRE(loader.next(&b));
  CHECK(b.data.sizes() == Shape({4, 8}));
  CHECK(b.data.dtype() == DType::kInt64);
  CHECK(b.target.sizes() == Shape({4, 8}));
  CHECK(b.data.device() == d);
  const std::vector<int64_t> x = b.data.to_vector<int64_t>(), y = b.target.to_vector<int64_t>();
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t t = 0; t < 8; ++t) {
      CHECK(x[static_cast<size_t>(i * 8 + t)] == 100 + 8 * i + t);
      CHECK(y[static_cast<size_t>(i * 8 + t)] == 101 + 8 * i + t);
    }
  }
  REQUIRE(loader.next(&b));
  CHECK(b.data.sizes() == Shape({2, 8}));  // the last, partial batch: starts 32 and 40
  CHECK(b.target.to_vector<int64_t>().back() == 148);  // window 40: tokens 141..148
  CHECK_FALSE(loader.next(&b));
  REQUIRE_THROWS_WITH(nn::TextDataset(windows, 0), Catch::Contains("stride must be at least 1"));
  float f = 0;
  int64_t t = 0;
  REQUIRE_THROWS_WITH(data->get(0, &f, &t), Catch::Contains("holds int64 data"));
}

TEST_CASE("the fortunes corpus, where installed", "[nn][text]") {
  const std::string path = "/usr/share/games/fortunes";
  if (access(path.c_str(), R_OK) != 0) {
    WARN("fortunes is not installed: tools/bootstrap.sh installs it");
    return;
  }
  const nn::TextCorpus c = nn::load_text_corpus(path, 0.1, 1);
  CHECK(c.train.size() > 1000000);
  CHECK(c.validation_documents > 100);
  const nn::CharVocab v = nn::CharVocab::from_text(c.train + c.validation);
  CHECK(v.size() > 60);
  CHECK(v.size() <= 256);
}

}  // namespace
}  // namespace streamgrad
