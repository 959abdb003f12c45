// The devices the device-parameterised tests run on: cpu and sim:0 everywhere, and cuda:0
// where a GPU is present, so that on a GPU machine the suite covers cuda too.
//
//   const Device d(GENERATE(from_range(testing::device_names())));
//
// Without a GPU the first call says once per test binary (on stderr) that cuda:0 is left
// out and why; Catch2 2.x has no SKIP.
//
// Thread-safety: call from the test thread. Failure: none.
#ifndef STREAMGRAD_TESTS_DEVICE_NAMES_H_
#define STREAMGRAD_TESTS_DEVICE_NAMES_H_

#include <iostream>
#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace streamgrad {
namespace testing {

inline std::vector<std::string> device_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out = {"cpu", "sim:0"};
    if (device_count(DeviceType::kCuda) > 0) {
      out.push_back("cuda:0");
    } else {
      std::cerr << "note: device-parameterised tests run on cpu and sim:0 only; cuda:0 "
                   "skipped: no usable GPU or driver on this machine\n";
    }
    return out;
  }();
  return names;
}

}  // namespace testing
}  // namespace streamgrad

#endif  // STREAMGRAD_TESTS_DEVICE_NAMES_H_
