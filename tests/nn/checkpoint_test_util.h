// Helpers shared by tests/nn/checkpoint_test.cc and checkpoint_errors_test.cc: a small
// conv model and its batch, training steps, every bit of a model's and an optimiser's
// state, and the bytes of a file as Python's safetensors writes it.
#ifndef STREAMGRAD_TESTS_NN_CHECKPOINT_TEST_UTIL_H_
#define STREAMGRAD_TESTS_NN_CHECKPOINT_TEST_UTIL_H_

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "engine/factories.h"
#include "nn/checkpoint.h"
#include "nn/layers.h"
#include "nn/optim.h"
#include "ops/ops.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace checkpoint_testing {

inline std::string tmp_path(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// The tensor's elements as little-endian bytes, read back independently of nn/checkpoint.
inline std::string raw(const Tensor& t) {
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
    case DType::kFloat16: put(t.to_vector<Half>()); break;
    case DType::kBFloat16: put(t.to_vector<BFloat16>()); break;
  }
  return out;
}

inline std::shared_ptr<nn::Sequential> make_model(uint64_t seed, Device device) {
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
inline Batch make_batch(Device device) {
  manual_seed(7);
  return {to(randn({4, 2, 6, 6}), device), to(randn({4, 4}), device)};
}

inline void train(nn::Module& m, nn::Optimizer& opt, const Batch& b, int steps) {
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    mse_loss(m.forward(b.x), b.y).backward();
    opt.step();
  }
}

// Every bit of the model's state and the optimiser's.
inline std::vector<std::string> snapshot(const nn::Module& m, const nn::Optimizer& opt) {
  std::vector<std::string> out;
  for (const auto& [name, t] : m.state_dict()) out.push_back(name + "=" + raw(t));
  const nn::OptimizerState s = opt.state_dict();
  for (const auto& [name, t] : s.tensors) out.push_back("opt." + name + "=" + raw(t));
  for (const auto& [name, v] : s.scalars) out.push_back(absl::StrFormat("opt.%s=%.17g", name, v));
  return out;
}

// A file as Python writes it: safetensors.torch.save_file({"a": float64 [2], "b": int64
// scalar, "c": float32 [2, 2], "d": bool [3]}, metadata={"format": "pt"}).
inline std::string python_file() {
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

}  // namespace checkpoint_testing
}  // namespace streamgrad

#endif  // STREAMGRAD_TESTS_NN_CHECKPOINT_TEST_UTIL_H_
