#include "nn/data/dataset.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "nn/data/idx.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace nn {

void Dataset::get(int64_t, float*, int64_t*) const {
  throw ValueError(absl::StrCat("Dataset::get: this data set holds ", dtype_name(data_dtype()),
                                " data; read its examples with get_example()"));
}

ImageDataset::ImageDataset(std::vector<uint8_t> pixels, std::vector<int64_t> labels,
                           int64_t height, int64_t width, float mean, float std)
    : pixels_(std::move(pixels)), labels_(std::move(labels)), height_(height), width_(width) {
  SG_CHECK(height > 0 && width > 0 && std > 0 &&
               pixels_.size() == labels_.size() * static_cast<size_t>(height * width),
           ValueError, "ImageDataset: ", pixels_.size(), " pixels do not make ", labels_.size(),
           " images of ", height, "x", width, " (std ", std, " must be positive)");
  for (int v = 0; v < 256; ++v) lut_[v] = (v / 255.0f - mean) / std;
}

void ImageDataset::get(int64_t i, float* data, int64_t* target) const {
  SG_CHECK(i >= 0 && i < size(), ValueError, "ImageDataset: example ", i, " is outside [0, ",
           size(), ")");
  const uint8_t* p = pixels_.data() + i * height_ * width_;
  for (int64_t k = 0; k < height_ * width_; ++k) data[k] = lut_[p[k]];
  *target = labels_[i];
}

namespace {

// Where Debian's dataset-fashion-mnist package installs the files.
constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// Rethrows `e` (from read_idx) with "<op>: " before its message, keeping its type and fields.
[[noreturn]] void rethrow_from(const char* op, const Error& e) {
  e.rethrower()(absl::StrCat(op, ": ", e.what()));
  throw;  // not reached: the rethrower throws
}

// Files that are valid IDX but do not make a data set together: an IOError without errno.
[[noreturn]] void mismatched(const char* op, const std::string& what) {
  throw IOError(absl::StrCat(op, ": ", what));
}

std::shared_ptr<ImageDataset> load_images(const char* op, const std::string& images,
                                          const std::string& labels, float mean, float std,
                                          int64_t max_examples) {
  SG_CHECK(max_examples >= 0, ValueError, op, ": max_examples is ", max_examples,
           "; pass 0 to load every example or N > 0 for the first N");
  IdxArray x, y;
  try {
    x = read_idx(images, max_examples);
    y = read_idx(labels, max_examples);
  } catch (const Error& e) {
    rethrow_from(op, e);
  }
  if (x.dims.size() != 3) {
    mismatched(op, absl::StrCat("'", images, "' has ", x.dims.size(),
                                " dimensions, expected 3 (count, height, width); pass an "
                                "images file (*-images-idx3-ubyte[.gz]) first"));
  }
  if (y.dims.size() != 1) {
    mismatched(op, absl::StrCat("'", labels, "' has ", y.dims.size(),
                                " dimensions, expected 1 (one label per image); pass a "
                                "labels file (*-labels-idx1-ubyte[.gz]) second"));
  }
  if (y.file_items != x.file_items) {
    mismatched(op, absl::StrCat("'", labels, "' holds ", y.file_items, " labels but '", images,
                                "' holds ", x.file_items, " images; they must match: pass the "
                                "labels of the same set (train with train, t10k with t10k)"));
  }
  std::vector<int64_t> l(y.data.begin(), y.data.end());
  return std::make_shared<ImageDataset>(std::move(x.data), std::move(l), x.dims[1], x.dims[2],
                                        mean, std);
}

// errno of opening `path` for reading, 0 when it opens.
int open_error(const std::string& path) {
  errno = 0;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return errno != 0 ? errno : ENOENT;
  std::fclose(f);
  return 0;
}

// `base`.gz as Debian ships the files, or `base` when they were unpacked; throws IOError
// naming both and saying how to get Fashion-MNIST when neither opens.
std::string fashion_mnist_file(const char* op, const std::string& dir, const std::string& base) {
  const std::string gz = base + ".gz";
  const int gz_error = open_error(gz);
  if (gz_error == 0) return gz;
  const int plain_error = open_error(base);
  if (plain_error == 0) return base;
  const bool missing = gz_error == ENOENT || gz_error == ENOTDIR;
  throw IOError(
      absl::StrCat(
          op, ": cannot open the file '", gz, "' (nor '", base, "'): ", std::strerror(gz_error),
          missing ? absl::StrCat("; Fashion-MNIST is not in '", dir,
                                 "': run tools/bootstrap.sh (it installs Debian's "
                                 "dataset-fashion-mnist package into ",
                                 kFashionMnistDir, "), or pass the folder that holds "
                                 "{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]")
                  : "; check the files' permissions"),
      gz_error);
}

}  // namespace

std::shared_ptr<ImageDataset> load_idx_images(const std::string& images,
                                              const std::string& labels, float mean, float std,
                                              int64_t max_examples) {
  return load_images("load_idx_images", images, labels, mean, std, max_examples);
}

std::shared_ptr<ImageDataset> load_fashion_mnist(const std::string& dir, bool train,
                                                 bool normalize, int64_t max_examples) {
  const char* op = "load_fashion_mnist";
  const std::string prefix = absl::StrCat(dir, "/", train ? "train" : "t10k");
  const std::string images = fashion_mnist_file(op, dir, prefix + "-images-idx3-ubyte");
  const std::string labels = fashion_mnist_file(op, dir, prefix + "-labels-idx1-ubyte");
  return load_images(op, images, labels, normalize ? 0.2860f : 0.0f, normalize ? 0.3530f : 1.0f,
                     max_examples);
}

}  // namespace nn
}  // namespace streamgrad
