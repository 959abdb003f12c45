// Reading IDX files, the format of MNIST and Fashion-MNIST (gzip-compressed or plain):
// a 4-byte magic (0, 0, type code, rank), rank big-endian uint32 dimensions, then the
// elements in row-major order. Only unsigned bytes (type 0x08), which these data sets
// use, are supported.
//
//   IdxArray images = read_idx("train-images-idx3-ubyte.gz");  // images.dims == {60000, 28, 28}
//   IdxArray first = read_idx("train-images-idx3-ubyte.gz", 256);  // first.dims == {256, 28, 28}
//
// With max_items > 0 only the first max_items along dimension 0 are read (a run on a few
// hundred examples then neither decompresses nor allocates the whole set); the bytes after
// them are not read, so damage there (a truncated tail, trailing bytes, a bad gzip
// trailer) is not seen.
//
// Thread-safety: reentrant. Failure: throws, with a message that starts
// "read_idx '<path>': " and says what is wrong and what to do:
//   IOError with error_number() = errno   the file cannot be opened or read (ENOENT: missing);
//   IOError with error_number() = 0       its bytes are not a valid IDX file: bad magic, an
//       element type the format does not define, rank 0 or above 4, dimensions whose
//       product overflows, fewer bytes than the dimensions need (truncated), trailing
//       bytes, corrupt gzip data;
//   ValueError   an element type the format defines but streamgrad does not read (0x09 to
//       0x0E: signed bytes, shorts, ints, floats, doubles); a negative max_items;
//   OutOfMemoryError   no host memory for the elements.
#ifndef STREAMGRAD_NN_DATA_IDX_H_
#define STREAMGRAD_NN_DATA_IDX_H_

#include <cstdint>
#include <string>
#include <vector>

namespace streamgrad {
namespace nn {

struct IdxArray {
  std::vector<int64_t> dims;  // dims[0] is the number of items read
  std::vector<uint8_t> data;  // row-major, product(dims) bytes
  int64_t file_items = 0;     // dimension 0 as the file states it
};

// max_items: 0 reads every item, N > 0 at most the first N.
IdxArray read_idx(const std::string& path, int64_t max_items = 0);

}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_DATA_IDX_H_
