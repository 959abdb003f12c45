#include "nn/data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace nn {
namespace {

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// What to do about bytes that are not a valid IDX file, appended to every such message.
constexpr const char* kDamaged =
    "; the file is damaged, incomplete or not an IDX file: download or install it again";

std::string where(const std::string& path) { return absl::StrCat("read_idx '", path, "': "); }

// Bytes that are not a valid IDX file: an IOError without errno.
[[noreturn]] void malformed(const std::string& path, const std::string& what) {
  throw IOError(absl::StrCat(where(path), what, kDamaged));
}

// One IDX file being read, gzip-compressed or plain (zlib reads both).
class IdxFile {
 public:
  explicit IdxFile(const std::string& path) : path_(path) {
    errno = 0;
    file_.reset(gzopen(path.c_str(), "rb"));
    if (file_ == nullptr) {
      const int err = errno;
      throw IOError(absl::StrCat(where(path), "cannot open the file: ",
                                 err != 0 ? std::strerror(err) : "out of memory",
                                 "; check the path and the file's permissions"),
                    err);
    }
  }

  // Reads up to n bytes: exactly n unless the data ends first. Throws when reading
  // fails rather than ends: a system error, or gzip data that does not decompress.
  int64_t read(uint8_t* out, int64_t n) {
    int64_t done = 0;
    while (done < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<int64_t>(n - done, 1 << 30));
      const int got = gzread(file_.get(), out + done, chunk);
      if (got < 0) fail(errno);
      if (got == 0) break;
      done += got;
    }
    return done;
  }

  // Throws if the gzip stream reported an error, the end of a truncated stream included
  // (zlib reports that only once every byte before it was read).
  void check_stream_end() {
    int code = Z_OK;
    const char* what = gzerror(file_.get(), &code);
    if (code != Z_OK && code != Z_STREAM_END) {
      malformed(path_, absl::StrCat("corrupt gzip data (", what, ")"));
    }
  }

 private:
  [[noreturn]] void fail(int err) {
    int code = Z_OK;
    const char* what = gzerror(file_.get(), &code);
    if (code == Z_ERRNO) {
      throw IOError(absl::StrCat(where(path_), "read failed: ", std::strerror(err),
                                 "; check that the path is a readable file"),
                    err);
    }
    if (code == Z_MEM_ERROR) {
      throw OutOfMemoryError(absl::StrCat(where(path_), "out of host memory while decompressing"),
                             0, 0, 0);
    }
    malformed(path_, absl::StrCat("corrupt gzip data (", what, ")"));
  }

  std::string path_;
  GzFile file_;
};

// Element types the IDX format defines besides unsigned bytes (0x08).
const char* other_idx_type(uint8_t code) {
  switch (code) {
    case 0x09: return "signed bytes";
    case 0x0B: return "16-bit integers";
    case 0x0C: return "32-bit integers";
    case 0x0D: return "32-bit floats";
    case 0x0E: return "64-bit floats";
    default: return nullptr;
  }
}

}  // namespace

IdxArray read_idx(const std::string& path, int64_t max_items) {
  if (max_items < 0) {
    throw ValueError(absl::StrCat(where(path), "max_items is ", max_items,
                                  "; pass 0 to read every item or N > 0 for the first N"));
  }
  IdxFile f(path);
  uint8_t magic[4];
  if (f.read(magic, 4) != 4) malformed(path, "shorter than the 4-byte IDX magic number");
  if (magic[0] != 0 || magic[1] != 0) {
    malformed(path, absl::StrFormat("not an IDX file (magic starts %02x %02x, expected 00 00)",
                                    magic[0], magic[1]));
  }
  if (magic[2] != 0x08) {
    const char* other = other_idx_type(magic[2]);
    if (other == nullptr) {
      malformed(path, absl::StrFormat("not an IDX file (element type 0x%02x is none the "
                                      "format defines)", magic[2]));
    }
    throw ValueError(absl::StrFormat(
        "%sIDX element type 0x%02x (%s) is not supported (only unsigned bytes, 0x08, as "
        "MNIST and Fashion-MNIST use); convert the file to unsigned bytes",
        where(path), magic[2], other));
  }
  const int rank = magic[3];
  if (rank < 1 || rank > 4) malformed(path, absl::StrCat("IDX rank ", rank, " is not 1..4"));
  IdxArray out;
  int64_t total = 1;
  for (int d = 0; d < rank; ++d) {
    uint8_t b[4];
    if (f.read(b, 4) != 4) {
      malformed(path, absl::StrCat("truncated in the size of dimension ", d));
    }
    const int64_t size = (int64_t{b[0]} << 24) | (b[1] << 16) | (b[2] << 8) | b[3];
    if (size != 0 && total > std::numeric_limits<int32_t>::max() / size) {
      malformed(path, absl::StrCat("the dimensions' product overflows (dimension ", d, " is ",
                                   size, ")"));
    }
    total *= size;
    out.dims.push_back(size);
  }
  out.file_items = out.dims[0];
  // Read no further than the items asked for: the rest is neither decompressed nor checked.
  const bool whole = max_items == 0 || max_items >= out.file_items;
  if (!whole) {
    total = total / out.file_items * max_items;
    out.dims[0] = max_items;
  }
  try {
    out.data.resize(total);
  } catch (const std::bad_alloc&) {
    throw OutOfMemoryError(absl::StrCat(where(path), "no host memory for the ", total,
                                        " bytes of data its dimensions describe"),
                           static_cast<size_t>(total), 0, 0);
  }
  const int64_t got = f.read(out.data.data(), total);
  if (got != total) {
    malformed(path, absl::StrCat("truncated: ",
                                 whole ? std::string("the dimensions need ")
                                       : absl::StrCat("the first ", max_items, " items need "),
                                 total, " bytes of data but the file has ", got));
  }
  if (!whole) return out;
  uint8_t extra;
  if (f.read(&extra, 1) != 0) {
    malformed(path, absl::StrCat("trailing bytes after the ", total,
                                 " bytes the dimensions describe"));
  }
  f.check_stream_end();
  return out;
}

}  // namespace nn
}  // namespace streamgrad
