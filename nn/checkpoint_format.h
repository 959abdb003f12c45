// Internal to nn/checkpoint.cc: the safetensors file format itself — reading and
// validating a whole file into entries over its bytes, turning an entry into a tensor,
// and writing a file atomically. See nn/checkpoint.h for the format and the guarantees.
// checkpoint_format_read.cc reads, checkpoint_format_write.cc writes, and
// checkpoint_format.cc holds what both use (messages, dtype codes, errors).
//
// Thread-safety: reentrant. Failure: read_safetensors and write_safetensors throw
// (nn/checkpoint.h says which type for what) with messages that start with
// "<op> '<path>': "; make_tensor throws streamgrad::Error (device errors, out of memory)
// without that prefix, which rethrow_with_context adds.
#ifndef STREAMGRAD_NN_CHECKPOINT_FORMAT_H_
#define STREAMGRAD_NN_CHECKPOINT_FORMAT_H_

#include <cstdint>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "engine/tensor.h"

// The format is little-endian; tensors are copied byte for byte.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "nn/checkpoint assumes a little-endian host");

namespace streamgrad {
namespace nn {
namespace checkpoint_internal {

// Python's safetensors refuses headers above 100 MB; so do we.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// One tensor of a file: where its bytes lie in the data buffer.
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;  // relative to the start of the data buffer
};

struct ParsedFile {
  std::string bytes;       // the whole file
  uint64_t data_start = 0; // 8 + header length
  std::map<std::string, Entry> entries;
  std::map<std::string, std::string> metadata;
};

// "<op> '<path>': " — how every message of these functions starts.
std::string where(const char* op, const std::string& path);
// "F32", "F64", "I64", "BOOL".
const char* dtype_code(DType dtype);
// "F32[2, 3]": an entry as the messages show it.
std::string describe(const Entry& entry);

// Reads `path` whole and validates the header, every entry and the offsets (they must
// tile the data buffer exactly) and the values of BOOL tensors. Throws IOError (cannot
// read it; malformed bytes), ValueError (a dtype streamgrad lacks), OutOfMemoryError.
ParsedFile read_safetensors(const char* op, const std::string& path);
// The entry's tensor, created on `device`. Throws on device errors or out of memory.
Tensor make_tensor(const ParsedFile& file, const Entry& entry, Device device);

// Writes tensors (names unique and valid, tensors defined: the caller checked) and
// metadata to `path` through a temporary file and a rename. Throws IOError (cannot
// write; `path` is then as it was) or what copying a tensor to the host threw.
void write_safetensors(const char* op, const std::string& path,
                               const std::vector<std::pair<std::string, Tensor>>& tensors,
                               const std::map<std::string, std::string>& metadata);

// A failed system call: throws IOError(message + strerror(err), err).
[[noreturn]] void io_failed(int err, const std::string& message);

// Rethrows an exception of make_tensor or of the module/optimiser APIs with "<op>
// '<path>': " before its message: a streamgrad::Error keeps its type and fields,
// std::bad_alloc becomes OutOfMemoryError, anything else Error.
[[noreturn]] void rethrow_with_context(const char* op, const std::string& path,
                                       const std::exception& e);

}  // namespace checkpoint_internal
}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_CHECKPOINT_FORMAT_H_
