// Parameter initialisation, in place and without history, as torch::nn::init. Random
// draws come from the seeded generator (manual_seed), on the tensor's device.
//
//   nn::init::kaiming_uniform_(w, std::sqrt(5.0));   // Linear's and Conv2d's default
//
// Thread-safety: as in-place ops (one writer per tensor). Failure: ValueError for
// tensors with fewer than 2 dims where fans are needed, and for bad bounds.
#ifndef STREAMGRAD_NN_INIT_H_
#define STREAMGRAD_NN_INIT_H_

#include <utility>

#include "engine/tensor.h"

namespace streamgrad {
namespace nn {
namespace init {

enum class FanMode { kFanIn, kFanOut };
enum class Nonlinearity { kLinear, kRelu, kLeakyRelu, kTanh, kSigmoid };

// (fan_in, fan_out): dim 1 and dim 0 sizes times the receptive field (dims 2..).
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);
// The gain PyTorch recommends for `nonlinearity` (param: leaky_relu's negative slope).
double calculate_gain(Nonlinearity nonlinearity, double param = 0.01);

Tensor uniform_(Tensor t, double low = 0, double high = 1);
Tensor normal_(Tensor t, double mean = 0, double std = 1);
Tensor constant_(Tensor t, double value);
Tensor zeros_(Tensor t);
Tensor ones_(Tensor t);
Tensor kaiming_uniform_(Tensor t, double a = 0, FanMode mode = FanMode::kFanIn,
                        Nonlinearity nonlinearity = Nonlinearity::kLeakyRelu);
Tensor kaiming_normal_(Tensor t, double a = 0, FanMode mode = FanMode::kFanIn,
                       Nonlinearity nonlinearity = Nonlinearity::kLeakyRelu);
Tensor xavier_uniform_(Tensor t, double gain = 1);

// While one lives, this thread's init functions return their tensor untouched and draw
// no random numbers: Module::blank_copy() constructs its copy under one, so that copying
// a model (clone, replicate for DataParallel) neither spends time initialising tensors
// it overwrites nor moves the seeded generator training depends on. Nests.
class NoInitGuard {
 public:
  NoInitGuard();
  ~NoInitGuard();
  NoInitGuard(const NoInitGuard&) = delete;
  NoInitGuard& operator=(const NoInitGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace init
}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_INIT_H_
