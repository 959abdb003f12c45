// A strict JSON reader for tests that check what our tools and the trace recorder write:
// a malformed document is a test failure, so the reader rejects anything RFC 8259 does
// not allow (trailing commas, bare words, unescaped control characters, trailing text).
//
//   JsonValue doc = parse_json(text);          // throws std::runtime_error with the offset
//   for (const JsonValue& e : doc["traceEvents"].array) e["ph"].str ...
//
// Header-only, test code only. Not thread-safe (values are plain data).
#ifndef STREAMGRAD_TESTS_JSON_VALUE_H_
#define STREAMGRAD_TESTS_JSON_VALUE_H_

#include <cctype>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace streamgrad {
namespace testing {

struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string str;
  std::vector<JsonValue> array;
  std::map<std::string, JsonValue> object;

  bool has(const std::string& key) const {
    return type == Type::kObject && object.count(key) > 0;
  }
  // Missing keys are a test failure, not a silent null.
  const JsonValue& operator[](const std::string& key) const {
    auto it = object.find(key);
    if (type != Type::kObject || it == object.end()) {
      throw std::runtime_error("JSON: no key '" + key + "'");
    }
    return it->second;
  }
};

namespace json_detail {

class Reader {
 public:
  explicit Reader(const std::string& s) : s_(s) {}

  JsonValue document() {
    JsonValue v = value();
    skip();
    if (i_ != s_.size()) fail("text after the document");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw std::runtime_error("JSON: " + why + " at offset " + std::to_string(i_));
  }
  void skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' ||
                              s_[i_] == '\t')) {
      ++i_;
    }
  }
  char peek() {
    skip();
    if (i_ >= s_.size()) fail("unexpected end");
    return s_[i_];
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  void word(const char* w) {
    for (const char* p = w; *p; ++p, ++i_) {
      if (i_ >= s_.size() || s_[i_] != *p) fail(std::string("expected ") + w);
    }
  }

  JsonValue value() {
    JsonValue v;
    const char c = peek();
    if (c == '{') {
      v.type = JsonValue::Type::kObject;
      ++i_;
      if (peek() == '}') return ++i_, v;
      for (;;) {
        if (peek() != '"') fail("expected a key");
        std::string k = string();
        expect(':');
        v.object[k] = value();
        if (peek() == ',') { ++i_; continue; }
        expect('}');
        return v;
      }
    }
    if (c == '[') {
      v.type = JsonValue::Type::kArray;
      ++i_;
      if (peek() == ']') return ++i_, v;
      for (;;) {
        v.array.push_back(value());
        if (peek() == ',') { ++i_; continue; }
        expect(']');
        return v;
      }
    }
    if (c == '"') {
      v.type = JsonValue::Type::kString;
      v.str = string();
      return v;
    }
    if (c == 't' || c == 'f') {
      v.type = JsonValue::Type::kBool;
      v.boolean = c == 't';
      word(v.boolean ? "true" : "false");
      return v;
    }
    if (c == 'n') {
      word("null");
      return v;
    }
    v.type = JsonValue::Type::kNumber;
    const size_t start = i_;
    if (s_[i_] == '-') ++i_;
    if (i_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[i_]))) fail("bad value");
    while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) ||
                              s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E' ||
                              s_[i_] == '+' || s_[i_] == '-')) {
      ++i_;
    }
    const std::string text = s_.substr(start, i_ - start);
    char* end = nullptr;
    v.number = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size()) fail("bad number " + text);
    return v;
  }

  std::string string() {
    expect('"');
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      const char e = s_[i_++];
      switch (e) {
        case '"': case '\\': case '/': out += e; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          if (i_ + 4 > s_.size()) fail("short \\u escape");
          const long code = std::strtol(s_.substr(i_, 4).c_str(), nullptr, 16);
          i_ += 4;
          out += code < 0x80 ? static_cast<char>(code) : '?';  // tests only need ASCII
          break;
        }
        default: fail("bad escape");
      }
    }
  }

  const std::string& s_;
  size_t i_ = 0;
};

}  // namespace json_detail

inline JsonValue parse_json(const std::string& text) {
  return json_detail::Reader(text).document();
}

}  // namespace testing
}  // namespace streamgrad

#endif  // STREAMGRAD_TESTS_JSON_VALUE_H_
