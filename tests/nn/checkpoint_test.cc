// nn/checkpoint: safetensors files and model/optimiser checkpoints. Round trips on cpu
// and sim:0, resuming Adam bitwise, an independent reading of the bytes against the
// safetensors spec, a file laid out as Python's safetensors writes it, and every kind of
// corrupted or mismatched file refused with the model and optimiser left untouched
// (PyTorch's load_state_dict(strict=True) semantics, all-or-nothing).
#include <catch2/catch.hpp>

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>

#include "absl/strings/str_format.h"
#include "engine/factories.h"
#include "nn/checkpoint.h"
#include "nn/layers.h"
#include "nn/optim.h"
#include "ops/ops.h"
#include "runtime/runtime.h"
#include <nlohmann/json.hpp>

namespace streamgrad {
namespace {

using json = nlohmann::json;

std::string tmp_path(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// The tensor's elements as little-endian bytes, read back independently of nn/checkpoint.
std::string raw(const Tensor& t) {
  std::string out;
  auto put = [&](const auto& values) {
    for (auto v : values) {
      const auto copy = v;
      out.append(reinterpret_cast<const char*>(&copy), sizeof(copy));
    }
  };
  switch (t.dtype()) {
    case DType::kFloat32: put(t.to_vector<float>()); break;
    case DType::kFloat64: put(t.to_vector<double>()); break;
    case DType::kInt64: put(t.to_vector<int64_t>()); break;
    case DType::kBool: put(t.to_vector<bool>()); break;
  }
  return out;
}

std::shared_ptr<nn::Sequential> make_model(uint64_t seed, Device device) {
  manual_seed(seed);
  auto m = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv2d>(2, 3, 3), std::make_shared<nn::BatchNorm2d>(3),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Flatten>(),
      std::make_shared<nn::Linear>(48, 4)});
  m->to(device);
  return m;
}

struct Batch {
  Tensor x, y;
};
Batch make_batch(Device device) {
  manual_seed(7);
  return {to(randn({4, 2, 6, 6}), device), to(randn({4, 4}), device)};
}

void train(nn::Module& m, nn::Optimizer& opt, const Batch& b, int steps) {
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    mse_loss(m.forward(b.x), b.y).backward();
    opt.step();
  }
}

// Every bit of the model's state and the optimiser's.
std::vector<std::string> snapshot(const nn::Module& m, const nn::Optimizer& opt) {
  std::vector<std::string> out;
  for (const auto& [name, t] : m.state_dict()) out.push_back(name + "=" + raw(t));
  const nn::OptimizerState s = opt.state_dict();
  for (const auto& [name, t] : s.tensors) out.push_back("opt." + name + "=" + raw(t));
  for (const auto& [name, v] : s.scalars) out.push_back(absl::StrFormat("opt.%s=%.17g", name, v));
  return out;
}

TEST_CASE("a checkpoint restores another-seed model to bitwise identical predictions",
          "[nn][checkpoint]") {
  const Device device = GENERATE(Device("cpu"), Device("sim:0"));
  const Batch b = make_batch(device);
  auto saved = make_model(1, device);
  nn::Adam opt(saved->parameters(), nn::AdamOptions(0.01));
  train(*saved, opt, b, 2);  // BatchNorm's running statistics move too
  const std::string path = tmp_path("roundtrip.safetensors");
  REQUIRE(nn::save_checkpoint(path, *saved, nullptr, {{"epoch", "2"}}).ok());

  auto loaded = make_model(2, device);
  saved->eval();
  loaded->eval();
  CHECK(raw(saved->forward(b.x)) != raw(loaded->forward(b.x)));
  absl::StatusOr<nn::Metadata> meta = nn::load_checkpoint(path, *loaded);
  REQUIRE(meta.ok());
  CHECK(*meta == nn::Metadata{{"epoch", "2"}});
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
  REQUIRE(nn::save_checkpoint(path, *first, &opt1).ok());
  train(*first, opt1, b, 3);  // uninterrupted

  auto second = make_model(5, device);
  nn::Adam opt2(second->parameters(), nn::AdamOptions(0.5).weight_decay(0.1));
  absl::StatusOr<nn::Metadata> meta = nn::load_checkpoint(path, *second, &opt2);
  REQUIRE(meta.ok());
  CHECK(meta->empty());
  CHECK(opt2.lr() == 0.01);
  CHECK(opt2.state_dict().scalars.at("0.step") == 3);
  for (const auto& [name, t] : opt2.state_dict().tensors) CHECK(t.device() == device);
  // Without an optimiser the optimiser's entries are ignored.
  auto model_only = make_model(6, device);
  CHECK(nn::load_checkpoint(path, *model_only).ok());
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
  REQUIRE(nn::save_checkpoint(path, *m, &opt, {{"note", "hi"}}).ok());

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

// A file as Python writes it: safetensors.torch.save_file({"a": float64 [2], "b": int64
// scalar, "c": float32 [2, 2], "d": bool [3]}, metadata={"format": "pt"}).
std::string python_file() {
  std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F64","shape":[2],"data_offsets":[0,16]},)"
      R"("b":{"dtype":"I64","shape":[],"data_offsets":[16,24]},)"
      R"("c":{"dtype":"F32","shape":[2,2],"data_offsets":[24,40]},)"
      R"("d":{"dtype":"BOOL","shape":[3],"data_offsets":[40,43]}})";
  while ((8 + header.size()) % 8 != 0) header += ' ';
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  out += header;
  auto put = [&](auto v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  put(1.5), put(-2.25), put(int64_t{-7});
  for (float f : {0.5f, 1.0f, -3.0f, 8.0f}) put(f);
  for (char c : {1, 0, 1}) put(c);
  return out;
}

TEST_CASE("a file laid out as Python's safetensors writes it loads", "[nn][checkpoint]") {
  const Device device = GENERATE(Device("cpu"), Device("sim:0"));
  const std::string path = tmp_path("python.safetensors");
  write_bytes(path, python_file());
  absl::StatusOr<nn::SafetensorsContents> got = nn::load_safetensors(path, device);
  REQUIRE(got.ok());
  CHECK(got->metadata == nn::Metadata{{"format", "pt"}});
  REQUIRE(got->tensors.size() == 4);
  const auto& t = got->tensors;
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
  REQUIRE(nn::save_safetensors(again, got->tensors, got->metadata).ok());
  absl::StatusOr<nn::SafetensorsContents> back = nn::load_safetensors(again);
  REQUIRE(back.ok());
  for (size_t i = 0; i < 4; ++i) CHECK(raw(back->tensors[i].second) == raw(t[i].second));
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
  REQUIRE(nn::save_safetensors(path, {{"h", from_vector(h)}, {"b", from_vector(b)}}).ok());
  // The header names the formats as Python's safetensors does.
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(bytes.find("\"dtype\":\"F16\"") != std::string::npos);
  CHECK(bytes.find("\"dtype\":\"BF16\"") != std::string::npos);
  absl::StatusOr<nn::SafetensorsContents> got = nn::load_safetensors(path, device);
  REQUIRE(got.ok());
  REQUIRE(got->tensors.size() == 2);
  CHECK(got->tensors[0].first == "b");
  CHECK(got->tensors[0].second.dtype() == DType::kBFloat16);
  CHECK(got->tensors[1].second.dtype() == DType::kFloat16);
  const std::vector<BFloat16> b2 = got->tensors[0].second.to_vector<BFloat16>();
  const std::vector<Half> h2 = got->tensors[1].second.to_vector<Half>();
  for (size_t i = 0; i < patterns.size(); ++i) {
    CHECK(b2[i].bits == patterns[i]);
    CHECK(h2[i].bits == patterns[i]);
  }
  // Printing shows the values and the dtype.
  const std::string printed = got->tensors[1].second.str();
  CHECK(printed.find("65504") != std::string::npos);
  CHECK(printed.find("float16") != std::string::npos);
  CHECK(dtype_from_name("half") == DType::kFloat16);
  CHECK(dtype_from_name("bfloat16") == DType::kBFloat16);
}

TEST_CASE("saving is atomic and refuses bad names", "[nn][checkpoint]") {
  const std::string path = tmp_path("atomic.safetensors");
  REQUIRE(nn::save_safetensors(path, {{"x", from_vector<float>({1, 2})}}).ok());
  const std::string before = read_bytes(path);
  absl::Status st = nn::save_safetensors(path, {{"x", ones({2})}, {"x", ones({2})}});
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(st.message()), Catch::Contains("'x' appears twice"));
  st = nn::save_safetensors(path, {{"__metadata__", ones({2})}});
  CHECK_THAT(std::string(st.message()), Catch::Contains("not allowed"));
  st = nn::save_safetensors(path, {{"y", Tensor()}});
  CHECK_THAT(std::string(st.message()), Catch::Contains("undefined"));
  CHECK(read_bytes(path) == before);
  st = nn::save_safetensors(tmp_path("no/such/dir/f.safetensors"), {{"x", ones({1})}});
  CHECK(st.code() == absl::StatusCode::kNotFound);
  // No temporary file is left beside the target.
  REQUIRE(nn::save_safetensors(path, {{"x", ones({3})}}).ok());
  DIR* dir = opendir(tmp_path("").c_str());
  REQUIRE(dir != nullptr);
  while (const dirent* e = readdir(dir)) CHECK(std::strstr(e->d_name, ".tmp.") == nullptr);
  closedir(dir);
  CHECK(nn::load_safetensors(path)->tensors[0].second.sizes() == Shape{3});
  CHECK(nn::load_safetensors(tmp_path("missing.safetensors")).status().code() ==
        absl::StatusCode::kNotFound);
}

// A file's header and data buffer, to corrupt and put back together.
struct Parts {
  json header;
  std::string data;
};
Parts split(const std::string& bytes) {
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  return {json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
}
std::string join(std::string header, const std::string& data) {
  while ((8 + header.size()) % 8 != 0) header += ' ';
  const uint64_t n = header.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + header + data;
}
std::string join(const Parts& p) { return join(p.header.dump(), p.data); }
std::string with_length(std::string bytes, uint64_t n) {
  std::memcpy(&bytes[0], &n, 8);
  return bytes;
}

TEST_CASE("corrupted and mismatched checkpoints are refused, changing nothing",
          "[nn][checkpoint]") {
  const Device cpu("cpu");
  const Batch b = make_batch(cpu);
  auto source = make_model(1, cpu);
  nn::Adam source_opt(source->parameters(), nn::AdamOptions(0.01));
  train(*source, source_opt, b, 2);
  const std::string good_path = tmp_path("good.safetensors");
  REQUIRE(nn::save_checkpoint(good_path, *source, &source_opt).ok());
  const std::string good = read_bytes(good_path);
  const Parts parts = split(good);
  // The entries at the start and at the end of the data buffer.
  std::string first, last;
  uint64_t last_begin = 0;
  for (const auto& [name, e] : parts.header.items()) {
    if (name == "__metadata__") continue;
    if (e["data_offsets"][0] == 0) first = name;
    if (e["data_offsets"][0] >= last_begin) last_begin = e["data_offsets"][0], last = name;
  }
  const uint64_t buffer = parts.data.size();
  const nn::SafetensorsContents contents = *nn::load_safetensors(good_path);

  auto target = make_model(9, cpu);
  nn::Adam opt(target->parameters(), nn::AdamOptions(0.2));
  train(*target, opt, b, 1);
  const std::vector<std::string> before = snapshot(*target, opt);
  const std::string path = tmp_path("bad.safetensors");
  auto refused = [&](const std::string& bytes, const std::string& problem) {
    INFO(problem);
    write_bytes(path, bytes);
    absl::StatusOr<nn::Metadata> got = nn::load_checkpoint(path, *target, &opt);
    REQUIRE_FALSE(got.ok());
    CHECK_THAT(std::string(got.status().message()), Catch::Contains(problem));
    CHECK_THAT(std::string(got.status().message()), Catch::Contains(path));
    CHECK(snapshot(*target, opt) == before);
  };
  // A file that only differs from the good one in its tensors or metadata.
  auto refused_state = [&](const std::function<void(nn::SafetensorsContents&)>& edit,
                           const std::string& problem) {
    nn::SafetensorsContents c = contents;
    edit(c);
    REQUIRE(nn::save_safetensors(path, c.tensors, c.metadata).ok());
    refused(read_bytes(path), problem);
  };
  auto edited = [&](const std::function<void(Parts&)>& edit) {
    Parts p = parts;
    edit(p);
    return join(p);
  };
  auto find = [](nn::SafetensorsContents& c, const std::string& name) -> Tensor& {
    for (auto& [n, t] : c.tensors) if (n == name) return t;
    FAIL("no tensor " << name);
    throw;
  };

  refused(good.substr(0, good.size() - 4), "run past the end of the");
  refused(good.substr(0, 8 + 10), "(truncated header)");
  refused(good.substr(0, 5), "fewer than the 8-byte header length");
  refused(with_length(good, uint64_t{1} << 40), "is absurd");
  refused(with_length(good, good.size()), "runs past the end of the");
  refused(join("{\"a\": [1,", parts.data), "not valid JSON");
  refused(join("[1, 2, 3]", parts.data), "must be a JSON object, found a array");
  refused(join(" " + parts.header.dump(), parts.data), "must start with '{'");
  refused(join("{\"" + first + "\":{\"dtype\":\"I64\",\"shape\":[7],\"data_offsets\":[0,56]}," +
                   parts.header.dump().substr(1),
               parts.data),
          "key '" + first + "' appears twice in the header");
  refused(edited([&](Parts& p) { p.header[first] = 5; }), "expected an object");
  refused(edited([&](Parts& p) { p.header[first].erase("data_offsets"); }),
          "tensor '" + first + "': missing 'data_offsets'");
  refused(edited([&](Parts& p) { p.header[first].erase("shape"); }), "missing 'shape'");
  refused(edited([&](Parts& p) { p.header[first].erase("dtype"); }), "missing 'dtype'");
  refused(edited([&](Parts& p) { p.header[first]["dtype"] = "F33"; }), "unknown dtype 'F33'");
  refused(edited([&](Parts& p) { p.header[first]["dtype"] = "I32"; }), "I32 is not supported");
  refused(edited([&](Parts& p) { p.header[first]["shape"] = {-1}; }), "non-negative integers");
  refused(edited([&](Parts& p) { p.header[first]["shape"] = {2, 3}; }), "bytes but");
  refused(edited([&](Parts& p) { p.header[first]["data_offsets"] = {-4, 0}; }),
          "must be [begin, end]");
  refused(edited([&](Parts& p) {
            const uint64_t size = p.header[last]["data_offsets"][1].get<uint64_t>() - last_begin;
            p.header[last]["data_offsets"] = {buffer, buffer + size};
          }),
          "tensor '" + last + "': data_offsets");
  refused(edited([&](Parts& p) {
            const uint64_t size = p.header[last]["data_offsets"][1].get<uint64_t>() - last_begin;
            p.header[last]["data_offsets"] = {0, size};
          }),
          "overlap");
  refused(edited([&](Parts& p) {
            const uint64_t end = p.header[last]["data_offsets"][1];
            p.header[last]["data_offsets"] = {last_begin + 8, end + 8};
            p.data.insert(last_begin, 8, '\0');
          }),
          "a hole before tensor '" + last + "'");
  refused(edited([&](Parts& p) { p.data += std::string(8, '\0'); }),
          "at the end of the data buffer belong to no tensor");
  refused(edited([&](Parts& p) { p.header["__metadata__"]["x"] = 1; }),
          "__metadata__ 'x' must be a string");

  // Well-formed files that do not fit the model or the optimiser.
  refused_state([&](auto& c) { find(c, "4.weight") = zeros({4, 47}); },
                "key '4.weight': the model expects float32[4, 48] on cpu but the file holds "
                "F32[4, 47]");
  refused_state([&](auto& c) { find(c, "4.bias") = zeros({4}, TensorOptions().dtype(DType::kFloat64)); },
                "key '4.bias': the model expects float32[4] on cpu but the file holds F64[4]");
  refused_state([&](auto& c) { c.tensors.erase(c.tensors.begin()); }, "is missing from the file");
  refused_state([&](auto& c) { c.tensors.emplace_back("extra", ones({1})); },
                "unexpected key 'extra' (F32[1])");
  refused_state([&](auto& c) { c.tensors.emplace_back("optimizer.99.exp_avg", ones({1})); },
                "key 'optimizer.99.exp_avg' names no parameter");
  refused_state([&](auto& c) { find(c, "optimizer.0.exp_avg") = zeros({1}); },
                "optimizer state of parameter 0 must be float32[3, 2, 3, 3]");
  refused_state([&](auto& c) { c.metadata["optimizer.lr"] = "fast"; }, "is 'fast', not a number");
  refused_state([&](auto& c) { c.metadata["optimizer.lr"] = "-1"; }, "must be finite and >= 0");
  refused_state([&](auto& c) { c.metadata.erase("optimizer.lr"); }, "holds no optimizer state");

  // The good file does change both (so the snapshots above would have seen a change).
  REQUIRE(nn::load_checkpoint(good_path, *target, &opt).ok());
  CHECK(snapshot(*target, opt) == snapshot(*source, source_opt));
}

TEST_CASE("load_safetensors refuses BOOL bytes other than 0 and 1", "[nn][checkpoint]") {
  std::string bytes = python_file();
  bytes.back() = 2;
  const std::string path = tmp_path("bad_bool.safetensors");
  write_bytes(path, bytes);
  absl::StatusOr<nn::SafetensorsContents> got = nn::load_safetensors(path);
  REQUIRE_FALSE(got.ok());
  CHECK(got.status().code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(got.status().message()),
             Catch::Contains("tensor 'd': element 2 of a BOOL tensor is 2, not 0 or 1"));
}

}  // namespace
}  // namespace streamgrad
