// The convolution shapes the conv2d tests share: each {input, weight, {stride, padding,
// dilation, groups}} covers one feature of the window (tests/ops/conv_grad_test.cc,
// tests/ops/conv_onednn_test.cc).
#ifndef STREAMGRAD_TESTS_OPS_CONV_CASES_H_
#define STREAMGRAD_TESTS_OPS_CONV_CASES_H_

#include "ops/ops.h"

namespace streamgrad {
namespace testing {

struct ConvCase {
  Shape x, w;
  Conv2dParams p;
};

inline const ConvCase kConvCases[] = {
    {{2, 3, 5, 6}, {4, 3, 3, 3}, {}},
    {{1, 2, 7, 5}, {3, 2, 2, 3}, {{2, 1}, {1, 2}, {1, 1}, 1}},
    {{1, 2, 6, 6}, {2, 2, 3, 2}, {{1, 2}, {2, 0}, {2, 1}, 1}},  // dilation
    {{2, 4, 4, 4}, {6, 2, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 2}},  // groups
    {{1, 4, 3, 3}, {4, 1, 1, 1}, {{1, 1}, {0, 0}, {1, 1}, 4}},  // depthwise 1x1
};

}  // namespace testing
}  // namespace streamgrad

#endif  // STREAMGRAD_TESTS_OPS_CONV_CASES_H_
