#include "runtime/base/dtype.h"

#include "absl/strings/str_cat.h"
#include "runtime/base/error.h"

namespace streamgrad {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kInt64:
      return "int64";
    case DType::kBool:
      return "bool";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
  }
  return "unknown";
}

DType dtype_from_name(const std::string& name) {
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kInt64, DType::kBool,
                  DType::kFloat16, DType::kBFloat16}) {
    if (name == dtype_name(t)) return t;
  }
  if (name == "half") return DType::kFloat16;  // the reference framework's alias
  throw ValueError(absl::StrCat(
      "unknown dtype \"", name,
      "\"; expected float32, float64, float16 (or half), bfloat16, int64 or bool"));
}

void unexpected_dtype(const char* where, DType t) {
  throw InternalError(absl::StrCat(where, ": unexpected dtype ", dtype_name(t)));
}

}  // namespace streamgrad
