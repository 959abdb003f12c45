// Helpers the optimisers' option structs and checks share (nn/optim.cc,
// nn/optim_rmsprop.cc); not part of the API. Failure: ValueError, naming the optimiser.
#ifndef STREAMGRAD_NN_OPTIM_UTIL_H_
#define STREAMGRAD_NN_OPTIM_UTIL_H_

#include <cmath>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>

#include "nn/optimizer.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace nn {
namespace optim_internal {

// Reads each of `names` from `in` into the fields `out` (all or nothing).
inline bool read_all(const std::map<std::string, double>& in,
                     std::initializer_list<std::pair<const char*, double*>> out) {
  for (const auto& [name, field] : out) {
    if (in.count(name) == 0) return false;
  }
  for (const auto& [name, field] : out) *field = in.at(name);
  return true;
}

inline void check_lr(const char* op, const std::string& where, double lr) {
  SG_CHECK(lr >= 0 && std::isfinite(lr), ValueError, op, ": ", where, ": learning rate ", lr,
           " must be finite and >= 0");
}

template <typename Options>
const Options& options_of(const char* op, const char* type, const OptimizerOptions& o,
                          const std::string& where) {
  const auto* typed = dynamic_cast<const Options*>(&o);
  SG_CHECK(typed != nullptr, ValueError, op, ": ", where, " are not ", type, " (a parameter ",
           "group's options must be of its optimizer's type)");
  return *typed;
}

}  // namespace optim_internal
}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_OPTIM_UTIL_H_
