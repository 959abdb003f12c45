#include "runtime/dtype.h"

#include "absl/strings/str_cat.h"
#include "runtime/error.h"

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
  }
  return "unknown";
}

DType dtype_from_name(const std::string& name) {
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kInt64, DType::kBool}) {
    if (name == dtype_name(t)) return t;
  }
  throw ValueError(absl::StrCat("unknown dtype \"", name,
                                "\"; expected float32, float64, int64 or bool"));
}

}  // namespace streamgrad
