#include "nn/data/idx.h"

#include <zlib.h>

#include <limits>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace streamgrad {
namespace nn {
namespace {

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// Reads exactly n bytes; the number read otherwise (short at the end of the data).
int64_t read_fully(gzFile f, uint8_t* out, int64_t n) {
  int64_t done = 0;
  while (done < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<int64_t>(n - done, 1 << 30));
    const int got = gzread(f, out + done, chunk);
    if (got <= 0) break;
    done += got;
  }
  return done;
}

}  // namespace

absl::StatusOr<IdxArray> read_idx(const std::string& path) {
  GzFile f(gzopen(path.c_str(), "rb"));
  if (f == nullptr) return absl::NotFoundError(absl::StrCat(path, ": cannot open the file"));
  uint8_t magic[4];
  if (read_fully(f.get(), magic, 4) != 4) {
    return absl::DataLossError(absl::StrCat(path, ": shorter than the 4-byte IDX magic number"));
  }
  if (magic[0] != 0 || magic[1] != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: not an IDX file (magic starts %02x %02x, expected 00 00)", path, magic[0], magic[1]));
  }
  if (magic[2] != 0x08) {
    return absl::UnimplementedError(absl::StrFormat(
        "%s: IDX element type 0x%02x is not supported (only unsigned bytes, 0x08)", path, magic[2]));
  }
  const int rank = magic[3];
  if (rank < 1 || rank > 4) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": IDX rank ", rank, " is not 1..4"));
  }
  IdxArray out;
  int64_t total = 1;
  for (int d = 0; d < rank; ++d) {
    uint8_t b[4];
    if (read_fully(f.get(), b, 4) != 4) {
      return absl::DataLossError(absl::StrCat(path, ": truncated in the size of dimension ", d));
    }
    const int64_t size = (int64_t{b[0]} << 24) | (b[1] << 16) | (b[2] << 8) | b[3];
    if (size != 0 && total > std::numeric_limits<int32_t>::max() / size) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": the dimensions' product overflows (dimension ", d, " is ", size, ")"));
    }
    total *= size;
    out.dims.push_back(size);
  }
  out.data.resize(total);
  const int64_t got = read_fully(f.get(), out.data.data(), total);
  if (got != total) {
    return absl::DataLossError(absl::StrCat(path, ": truncated: the dimensions need ", total,
                                            " bytes of data but the file has ", got));
  }
  uint8_t extra;
  if (read_fully(f.get(), &extra, 1) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": trailing bytes after the ", total, " bytes the dimensions describe"));
  }
  int err = Z_OK;
  gzerror(f.get(), &err);
  if (err != Z_OK && err != Z_STREAM_END) {
    return absl::DataLossError(absl::StrCat(path, ": corrupt gzip data"));
  }
  return out;
}

}  // namespace nn
}  // namespace streamgrad
