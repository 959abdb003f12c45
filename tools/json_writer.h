// JsonWriter: a small streaming writer for the tools' machine-readable reports.
//
//   JsonWriter j;
//   j.begin_object();
//   j.key("devices").begin_array(); ... j.end_array();
//   j.end_object();
//   std::cout << j.str();
//
// It escapes strings and places commas; it does not check that begin/end calls pair up
// beyond a debug assertion. Not thread-safe (one writer per report).
#ifndef STREAMGRAD_TOOLS_JSON_WRITER_H_
#define STREAMGRAD_TOOLS_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace streamgrad {

class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(absl::string_view k);
  JsonWriter& value(absl::string_view v);
  JsonWriter& value(const char* v) { return value(absl::string_view(v)); }
  JsonWriter& value(const std::string& v) { return value(absl::string_view(v)); }
  JsonWriter& value(bool v);
  JsonWriter& value(int64_t v);
  JsonWriter& value(int v) { return value(static_cast<int64_t>(v)); }
  JsonWriter& value(double v);
  JsonWriter& null();

  const std::string& str() const { return out_; }

 private:
  void before_value();
  std::string out_;
  // Per open container: whether it already holds an element.
  std::vector<bool> has_element_;
  bool after_key_ = false;
};

std::string json_escape(absl::string_view s);

}  // namespace streamgrad

#endif  // STREAMGRAD_TOOLS_JSON_WRITER_H_
