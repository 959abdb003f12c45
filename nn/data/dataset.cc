#include "nn/data/dataset.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "nn/data/idx.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace nn {

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

absl::StatusOr<std::shared_ptr<ImageDataset>> load_idx_images(const std::string& images,
                                                              const std::string& labels,
                                                              float mean, float std) {
  absl::StatusOr<IdxArray> x = read_idx(images);
  if (!x.ok()) return x.status();
  absl::StatusOr<IdxArray> y = read_idx(labels);
  if (!y.ok()) return y.status();
  if (x->dims.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(images, ": expected 3 dimensions (count, height, width), got ", x->dims.size()));
  }
  if (y->dims.size() != 1 || y->dims[0] != x->dims[0]) {
    return absl::InvalidArgumentError(absl::StrCat(labels, ": holds ", y->dims[0],
                                                   " labels but ", images, " holds ", x->dims[0],
                                                   " images; they must match"));
  }
  std::vector<int64_t> l(y->data.begin(), y->data.end());
  return std::make_shared<ImageDataset>(std::move(x->data), std::move(l), x->dims[1], x->dims[2],
                                        mean, std);
}

absl::StatusOr<std::shared_ptr<ImageDataset>> load_fashion_mnist(const std::string& dir, bool train,
                                                                 bool normalize) {
  const std::string prefix = absl::StrCat(dir, "/", train ? "train" : "t10k");
  // The .gz files as Debian ships them, or plain ones when they were unpacked.
  auto pick = [](const std::string& base) {
    return std::ifstream(base + ".gz").good() ? base + ".gz" : base;
  };
  return load_idx_images(pick(prefix + "-images-idx3-ubyte"), pick(prefix + "-labels-idx1-ubyte"),
                         normalize ? 0.2860f : 0.0f, normalize ? 0.3530f : 1.0f);
}

}  // namespace nn
}  // namespace streamgrad
