// Reading a safetensors file (nn/checkpoint_format.h): the whole file into memory, the
// header parsed and every entry validated against the data buffer, and an entry turned
// into a tensor.
#include "nn/checkpoint_format.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "engine/factories.h"
#include "runtime/base/error.h"
#include <nlohmann/json.hpp>

namespace streamgrad {
namespace nn {
namespace checkpoint_internal {
namespace {

using json = nlohmann::json;

std::optional<DType> dtype_of_code(const std::string& code) {
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kInt64, DType::kBool, DType::kFloat16,
                  DType::kBFloat16}) {
    if (code == dtype_code(t)) return t;
  }
  return std::nullopt;
}

// Codes the format defines that streamgrad has no dtype for: refused as unsupported
// rather than unknown, so the message says what to do.
bool is_other_safetensors_dtype(const std::string& code) {
  static const std::set<std::string> kOthers = {
      "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "I8", "I16",
      "I32", "U8",   "U16",     "U32",     "U64",     "C64"};
  return kOthers.count(code) == 1;
}

const char* json_kind(const json& v) { return v.type_name(); }

bool as_u64(const json& v, uint64_t* out) {
  if (!v.is_number_integer()) return false;  // floats, strings, ...
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return true;
  }
  const int64_t s = v.get<int64_t>();
  if (s < 0) return false;
  *out = static_cast<uint64_t>(s);
  return true;
}

// Bytes that are not a valid safetensors file: an IOError without errno.
[[noreturn]] void corrupt(const char* op, const std::string& path, const std::string& what) {
  throw IOError(absl::StrCat(where(op, path), what));
}


// Validates one header entry (everything that does not depend on the other entries).
void parse_entry(const char* op, const std::string& path, const std::string& name,
                         const json& v, uint64_t buffer_size, Entry* out) {
  const std::string key = absl::StrCat("tensor '", name, "': ");
  if (!v.is_object()) {
    corrupt(op, path, absl::StrCat(key, "expected an object with dtype, shape and "
                                          "data_offsets, found a ", json_kind(v)));
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!v.contains(field)) corrupt(op, path, absl::StrCat(key, "missing '", field, "'"));
  }
  out->name = name;
  const json& dtype = v["dtype"];
  if (!dtype.is_string()) {
    corrupt(op, path, absl::StrCat(key, "dtype must be a string, found a ", json_kind(dtype)));
  }
  const std::string code = dtype.get<std::string>();
  const std::optional<DType> t = dtype_of_code(code);
  if (!t) {
    if (is_other_safetensors_dtype(code)) {
      throw ValueError(absl::StrCat(
          where(op, path), key, "dtype ", code,
          " is not supported (streamgrad holds F32, F64, F16, BF16, I64 and BOOL); convert it before saving"));
    }
    corrupt(op, path, absl::StrCat(key, "unknown dtype '", code, "'"));
  }
  out->dtype = *t;
  const json& shape = v["shape"];
  if (!shape.is_array()) {
    corrupt(op, path, absl::StrCat(key, "shape must be an array, found a ", json_kind(shape)));
  }
  uint64_t numel = 1;
  out->shape.clear();
  for (const json& d : shape) {
    uint64_t n = 0;
    if (!as_u64(d, &n) || n > static_cast<uint64_t>(INT64_MAX)) {
      corrupt(op, path, absl::StrCat(key, "shape ", shape.dump(),
                                            " must hold non-negative integers"));
    }
    if (__builtin_mul_overflow(numel, n, &numel)) {
      corrupt(op, path, absl::StrCat(key, "shape ", shape.dump(), " overflows"));
    }
    out->shape.push_back(static_cast<int64_t>(n));
  }
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, element_size(*t), &nbytes) || numel > INT64_MAX) {
    corrupt(op, path, absl::StrCat(key, "shape ", shape.dump(), " overflows"));
  }
  const json& offsets = v["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !as_u64(offsets[0], &out->begin) ||
      !as_u64(offsets[1], &out->end) || out->begin > out->end) {
    corrupt(op, path, absl::StrCat(key, "data_offsets ", offsets.dump(),
                                          " must be [begin, end] with 0 <= begin <= end"));
  }
  if (out->end - out->begin != nbytes) {
    corrupt(op, path, absl::StrCat(key, "data_offsets [", out->begin, ", ", out->end,
                                          ") hold ", out->end - out->begin, " bytes but ",
                                          describe(*out), " needs ", nbytes));
  }
  if (out->end > buffer_size) {
    corrupt(op, path, absl::StrCat(key, "data_offsets [", out->begin, ", ", out->end,
                                          ") run past the end of the ", buffer_size,
                                          "-byte data buffer (truncated file?)"));
  }
}

// The entries must tile [0, buffer_size) exactly: no overlap, no hole, nothing after.
void check_coverage(const char* op, const std::string& path, const ParsedFile& f,
                            uint64_t buffer_size) {
  std::vector<const Entry*> order;
  for (const auto& [name, e] : f.entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return std::tie(a->begin, a->end) < std::tie(b->begin, b->end);
  });
  uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry* e : order) {
    if (e->begin < covered) {
      corrupt(op, path, absl::StrCat("tensor '", e->name, "': data_offsets [", e->begin,
                                            ", ", e->end, ") overlap those of '",
                                            previous->name, "' [", previous->begin, ", ",
                                            previous->end, ")"));
    }
    if (e->begin > covered) {
      corrupt(op, path, absl::StrCat("bytes [", covered, ", ", e->begin,
                                            ") of the data buffer (a hole before tensor '",
                                            e->name, "') belong to no tensor"));
    }
    covered = e->end;
    previous = e;
  }
  if (covered != buffer_size) {
    corrupt(op, path, absl::StrCat("bytes [", covered, ", ", buffer_size,
                                          ") at the end of the data buffer belong to no tensor"));
  }
}

void check_bools(const char* op, const std::string& path, const ParsedFile& f) {
  for (const auto& [name, e] : f.entries) {
    if (e.dtype != DType::kBool) continue;
    for (uint64_t i = e.begin; i < e.end; ++i) {
      const unsigned char b = static_cast<unsigned char>(f.bytes[f.data_start + i]);
      if (b > 1) {
        corrupt(op, path, absl::StrCat("tensor '", name, "': element ", i - e.begin,
                                              " of a BOOL tensor is ", int{b}, ", not 0 or 1"));
      }
    }
  }
}

std::string read_whole(const char* op, const std::string& path) {
  // Closed on every path out, the bad_alloc of a huge file's append included.
  const std::unique_ptr<FILE, int (*)(FILE*)> fp(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (fp == nullptr) io_failed(errno, absl::StrCat(where(op, path), "cannot open: "));
  std::string bytes;
  char chunk[1 << 16];
  size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof(chunk), fp.get())) > 0) bytes.append(chunk, n);
  const bool failed = std::ferror(fp.get()) != 0;
  const int err = errno;
  if (failed) io_failed(err, absl::StrCat(where(op, path), "read failed: "));
  return bytes;
}

template <typename T>
std::vector<T> decode(const char* p, size_t n) {
  std::vector<T> out(n);
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    out[i] = v;
  }
  return out;
}

}  // namespace

ParsedFile read_safetensors(const char* op, const std::string& path) {
  ParsedFile f;
  try {
    f.bytes = read_whole(op, path);
  } catch (const std::bad_alloc& e) {
    rethrow_with_context(op, path, e);
  }
  const uint64_t size = f.bytes.size();
  if (size < 8) {
    corrupt(op, path, absl::StrCat("the file has ", size, " bytes, fewer than the 8-byte "
                                          "header length (truncated, or not safetensors)"));
  }
  uint64_t n = 0;
  std::memcpy(&n, f.bytes.data(), 8);
  if (n > kMaxHeaderBytes) {
    corrupt(op, path, absl::StrCat("header length ", n, " is absurd (the limit is ",
                                          kMaxHeaderBytes, " bytes): not a safetensors file"));
  }
  if (n > size - 8) {
    corrupt(op, path, absl::StrCat("header length ", n, " runs past the end of the ",
                                          size, "-byte file (truncated header)"));
  }
  f.data_start = 8 + n;
  const uint64_t buffer_size = size - f.data_start;
  const std::string text = f.bytes.substr(8, n);
  json header;
  // A JSON object with a repeated key keeps only one value; a repeated tensor name is
  // refused rather than silently resolved.
  std::set<std::string> names;
  std::string repeated;
  const json::parser_callback_t note_names = [&](int depth, json::parse_event_t event,
                                                 json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && parsed.is_string() &&
        !names.insert(parsed.get<std::string>()).second && repeated.empty()) {
      repeated = parsed.get<std::string>();
    }
    return true;
  };
  try {
    header = json::parse(text, note_names);
  } catch (const json::exception& e) {
    corrupt(op, path, absl::StrCat("the header is not valid JSON: ", e.what()));
  }
  if (!repeated.empty()) {
    corrupt(op, path, absl::StrCat("key '", repeated, "' appears twice in the header"));
  }
  if (!header.is_object()) {
    corrupt(op, path, absl::StrCat("the header must be a JSON object, found a ",
                                          json_kind(header)));
  }
  if (text.empty() || text[0] != '{') {
    corrupt(op, path, "the header must start with '{' (only trailing spaces may pad it)");
  }
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) {
        corrupt(op, path, absl::StrCat("__metadata__ must be an object of strings, found a ",
                                              json_kind(v)));
      }
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string()) {
          corrupt(op, path, absl::StrCat("__metadata__ '", k, "' must be a string, found a ",
                                                json_kind(s)));
        }
        f.metadata[k] = s.get<std::string>();
      }
      continue;
    }
    Entry e;
    parse_entry(op, path, name, v, buffer_size, &e);
    f.entries.emplace(name, std::move(e));
  }
  check_coverage(op, path, f, buffer_size);
  check_bools(op, path, f);
  return f;
}

Tensor make_tensor(const ParsedFile& f, const Entry& e, Device device) {
  const char* p = f.bytes.data() + f.data_start + e.begin;
  const size_t n = (e.end - e.begin) / element_size(e.dtype);
  const TensorOptions options = TensorOptions().dtype(e.dtype).device(device);
  switch (e.dtype) {
    case DType::kFloat32: return from_vector(decode<float>(p, n), e.shape, options);
    case DType::kFloat64: return from_vector(decode<double>(p, n), e.shape, options);
    case DType::kInt64: return from_vector(decode<int64_t>(p, n), e.shape, options);
    case DType::kFloat16: return from_vector(decode<Half>(p, n), e.shape, options);
    case DType::kBFloat16: return from_vector(decode<BFloat16>(p, n), e.shape, options);
    case DType::kBool: {
      std::vector<bool> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = p[i] != 0;
      return from_vector(v, e.shape, options);
    }
  }
  SG_INTERNAL_CHECK(false, "make_tensor: dtype ", static_cast<int>(e.dtype));
}

}  // namespace checkpoint_internal
}  // namespace nn
}  // namespace streamgrad
