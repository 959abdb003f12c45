// The LSTM layers of torch::nn, with the reference's parameter names, shapes,
// initialisation and tensor layouts, built from differentiable ops (linear, chunk,
// sigmoid, tanh, mul, add, stack, cat), so they train, clone and differentiate to any
// order like every other layer:
//
//   LSTMCell(input_size, hidden_size, bias)
//     weight_ih [4H, H_in], weight_hh [4H, H], bias_ih [4H], bias_hh [4H] (with bias).
//     forward(input, hx) takes input [N, H_in] (or unbatched [H_in]) and (h, c) [N, H]
//     (or [H]; zeros when absent) and returns the next (h, c).
//   LSTM(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional)
//     per layer k and direction (suffix "_reverse" for the backward one):
//     weight_ih_l{k} [4H, H_in for k = 0, else D * H], weight_hh_l{k} [4H, H],
//     bias_ih_l{k} [4H], bias_hh_l{k} [4H]. forward(input, hx) takes input [L, N, H_in]
//     ([N, L, H_in] with batch_first, unbatched [L, H_in]) and (h0, c0), each
//     [D * num_layers, N, H] ([D * num_layers, H] unbatched; zeros when absent), and
//     returns the output [L, N, D * H] (batch_first: [N, L, D * H]; unbatched [L, D * H])
//     and (h_n, c_n) shaped as h0 (never batch-first). Dropout applies to the output of
//     every layer but the last, in training mode only.
//
// Gates in the reference's order i, f, g, o (rows of the weights, each H long):
//   i, f, o = sigmoid(.), g = tanh(.) of x W_ih^T + b_ih + h W_hh^T + b_hh,
//   c' = f * c + i * g,  h' = o * tanh(c').
// Every parameter starts uniform in +-1 / sqrt(hidden_size), drawn from the seeded
// generator (manual_seed) in registration order.
//
//   nn::LSTM lstm(8, 16, /*num_layers=*/2, /*bias=*/true, /*batch_first=*/true);
//   auto [out, state] = lstm.forward(x, std::nullopt);         // x [N, L, 8]
//   auto [out2, state2] = lstm.forward(x2, state);              // carry (h, c) on
//   Tensor y = lstm.forward(x);                                 // the output only
//
// Thread-safety: as Module. Failure: ValueError naming the module for bad sizes or
// dropout at construction, and for inputs or states of the wrong rank, size or dtype
// (naming the shapes expected and given); DeviceError when the input is not on the
// parameters' device. Dropout > 0 with one layer draws a warning, as in the reference.
#ifndef STREAMGRAD_NN_RNN_H_
#define STREAMGRAD_NN_RNN_H_

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "nn/module.h"
#include "ops/ops.h"

namespace streamgrad {
namespace nn {

// (h, c): an LSTM's hidden and cell state.
using LSTMState = std::pair<Tensor, Tensor>;

class LSTMCell : public Module {
 public:
  LSTMCell(int64_t input_size, int64_t hidden_size, bool bias = true);
  // The next hidden state h' from zero state.
  Tensor forward(const Tensor& input) override;
  LSTMState forward(const Tensor& input, const std::optional<LSTMState>& hx);
  std::shared_ptr<Module> blank_copy() const override;
  Tensor weight_ih, weight_hh, bias_ih, bias_hh;  // biases undefined without bias
  int64_t input_size, hidden_size;
};

class LSTM : public Module {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, bool bias = true,
       bool batch_first = false, double dropout = 0.0, bool bidirectional = false);
  // The output from zero state (for Sequential and single-input callers).
  Tensor forward(const Tensor& input) override;
  std::pair<Tensor, LSTMState> forward(const Tensor& input, const std::optional<LSTMState>& hx);
  std::shared_ptr<Module> blank_copy() const override;
  // The four parameters of one layer and direction (bias_* undefined without bias).
  struct Weights {
    Tensor w_ih, w_hh, b_ih, b_hh;
  };
  // all_weights()[layer * D + direction], in the reference's order.
  const std::vector<Weights>& all_weights() const { return weights_; }
  int64_t input_size, hidden_size, num_layers;
  bool bias, batch_first;
  double dropout;
  bool bidirectional;

 private:
  std::vector<Weights> weights_;
};

}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_RNN_H_
