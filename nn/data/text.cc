#include "nn/data/text.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "engine/factories.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace nn {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int e = errno;
    throw IOError(absl::StrCat("load_text_corpus: cannot open '", path, "': ", std::strerror(e),
                               "; pass a readable text file or folder (the default corpus is "
                               "Debian's fortunes package: run tools/bootstrap.sh)"),
                  e);
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The files of `path`: itself, or a folder's regular files in name order, without
// fortune's indexes (.dat) and links (lstat: fortune's .u8 links name the same files again).
std::vector<std::string> text_files(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    const int e = errno;
    throw IOError(absl::StrCat("load_text_corpus: cannot read '", path, "': ", std::strerror(e),
                               "; pass a text file or a folder of them (the default corpus is "
                               "Debian's fortunes package: run tools/bootstrap.sh)"),
                  e);
  }
  if (!S_ISDIR(st.st_mode)) return {path};
  std::vector<std::string> names;
  if (DIR* dir = opendir(path.c_str())) {
    while (const dirent* ent = readdir(dir)) {
      const std::string name = ent->d_name;
      if (name.empty() || name[0] == '.') continue;
      const auto ends_with = [&name](const char* suffix) {
        const size_t n = std::strlen(suffix);
        return name.size() >= n && name.compare(name.size() - n, n, suffix) == 0;
      };
      if (ends_with(".dat")) continue;
      const std::string full = absl::StrCat(path, "/", name);
      struct stat fst;
      if (lstat(full.c_str(), &fst) == 0 && S_ISREG(fst.st_mode)) names.push_back(full);
    }
    closedir(dir);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Splits at lines holding only "%"; empty documents are dropped.
void add_documents(const std::string& text, std::vector<std::string>& docs) {
  std::string doc;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line == "%") {
      if (!doc.empty()) docs.push_back(std::move(doc));
      doc.clear();
    } else {
      doc += line;
      doc += '\n';
    }
  }
  if (!doc.empty()) docs.push_back(std::move(doc));
}

}  // namespace

TextCorpus load_text_corpus(const std::string& path, double validation_fraction, uint64_t seed) {
  SG_CHECK(validation_fraction >= 0 && validation_fraction < 1, ValueError,
           "load_text_corpus: validation_fraction must be in [0, 1), got ", validation_fraction);
  std::vector<std::string> docs;
  for (const std::string& file : text_files(path)) add_documents(read_file(file), docs);
  if (docs.empty()) {
    throw IOError(absl::StrCat("load_text_corpus: '", path, "' holds no text"));
  }
  std::vector<size_t> order(docs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937_64 rng(seed);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
  size_t n_val = static_cast<size_t>(validation_fraction * static_cast<double>(docs.size()));
  if (validation_fraction > 0 && n_val == 0 && docs.size() >= 2) n_val = 1;
  std::vector<bool> is_val(docs.size(), false);
  for (size_t i = 0; i < n_val; ++i) is_val[order[i]] = true;
  TextCorpus c;
  for (size_t i = 0; i < docs.size(); ++i) {
    (is_val[i] ? c.validation : c.train) += docs[i];
    ++(is_val[i] ? c.validation_documents : c.train_documents);
  }
  return c;
}

CharVocab CharVocab::from_text(const std::string& text) {
  bool seen[256] = {};
  for (unsigned char ch : text) seen[ch] = true;
  CharVocab v;
  for (int b = 0; b < 256; ++b) {
    v.id_of_[b] = -1;
    if (seen[b]) {
      v.id_of_[b] = static_cast<int16_t>(v.symbols_.size());
      v.symbols_.push_back(static_cast<char>(b));
    }
  }
  return v;
}

std::vector<int64_t> CharVocab::encode(const std::string& text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char ch = static_cast<unsigned char>(text[i]);
    SG_CHECK(id_of_[ch] >= 0, ValueError, "CharVocab::encode: byte ", static_cast<int>(ch),
             " at offset ", i, " is not in the vocabulary of ", size(),
             " bytes; build the vocabulary from all the text it must encode");
    ids.push_back(id_of_[ch]);
  }
  return ids;
}

std::string CharVocab::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  out.reserve(ids.size());
  for (int64_t id : ids) {
    SG_CHECK(id >= 0 && id < size(), ValueError, "CharVocab::decode: id ", id,
             " is outside the vocabulary [0, ", size(), ")");
    out.push_back(symbols_[static_cast<size_t>(id)]);
  }
  return out;
}

TextWindows::TextWindows(std::vector<int64_t> tokens, int64_t context)
    : tokens_(std::move(tokens)), context_(context) {
  SG_CHECK(context >= 1 && static_cast<int64_t>(tokens_.size()) > context, ValueError,
           "TextWindows: a context of ", context, " needs at least ", context + 1,
           " tokens (a window and its next token), got ", tokens_.size());
}

void TextWindows::copy_window(int64_t start, int64_t* x, int64_t* y) const {
  SG_CHECK(start >= 0 && start < num_windows(), ValueError, "TextWindows: window start ", start,
           " is outside [0, ", num_windows(), ")");
  std::copy_n(tokens_.begin() + start, context_, x);
  std::copy_n(tokens_.begin() + start + 1, context_, y);
}

std::pair<Tensor, Tensor> TextWindows::batch_at(const std::vector<int64_t>& starts,
                                                Device device) const {
  SG_CHECK(!starts.empty(), ValueError, "TextWindows: a batch needs at least one window");
  const int64_t b = static_cast<int64_t>(starts.size()), t = context_;
  std::vector<int64_t> x(static_cast<size_t>(b * t)), y(static_cast<size_t>(b * t));
  for (int64_t i = 0; i < b; ++i) {
    copy_window(starts[static_cast<size_t>(i)], x.data() + i * t, y.data() + i * t);
  }
  const TensorOptions o = TensorOptions().dtype(DType::kInt64).device(device);
  return {from_vector(x, {b, t}, o), from_vector(y, {b, t}, o)};
}

std::pair<Tensor, Tensor> TextWindows::sample(int64_t batch, std::mt19937_64& rng,
                                              Device device) const {
  SG_CHECK(batch >= 1, ValueError, "TextWindows::sample: batch must be at least 1, got ", batch);
  std::vector<int64_t> starts(static_cast<size_t>(batch));
  for (int64_t& s : starts) s = static_cast<int64_t>(rng() % static_cast<uint64_t>(num_windows()));
  return batch_at(starts, device);
}

TextDataset::TextDataset(std::shared_ptr<const TextWindows> windows, int64_t stride)
    : windows_(std::move(windows)), stride_(stride) {
  SG_CHECK(windows_ != nullptr, ValueError, "TextDataset: no windows given");
  SG_CHECK(stride >= 1, ValueError, "TextDataset: stride must be at least 1, got ", stride);
}

int64_t TextDataset::size() const { return (windows_->num_windows() + stride_ - 1) / stride_; }

void TextDataset::get_example(int64_t i, void* data, int64_t* target) const {
  SG_CHECK(i >= 0 && i < size(), ValueError, "TextDataset: example ", i, " is outside [0, ",
           size(), ")");
  windows_->copy_window(i * stride_, static_cast<int64_t*>(data), target);
}

}  // namespace nn
}  // namespace streamgrad
