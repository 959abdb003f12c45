// Reading IDX files, the format of MNIST and Fashion-MNIST (gzip-compressed or plain):
// a 4-byte magic (0, 0, type code, rank), rank big-endian uint32 dimensions, then the
// elements in row-major order. Only unsigned bytes (type 0x08), which these data sets
// use, are supported.
//
//   absl::StatusOr<IdxArray> images = read_idx("train-images-idx3-ubyte.gz");
//   if (!images.ok()) ... images->dims == {60000, 28, 28}
//
// Thread-safety: reentrant. Failure: a Status naming the file and the problem: missing
// or unreadable file, bad magic, unsupported type, rank 0 or above 4, dimensions whose
// product overflows, fewer bytes than the dimensions need (truncated), trailing bytes.
#ifndef STREAMGRAD_NN_DATA_IDX_H_
#define STREAMGRAD_NN_DATA_IDX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace streamgrad {
namespace nn {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // row-major, product(dims) bytes
};

absl::StatusOr<IdxArray> read_idx(const std::string& path);

}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_DATA_IDX_H_
