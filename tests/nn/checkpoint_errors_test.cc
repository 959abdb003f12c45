// nn/checkpoint's failures: every kind of corrupted or mismatched file is refused with an
// exception (IOError for bad bytes, ValueError for a file that does not fit) naming the
// function, the file and the problem, and leaves the model and the optimiser untouched
// (PyTorch's load_state_dict(strict=True) semantics, all-or-nothing; torch::load throws).
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>
#include <functional>

#include "tests/nn/checkpoint_test_util.h"
#include <nlohmann/json.hpp>

namespace streamgrad {
namespace {

using json = nlohmann::json;
using namespace checkpoint_testing;  // NOLINT: the tests' shared helpers

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
  nn::save_checkpoint(good_path, *source, &source_opt);
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
  const nn::SafetensorsContents contents = nn::load_safetensors(good_path);

  auto target = make_model(9, cpu);
  nn::Adam opt(target->parameters(), nn::AdamOptions(0.2));
  train(*target, opt, b, 1);
  const std::vector<std::string> before = snapshot(*target, opt);
  const std::string path = tmp_path("bad.safetensors");
  // Malformed bytes are IOErrors without errno; files that do not fit, ValueErrors.
  auto refused_as = [&](const std::string& bytes, const std::string& problem, bool io) {
    INFO(problem);
    write_bytes(path, bytes);
    try {
      nn::load_checkpoint(path, *target, &opt);
      FAIL("load_checkpoint did not throw");
    } catch (const IOError& e) {
      CHECK(io);
      CHECK(e.error_number() == 0);
      CHECK_THAT(e.what(), Catch::Contains(problem) && Catch::Contains("load_checkpoint '" + path));
    } catch (const ValueError& e) {
      CHECK_FALSE(io);
      CHECK_THAT(e.what(), Catch::Contains(problem) && Catch::Contains("load_checkpoint '" + path));
    }
    CHECK(snapshot(*target, opt) == before);
  };
  auto refused = [&](const std::string& bytes, const std::string& problem) {
    refused_as(bytes, problem, /*io=*/true);
  };
  // A file that only differs from the good one in its tensors or metadata.
  auto refused_state = [&](const std::function<void(nn::SafetensorsContents&)>& edit,
                           const std::string& problem) {
    nn::SafetensorsContents c = contents;
    edit(c);
    nn::save_safetensors(path, c.tensors, c.metadata);
    refused_as(read_bytes(path), problem, /*io=*/false);
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
  refused_as(edited([&](Parts& p) { p.header[first]["dtype"] = "I32"; }), "I32 is not supported",
             /*io=*/false);
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
  nn::load_checkpoint(good_path, *target, &opt);
  CHECK(snapshot(*target, opt) == snapshot(*source, source_opt));
}

TEST_CASE("load_safetensors refuses BOOL bytes other than 0 and 1", "[nn][checkpoint]") {
  std::string bytes = python_file();
  bytes.back() = 2;
  const std::string path = tmp_path("bad_bool.safetensors");
  write_bytes(path, bytes);
  CHECK_THROWS_AS(nn::load_safetensors(path), IOError);
  CHECK_THROWS_WITH(nn::load_safetensors(path),
                    Catch::Contains("tensor 'd': element 2 of a BOOL tensor is 2, not 0 or 1"));
}


TEST_CASE("loading another model's checkpoint throws and leaves the model as it was",
          "[nn][checkpoint]") {
  const Device device = GENERATE(Device("cpu"), Device("sim:0"));
  manual_seed(3);
  auto mlp = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(8, 4), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(4, 2)});
  mlp->to(device);
  nn::SGD mlp_opt(mlp->parameters(), nn::SGDOptions(0.1));
  const std::string path = tmp_path("mlp.safetensors");
  nn::save_checkpoint(path, *mlp, &mlp_opt, {{"model", "mlp"}});

  auto conv = make_model(4, device);
  nn::Adam opt(conv->parameters(), nn::AdamOptions(0.01));
  train(*conv, opt, make_batch(device), 1);
  const std::vector<std::string> before = snapshot(*conv, opt);
  for (nn::Optimizer* o : {static_cast<nn::Optimizer*>(&opt), static_cast<nn::Optimizer*>(nullptr)}) {
    CHECK_THROWS_AS(nn::load_checkpoint(path, *conv, o), ValueError);
    CHECK_THROWS_WITH(nn::load_checkpoint(path, *conv, o),
                      Catch::Contains("load_checkpoint '" + path + "': key '0.weight': the "
                                      "model expects float32[3, 2, 3, 3] on " + device.str() +
                                      " but the file holds F32[4, 8]"));
    CHECK(snapshot(*conv, opt) == before);
  }
  // A streamgrad::Error like every other failure of the library: one catch serves all.
  CHECK_THROWS_AS(nn::load_checkpoint(tmp_path("no_such.safetensors"), *conv), Error);
  CHECK(snapshot(*conv, opt) == before);
}

TEST_CASE("I/O failures are IOErrors carrying errno", "[nn][checkpoint]") {
  const std::string dir = tmp_path("");
  auto m = make_model(1, Device("cpu"));
  try {
    nn::load_checkpoint(dir, *m);  // a directory: fopen succeeds, reading fails
    FAIL("loading a directory did not throw");
  } catch (const IOError& e) {
    CHECK(e.error_number() == EISDIR);
    CHECK_THAT(e.what(), Catch::Contains("load_checkpoint '" + dir + "': read failed: "));
  }
  try {
    nn::load_safetensors_metadata(tmp_path("absent.safetensors"));
    FAIL("reading a missing file's metadata did not throw");
  } catch (const IOError& e) {
    CHECK(e.error_number() == ENOENT);
    CHECK_THAT(e.what(), Catch::Contains("load_safetensors_metadata '") &&
                             Catch::Contains(std::strerror(ENOENT)));
  }
  try {
    nn::save_checkpoint(tmp_path("missing_dir/x.safetensors"), *m);
    FAIL("saving into a missing directory did not throw");
  } catch (const IOError& e) {
    CHECK(e.error_number() == ENOENT);
    CHECK_THAT(e.what(), Catch::Contains("save_checkpoint '"));
  }
  // The rethrower keeps the type and errno (how the engine re-raises errors with context).
  try {
    IOError("x", ENOSPC).rethrower()("y");
  } catch (const IOError& e) {
    CHECK(e.error_number() == ENOSPC);
    CHECK(std::string(e.what()) == "y");
  }
}

}  // namespace
}  // namespace streamgrad
