// What reading and writing a safetensors file share (nn/checkpoint_format.h): how
// messages start, the dtype codes, and the two ways a failure becomes an exception.
// Reading is in checkpoint_format_read.cc, writing in checkpoint_format_write.cc.
#include "nn/checkpoint_format.h"

#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace nn {
namespace checkpoint_internal {

std::string where(const char* op, const std::string& path) {
  return absl::StrCat(op, " '", path, "': ");
}

const char* dtype_code(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "F32";
    case DType::kFloat64: return "F64";
    case DType::kInt64: return "I64";
    case DType::kBool: return "BOOL";
    case DType::kFloat16: return "F16";
    case DType::kBFloat16: return "BF16";
  }
  return "?";
}

std::string describe(const Entry& entry) {
  return absl::StrCat(dtype_code(entry.dtype), "[", absl::StrJoin(entry.shape, ", "), "]");
}

void io_failed(int err, const std::string& message) {
  throw IOError(absl::StrCat(message, std::strerror(err)), err);
}

void rethrow_with_context(const char* op, const std::string& path, const std::exception& e) {
  const std::string message = absl::StrCat(where(op, path), e.what());
  if (const auto* error = dynamic_cast<const Error*>(&e)) error->rethrower()(message);
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) {
    throw OutOfMemoryError(absl::StrCat(message, " (out of host memory)"), 0, 0, 0);
  }
  throw Error(message);
}

}  // namespace checkpoint_internal
}  // namespace nn
}  // namespace streamgrad
