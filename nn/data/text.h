// Character-level text for language models (tools/train --model=gpt): a corpus read from a
// file or a folder of text files and split, by documents and with a seed, into training
// and validation text; the vocabulary of the bytes it holds; and random windows of the
// encoded text as input and next-token target batches.
//
//   nn::TextCorpus corpus = nn::load_text_corpus("/usr/share/games/fortunes", 0.1, /*seed=*/1);
//   nn::CharVocab vocab = nn::CharVocab::from_text(corpus.train + corpus.validation);
//   nn::TextWindows train(vocab.encode(corpus.train), /*context=*/64);
//   std::mt19937_64 rng(1);
//   auto [x, y] = train.sample(/*batch=*/16, rng, Device("cpu"));   // int64 [16, 64] each
//   std::string text = vocab.decode(x[0].to_vector<int64_t>());
//   // Or as a data set for DataLoader: windows every `stride` tokens, int64 data [T] and
//   // targets [T] (the next tokens) per example.
//   auto data = std::make_shared<nn::TextDataset>(
//       std::make_shared<nn::TextWindows>(vocab.encode(corpus.train), 64), /*stride=*/64);
//
// Documents: a folder's regular files in name order (fortune's ".dat" indexes and links
// skipped), each split at lines holding only "%" (the fortune format); text without such
// lines is one document per file. The split shuffles the documents with the seed and puts
// the first `validation_fraction` of them (at least one, if there are two or more) into
// validation; the rest, in their original order, is training text. Bytes, not Unicode
// characters: UTF-8 text gives its bytes, and decode gives them back.
//
// Thread-safety: CharVocab and TextWindows are immutable after construction; sample uses
// the caller's generator. Failure: IOError (with errno) for a path that cannot be read or
// holds no text; ValueError for a fraction outside [0, 1), a byte or id outside the
// vocabulary, a context that leaves no window, or a batch below 1.
#ifndef STREAMGRAD_NN_DATA_TEXT_H_
#define STREAMGRAD_NN_DATA_TEXT_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"
#include "nn/data/dataset.h"
#include "runtime/base/device.h"

namespace streamgrad {
namespace nn {

struct TextCorpus {
  std::string train, validation;
  int64_t train_documents = 0, validation_documents = 0;
};

TextCorpus load_text_corpus(const std::string& path, double validation_fraction, uint64_t seed);

class CharVocab {
 public:
  // The distinct bytes of `text`, in byte order: id i is the i-th of them.
  static CharVocab from_text(const std::string& text);
  int64_t size() const { return static_cast<int64_t>(symbols_.size()); }
  const std::string& symbols() const { return symbols_; }
  std::vector<int64_t> encode(const std::string& text) const;
  std::string decode(const std::vector<int64_t>& ids) const;

 private:
  std::string symbols_;
  int16_t id_of_[256];  // -1: not in the vocabulary
};

class TextWindows {
 public:
  TextWindows(std::vector<int64_t> tokens, int64_t context);
  int64_t context() const { return context_; }
  // Windows that have a next token after each position: tokens - context.
  int64_t num_windows() const { return static_cast<int64_t>(tokens_.size()) - context_; }
  // x [B, T] of windows starting at `starts`, and y [B, T] the tokens one further on.
  std::pair<Tensor, Tensor> batch_at(const std::vector<int64_t>& starts, Device device) const;
  // The window at `start` into x and the tokens one further on into y (context() each).
  void copy_window(int64_t start, int64_t* x, int64_t* y) const;
  // `batch` windows at starts drawn uniformly from the generator.
  std::pair<Tensor, Tensor> sample(int64_t batch, std::mt19937_64& rng, Device device) const;

 private:
  std::vector<int64_t> tokens_;
  int64_t context_;
};

// The windows starting every `stride` tokens (0, stride, 2 stride, ...) as examples.
class TextDataset : public Dataset {
 public:
  TextDataset(std::shared_ptr<const TextWindows> windows, int64_t stride);
  int64_t size() const override;
  Shape example_shape() const override { return {windows_->context()}; }
  DType data_dtype() const override { return DType::kInt64; }
  Shape target_shape() const override { return {windows_->context()}; }
  void get_example(int64_t i, void* data, int64_t* target) const override;
  const TextWindows& windows() const { return *windows_; }

 private:
  std::shared_ptr<const TextWindows> windows_;
  int64_t stride_;
};

}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_DATA_TEXT_H_
