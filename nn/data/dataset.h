// Data sets for training: random access to examples written straight into a batch
// buffer (no per-example allocation), and the MNIST / Fashion-MNIST image sets.
//
//   std::shared_ptr<ImageDataset> train =
//       load_fashion_mnist("/usr/share/datasets/fashion-mnist", /*train=*/true);
//   DataLoader loader(train, DataLoaderOptions().batch_size(64));
//
// Thread-safety: get() is const and may be called from several threads at once (the
// data loader's workers). Failure: load_* throw, with a message that starts with the
// function's name and names the file, the problem and what to do: IOError for a file
// that is missing or unreadable (error_number() is errno; load_fashion_mnist then says
// how to install the data set) or whose contents are not a data set (read_idx's checks,
// images that are not [count, height, width], labels that are not one per image: the
// two files' counts must agree); ValueError for an IDX element type other than unsigned
// bytes; OutOfMemoryError.
#ifndef STREAMGRAD_NN_DATA_DATASET_H_
#define STREAMGRAD_NN_DATA_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace streamgrad {
namespace nn {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // The shape of one example's data (a batch is [B, *example_shape()] of data_dtype()).
  virtual Shape example_shape() const = 0;
  // float32 (images), or int64 (token ids: nn/data/text.h).
  virtual DType data_dtype() const { return DType::kFloat32; }
  // The shape of one example's int64 target: {} for a class label (a batch's target is
  // [B]), {T} for a sequence of next tokens ([B, T]).
  virtual Shape target_shape() const { return {}; }
  // Writes example i's data (numel(example_shape()) elements of data_dtype()) and its
  // numel(target_shape()) int64 targets. By default get() for float32 data.
  virtual void get_example(int64_t i, void* data, int64_t* target) const {
    get(i, static_cast<float*>(data), target);
  }
  // Writes example i's data (numel(example_shape()) floats) and its int64 target: what a
  // float32 data set with one label per example overrides.
  virtual void get(int64_t i, float* data, int64_t* target) const;
};

// Images of one channel, stored as bytes: example i is [1, H, W] with values
// (pixel / 255 - mean) / std, and its label.
class ImageDataset : public Dataset {
 public:
  ImageDataset(std::vector<uint8_t> pixels, std::vector<int64_t> labels, int64_t height,
               int64_t width, float mean = 0, float std = 1);
  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  Shape example_shape() const override { return {1, height_, width_}; }
  void get(int64_t i, float* data, int64_t* target) const override;
  int64_t label(int64_t i) const { return labels_.at(i); }

 private:
  std::vector<uint8_t> pixels_;
  std::vector<int64_t> labels_;
  int64_t height_, width_;
  float lut_[256];  // pixel value -> normalised float
};

// {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] from `dir`. Normalised with the
// training set's mean and std when `normalize` (Fashion-MNIST: 0.2860, 0.3530).
// Debian's dataset-fashion-mnist package (tools/bootstrap.sh installs it) puts the files
// in /usr/share/datasets/fashion-mnist.
// max_examples > 0 keeps only the first max_examples and reads no further into the files
// (read_idx's max_items: a damaged tail goes unseen); the two files' stated counts must
// still agree. A negative max_examples is a ValueError.
std::shared_ptr<ImageDataset> load_fashion_mnist(const std::string& dir, bool train,
                                                 bool normalize = true,
                                                 int64_t max_examples = 0);
// The same reader for any pair of IDX image and label files.
std::shared_ptr<ImageDataset> load_idx_images(const std::string& images,
                                              const std::string& labels, float mean = 0,
                                              float std = 1, int64_t max_examples = 0);

}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_DATA_DATASET_H_
