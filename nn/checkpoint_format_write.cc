// Writing a safetensors file (nn/checkpoint_format.h): tensors copied to the host, laid
// out in the reference writer's order, and written through a temporary file that is
// renamed over the target only once it is complete and on disk.
#include "nn/checkpoint_format.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/base/error.h"
#include <nlohmann/json.hpp>

namespace streamgrad {
namespace nn {
namespace checkpoint_internal {
namespace {

using json = nlohmann::json;

template <typename T>
void append_bytes(const std::vector<T>& values, std::string* out) {
  for (const T v : values) {
    const T copy = v;  // std::vector<bool> hands out proxies
    out->append(reinterpret_cast<const char*>(&copy), sizeof(T));
  }
}

// The tensor's elements, dense and row-major; to_vector reads on the device's current
// stream, so pending work on that stream is finished first.
std::string host_bytes(const Tensor& t) {
  std::string out;
  out.reserve(static_cast<size_t>(t.numel()) * element_size(t.dtype()));
  switch (t.dtype()) {
    case DType::kFloat32: append_bytes(t.to_vector<float>(), &out); break;
    case DType::kFloat64: append_bytes(t.to_vector<double>(), &out); break;
    case DType::kInt64: append_bytes(t.to_vector<int64_t>(), &out); break;
    case DType::kBool: append_bytes(t.to_vector<bool>(), &out); break;
    case DType::kFloat16: append_bytes(t.to_vector<Half>(), &out); break;
    case DType::kBFloat16: append_bytes(t.to_vector<BFloat16>(), &out); break;
  }
  return out;
}

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

void write_safetensors(const char* op, const std::string& path,
                               const std::vector<std::pair<std::string, Tensor>>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  // Python's writer order: largest elements first, then by name, so that with the data
  // start 8-byte aligned every tensor is aligned to its element size.
  std::vector<const std::pair<std::string, Tensor>*> order;
  for (const auto& nt : tensors) order.push_back(&nt);
  std::sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    const size_t sa = element_size(a->second.dtype()), sb = element_size(b->second.dtype());
    return sa != sb ? sa > sb : a->first < b->first;
  });
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<std::string> blobs;
  uint64_t offset = 0;
  try {
    for (const auto* nt : order) {
      blobs.push_back(host_bytes(nt->second));
      const uint64_t end = offset + blobs.back().size();
      header[nt->first] = {{"dtype", dtype_code(nt->second.dtype())},
                           {"shape", nt->second.sizes()},
                           {"data_offsets", json::array({offset, end})}};
      offset = end;
    }
  } catch (const std::exception& e) {
    rethrow_with_context(op, path, e);
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  const uint64_t n = text.size();
  char length[8];
  std::memcpy(length, &n, 8);

  // Same directory as `path`, so the rename cannot cross file systems.
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid(), ".", counter++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) io_failed(errno, absl::StrCat(where(op, path), "cannot create '", tmp, "': "));
  bool ok = write_all(fd, length, 8) && write_all(fd, text.data(), text.size());
  for (const std::string& b : blobs) ok = ok && write_all(fd, b.data(), b.size());
  ok = ok && ::fsync(fd) == 0;  // the data is on disk before the name points at it
  int err = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    io_failed(err, absl::StrCat(where(op, path), "writing failed: "));
  }
}

}  // namespace checkpoint_internal
}  // namespace nn
}  // namespace streamgrad
