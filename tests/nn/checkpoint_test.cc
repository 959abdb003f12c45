// nn/checkpoint: safetensors files and model/optimiser checkpoints. Round trips on cpu
// and sim:0, resuming Adam bitwise, an independent reading of the bytes against the
// safetensors spec, a file laid out as Python's safetensors writes it, atomic saves.
// Refused files: checkpoint_errors_test.cc.
#include <catch2/catch.hpp>

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>

#include "tests/nn/checkpoint_test_util.h"
#include <nlohmann/json.hpp>

namespace streamgrad {
namespace {

using json = nlohmann::json;
using namespace checkpoint_testing;  // NOLINT: the tests' shared helpers

TEST_CASE("a checkpoint restores another-seed model to bitwise identical predictions",
          "[nn][checkpoint]") {
  const Device device = GENERATE(Device("cpu"), Device("sim:0"));
  const Batch b = make_batch(device);
  auto saved = make_model(1, device);
  nn::Adam opt(saved->parameters(), nn::AdamOptions(0.01));
  train(*saved, opt, b, 2);  // BatchNorm's running statistics move too
  const std::string path = tmp_path("roundtrip.safetensors");
  nn::save_checkpoint(path, *saved, nullptr, {{"epoch", "2"}});

  auto loaded = make_model(2, device);
  saved->eval();
  loaded->eval();
  CHECK(raw(saved->forward(b.x)) != raw(loaded->forward(b.x)));
  const nn::Metadata meta = nn::load_checkpoint(path, *loaded);
  CHECK(meta == nn::Metadata{{"epoch", "2"}});
  CHECK(raw(saved->forward(b.x)) == raw(loaded->forward(b.x)));
  CHECK(snapshot(*saved, opt).size() > 0);
  for (const auto& [name, t] : loaded->state_dict()) CHECK(t.device() == device);
  const auto a = saved->state_dict(), c = loaded->state_dict();
  for (size_t i = 0; i < a.size(); ++i) CHECK(raw(a[i].second) == raw(c[i].second));
}

TEST_CASE("resuming Adam from a checkpoint continues training bitwise", "[nn][checkpoint]") {
  const Device device = GENERATE(Device("cpu"), Device("sim:0"));
  const Batch b = make_batch(device);
  auto first = make_model(1, device);
  nn::Adam opt1(first->parameters(), nn::AdamOptions(0.01).weight_decay(0.1));
  train(*first, opt1, b, 3);
  const std::string path = tmp_path("resume.safetensors");
  nn::save_checkpoint(path, *first, &opt1);
  train(*first, opt1, b, 3);  // uninterrupted

  auto second = make_model(5, device);
  nn::Adam opt2(second->parameters(), nn::AdamOptions(0.5).weight_decay(0.1));
  const nn::Metadata meta = nn::load_checkpoint(path, *second, &opt2);
  CHECK(meta.empty());
  CHECK(opt2.lr() == 0.01);
  CHECK(opt2.state_dict().scalars.at("0.step") == 3);
  for (const auto& [name, t] : opt2.state_dict().tensors) CHECK(t.device() == device);
  // Without an optimiser the optimiser's entries are ignored.
  auto model_only = make_model(6, device);
  CHECK_NOTHROW(nn::load_checkpoint(path, *model_only));
  train(*second, opt2, b, 3);  // resumed
  const auto a = first->state_dict(), c = second->state_dict();
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    CHECK(raw(a[i].second) == raw(c[i].second));
  }
  const nn::OptimizerState s1 = opt1.state_dict(), s2 = opt2.state_dict();
  CHECK(s1.scalars == s2.scalars);
  REQUIRE(s1.tensors.size() == s2.tensors.size());
  for (size_t i = 0; i < s1.tensors.size(); ++i) {
    CHECK(s1.tensors[i].first == s2.tensors[i].first);
    CHECK(raw(s1.tensors[i].second) == raw(s2.tensors[i].second));
  }
}

TEST_CASE("an independent reader finds the file laid out as the spec says", "[nn][checkpoint]") {
  const Device device = GENERATE(Device("cpu"), Device("sim:0"));
  auto m = make_model(3, device);
  nn::Adam opt(m->parameters(), nn::AdamOptions(0.003));
  train(*m, opt, make_batch(device), 2);
  const std::string path = tmp_path("layout.safetensors");
  nn::save_checkpoint(path, *m, &opt, {{"note", "hi"}});

  std::map<std::string, Tensor> expected;
  for (const auto& [name, t] : m->state_dict()) expected[name] = t;
  for (const auto& [name, t] : opt.state_dict().tensors) expected["optimizer." + name] = t;
  const std::map<DType, std::string> codes = {{DType::kFloat32, "F32"}, {DType::kFloat64, "F64"},
                                              {DType::kInt64, "I64"}, {DType::kBool, "BOOL"}};

  const std::string bytes = read_bytes(path);
  REQUIRE(bytes.size() >= 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  REQUIRE(8 + n <= bytes.size());
  CHECK((8 + n) % 8 == 0);  // the data starts aligned
  const std::string text = bytes.substr(8, n);
  CHECK(text.front() == '{');
  const json header = json::parse(text);
  REQUIRE(header.is_object());
  CHECK(header["__metadata__"]["note"] == "hi");
  CHECK(header["__metadata__"]["optimizer.lr"] == "0.0030000000000000001");
  CHECK(header["__metadata__"]["optimizer.0.step"] == "2");
  const uint64_t data_start = 8 + n, buffer = bytes.size() - data_start;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  size_t entries = 0;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") continue;
    INFO(name);
    ++entries;
    REQUIRE(expected.count(name) == 1);
    const Tensor& t = expected[name];
    CHECK(e["dtype"] == codes.at(t.dtype()));
    CHECK(e["shape"].get<std::vector<int64_t>>() == t.sizes());
    const uint64_t begin = e["data_offsets"][0], end = e["data_offsets"][1];
    CHECK(end - begin == static_cast<uint64_t>(t.numel()) * element_size(t.dtype()));
    CHECK(begin % element_size(t.dtype()) == 0);
    REQUIRE(end <= buffer);
    CHECK(bytes.substr(data_start + begin, end - begin) == raw(t));
    ranges.emplace_back(begin, end);
  }
  CHECK(entries == expected.size());
  std::sort(ranges.begin(), ranges.end());
  uint64_t covered = 0;
  for (const auto& [begin, end] : ranges) {
    CHECK(begin == covered);  // contiguous: no hole, no overlap
    covered = end;
  }
  CHECK(covered == buffer);
}

TEST_CASE("a file laid out as Python's safetensors writes it loads", "[nn][checkpoint]") {
  const Device device = GENERATE(Device("cpu"), Device("sim:0"));
  const std::string path = tmp_path("python.safetensors");
  write_bytes(path, python_file());
  const nn::SafetensorsContents got = nn::load_safetensors(path, device);
  CHECK(got.metadata == nn::Metadata{{"format", "pt"}});
  REQUIRE(got.tensors.size() == 4);
  const auto& t = got.tensors;
  CHECK(t[0].first == "a");
  CHECK(t[0].second.to_vector<double>() == std::vector<double>{1.5, -2.25});
  CHECK(t[1].second.sizes().empty());
  CHECK(t[1].second.item<int64_t>() == -7);
  CHECK(t[2].second.sizes() == Shape{2, 2});
  CHECK(t[2].second.to_vector<float>() == std::vector<float>{0.5f, 1.0f, -3.0f, 8.0f});
  CHECK(t[3].second.to_vector<bool>() == std::vector<bool>{true, false, true});
  for (const auto& [name, x] : t) CHECK(x.device() == device);

  // And back: what save_safetensors writes reads as the same tensors.
  const std::string again = tmp_path("python_again.safetensors");
  nn::save_safetensors(again, got.tensors, got.metadata);
  const nn::SafetensorsContents back = nn::load_safetensors(again);
  for (size_t i = 0; i < 4; ++i) CHECK(raw(back.tensors[i].second) == raw(t[i].second));
}

TEST_CASE("float16 and bfloat16 tensors are F16 and BF16 entries, bit for bit",
          "[nn][checkpoint][amp]") {
  const Device device = GENERATE(Device("cpu"), Device("sim:0"));
  const std::vector<uint16_t> patterns = {0x0000, 0x8000, 0x3c00, 0x7bff, 0x7c00, 0x7e01, 0x0001};
  std::vector<Half> h;
  std::vector<BFloat16> b;
  for (uint16_t p : patterns) {
    h.push_back(Half::from_bits(p));
    b.push_back(BFloat16::from_bits(p));
  }
  const std::string path = tmp_path("half.safetensors");
  nn::save_safetensors(path, {{"h", from_vector(h)}, {"b", from_vector(b)}});
  // The header names the formats as Python's safetensors does.
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(bytes.find("\"dtype\":\"F16\"") != std::string::npos);
  CHECK(bytes.find("\"dtype\":\"BF16\"") != std::string::npos);
  const nn::SafetensorsContents got = nn::load_safetensors(path, device);
  REQUIRE(got.tensors.size() == 2);
  CHECK(got.tensors[0].first == "b");
  CHECK(got.tensors[0].second.dtype() == DType::kBFloat16);
  CHECK(got.tensors[1].second.dtype() == DType::kFloat16);
  const std::vector<BFloat16> b2 = got.tensors[0].second.to_vector<BFloat16>();
  const std::vector<Half> h2 = got.tensors[1].second.to_vector<Half>();
  for (size_t i = 0; i < patterns.size(); ++i) {
    CHECK(b2[i].bits == patterns[i]);
    CHECK(h2[i].bits == patterns[i]);
  }
  // Printing shows the values and the dtype.
  const std::string printed = got.tensors[1].second.str();
  CHECK(printed.find("65504") != std::string::npos);
  CHECK(printed.find("float16") != std::string::npos);
  CHECK(dtype_from_name("half") == DType::kFloat16);
  CHECK(dtype_from_name("bfloat16") == DType::kBFloat16);
}

TEST_CASE("saving is atomic and refuses bad names", "[nn][checkpoint]") {
  const std::string path = tmp_path("atomic.safetensors");
  nn::save_safetensors(path, {{"x", from_vector<float>({1, 2})}});
  const std::string before = read_bytes(path);
  const nn::NamedTensors twice = {{"x", ones({2})}, {"x", ones({2})}};
  CHECK_THROWS_AS(nn::save_safetensors(path, twice), ValueError);
  CHECK_THROWS_WITH(nn::save_safetensors(path, twice), Catch::Contains("'x' appears twice"));
  CHECK_THROWS_AS(nn::save_safetensors(path, {{"__metadata__", ones({2})}}), ValueError);
  CHECK_THROWS_WITH(nn::save_safetensors(path, {{"__metadata__", ones({2})}}),
                    Catch::Contains("not allowed"));
  CHECK_THROWS_AS(nn::save_safetensors(path, {{"y", Tensor()}}), ValueError);
  CHECK_THROWS_WITH(nn::save_safetensors(path, {{"y", Tensor()}}), Catch::Contains("undefined"));
  CHECK(read_bytes(path) == before);
  try {
    nn::save_safetensors(tmp_path("no/such/dir/f.safetensors"), {{"x", ones({1})}});
    FAIL("saving into a missing directory did not throw");
  } catch (const IOError& e) {
    CHECK(e.error_number() == ENOENT);
    CHECK_THAT(e.what(), Catch::Contains("save_safetensors '") && Catch::Contains("cannot create"));
  }
  // No temporary file is left beside the target.
  nn::save_safetensors(path, {{"x", ones({3})}});
  DIR* dir = opendir(tmp_path("").c_str());
  REQUIRE(dir != nullptr);
  while (const dirent* e = readdir(dir)) CHECK(std::strstr(e->d_name, ".tmp.") == nullptr);
  closedir(dir);
  CHECK(nn::load_safetensors(path).tensors[0].second.sizes() == Shape{3});
  try {
    nn::load_safetensors(tmp_path("missing.safetensors"));
    FAIL("loading a missing file did not throw");
  } catch (const IOError& e) {
    CHECK(e.error_number() == ENOENT);
    CHECK_THAT(e.what(), Catch::Contains("load_safetensors '") && Catch::Contains("cannot open"));
  }
}

}  // namespace
}  // namespace streamgrad
