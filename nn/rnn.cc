#include "nn/rnn.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/autocast.h"
#include "engine/factories.h"
#include "nn/init.h"
#include "runtime/base/error.h"
#include "runtime/base/warning.h"

namespace streamgrad {
namespace nn {
namespace {

std::string shape_str(const Shape& s) { return absl::StrCat("[", absl::StrJoin(s, ", "), "]"); }

void check_positive(const char* module, const char* what, int64_t v) {
  SG_CHECK(v > 0, ValueError, module, ": ", what, " must be positive, got ", v);
}

// The reference's reset_parameters: every parameter uniform in +-1 / sqrt(hidden_size).
void init_uniform(Module& m, int64_t hidden_size) {
  const double bound = 1 / std::sqrt(static_cast<double>(hidden_size));
  for (Tensor& p : m.parameters()) init::uniform_(p, -bound, bound);
}

TensorOptions like(const Tensor& t) { return TensorOptions().dtype(t.dtype()).device(t.device()); }

// One step of the cell from the input's projection x W_ih^T + b_ih, which the layer
// computes for every step in one product.
LSTMState step(const Tensor& x_proj, const LSTMState& hc, const Tensor& w_hh,
               const Tensor& b_hh) {
  const std::vector<Tensor> g = chunk(add(x_proj, linear(hc.first, w_hh, b_hh)), 4, -1);
  const Tensor c = add(mul(sigmoid(g[1]), hc.second), mul(sigmoid(g[0]), tanh(g[2])));
  return {mul(sigmoid(g[3]), tanh(c)), c};
}

// The input must be floating, on the parameters' device and of their dtype (or of any
// floating dtype while autocast picks the products' dtype).
void check_input(const char* module, const Tensor& input, const Tensor& weight) {
  SG_CHECK(input.defined(), ValueError, module, ": the input is undefined");
  SG_CHECK(input.device() == weight.device(), DeviceError, module, ": input ", input.describe(),
           " is not on the parameters' device ", weight.device().str(), "; move one with to()");
  SG_CHECK(input.dtype() == weight.dtype() || (is_floating(input.dtype()) &&
                                               is_autocast_enabled(input.device().type())),
           ValueError, module, ": input ", input.describe(), " must have the parameters' dtype ",
           dtype_name(weight.dtype()), "; convert the input or the module with to()");
}

// A state tensor (`what`: "h0", "c0", "hx", "cx") of the expected shape, device and dtype.
void check_state(const char* module, const char* what, const Tensor& t, const Shape& want,
                 const Tensor& input, const char* layout) {
  SG_CHECK(t.defined(), ValueError, module, ": ", what, " is undefined; pass both states or "
           "none (zeros)");
  SG_CHECK(t.sizes() == want, ValueError, module, ": ", what, " ", t.describe(), " must be ",
           shape_str(want), " (", layout, ") for input ", input.describe());
  SG_CHECK(t.device() == input.device(), DeviceError, module, ": ", what, " ", t.describe(),
           " is not on the input's device ", input.device().str());
  SG_CHECK(t.dtype() == input.dtype(), ValueError, module, ": ", what, " ", t.describe(),
           " must have the input's dtype ", dtype_name(input.dtype()));
}

}  // namespace

LSTMCell::LSTMCell(int64_t input_size_, int64_t hidden_size_, bool bias)
    : Module("LSTMCell"), input_size(input_size_), hidden_size(hidden_size_) {
  check_positive("LSTMCell", "input_size", input_size);
  check_positive("LSTMCell", "hidden_size", hidden_size);
  weight_ih = register_parameter("weight_ih", empty({4 * hidden_size, input_size}));
  weight_hh = register_parameter("weight_hh", empty({4 * hidden_size, hidden_size}));
  if (bias) {
    bias_ih = register_parameter("bias_ih", empty({4 * hidden_size}));
    bias_hh = register_parameter("bias_hh", empty({4 * hidden_size}));
  }
  init_uniform(*this, hidden_size);
}

Tensor LSTMCell::forward(const Tensor& input) { return forward(input, std::nullopt).first; }

LSTMState LSTMCell::forward(const Tensor& input, const std::optional<LSTMState>& hx) {
  check_input("LSTMCell", input, weight_ih);
  SG_CHECK(input.dim() == 1 || input.dim() == 2, ValueError, "LSTMCell: expected a 2-D [N, ",
           input_size, "] or unbatched 1-D [", input_size, "] input, got ", input.describe());
  SG_CHECK(input.size(-1) == input_size, ValueError, "LSTMCell: input ", input.describe(),
           " must have input_size ", input_size, " as its last dim");
  const bool batched = input.dim() == 2;
  const Tensor x = batched ? input : unsqueeze(input, 0);
  const Shape state_shape =
      batched ? Shape{input.size(0), hidden_size} : Shape{hidden_size};
  LSTMState hc;
  if (hx.has_value()) {
    const char* layout = batched ? "batch, hidden_size" : "hidden_size, unbatched";
    check_state("LSTMCell", "hx", hx->first, state_shape, input, layout);
    check_state("LSTMCell", "cx", hx->second, state_shape, input, layout);
    hc = batched ? *hx : LSTMState{unsqueeze(hx->first, 0), unsqueeze(hx->second, 0)};
  } else {
    const Tensor z = zeros({x.size(0), hidden_size}, like(input));
    hc = {z, z};
  }
  hc = step(linear(x, weight_ih, bias_ih), hc, weight_hh, bias_hh);
  if (!batched) hc = {squeeze(hc.first, 0), squeeze(hc.second, 0)};
  return hc;
}

std::shared_ptr<Module> LSTMCell::blank_copy() const {
  init::NoInitGuard no_init;
  return std::make_shared<LSTMCell>(input_size, hidden_size, bias_ih.defined());
}

LSTM::LSTM(int64_t input_size_, int64_t hidden_size_, int64_t num_layers_, bool bias_,
           bool batch_first_, double dropout_, bool bidirectional_)
    : Module("LSTM"), input_size(input_size_), hidden_size(hidden_size_),
      num_layers(num_layers_), bias(bias_), batch_first(batch_first_), dropout(dropout_),
      bidirectional(bidirectional_) {
  check_positive("LSTM", "input_size", input_size);
  check_positive("LSTM", "hidden_size", hidden_size);
  check_positive("LSTM", "num_layers", num_layers);
  SG_CHECK(dropout >= 0 && dropout <= 1, ValueError, "LSTM: dropout ", dropout,
           " must be a probability in [0, 1] (of zeroing an element between layers)");
  if (dropout > 0 && num_layers == 1) {
    SG_WARN("LSTM: dropout ", dropout, " has no effect with num_layers 1: it applies between "
            "layers, after every layer but the last");
  }
  const int64_t directions = bidirectional ? 2 : 1;
  const int64_t gates = 4 * hidden_size;
  for (int64_t k = 0; k < num_layers; ++k) {
    const int64_t in = k == 0 ? input_size : directions * hidden_size;
    for (int64_t dir = 0; dir < directions; ++dir) {
      const std::string s = absl::StrCat("_l", k, dir == 1 ? "_reverse" : "");
      Weights w;
      w.w_ih = register_parameter("weight_ih" + s, empty({gates, in}));
      w.w_hh = register_parameter("weight_hh" + s, empty({gates, hidden_size}));
      if (bias) {
        w.b_ih = register_parameter("bias_ih" + s, empty({gates}));
        w.b_hh = register_parameter("bias_hh" + s, empty({gates}));
      }
      weights_.push_back(w);
    }
  }
  init_uniform(*this, hidden_size);
}

Tensor LSTM::forward(const Tensor& input) { return forward(input, std::nullopt).first; }

std::pair<Tensor, LSTMState> LSTM::forward(const Tensor& input,
                                           const std::optional<LSTMState>& hx) {
  check_input("LSTM", input, weights_[0].w_ih);
  const char* seq = batch_first ? "[N, L, " : "[L, N, ";
  SG_CHECK(input.dim() == 2 || input.dim() == 3, ValueError, "LSTM: expected a 3-D ", seq,
           input_size, "] or unbatched 2-D [L, ", input_size, "] input, got ", input.describe());
  SG_CHECK(input.size(-1) == input_size, ValueError, "LSTM: input ", input.describe(),
           " must have input_size ", input_size, " as its last dim");
  const bool batched = input.dim() == 3;
  // Time-major [L, N, H_in] inside.
  Tensor x = !batched ? unsqueeze(input, 1) : batch_first ? transpose(input, 0, 1) : input;
  const int64_t steps = x.size(0), batch = x.size(1);
  SG_CHECK(steps > 0, ValueError, "LSTM: input ", input.describe(), " has no time steps");
  const int64_t directions = bidirectional ? 2 : 1;
  const int64_t states = directions * num_layers;
  Tensor h0, c0;
  if (hx.has_value()) {
    const Shape want = batched ? Shape{states, batch, hidden_size} : Shape{states, hidden_size};
    const char* layout = batched ? "num_layers * num_directions, batch, hidden_size"
                                 : "num_layers * num_directions, hidden_size, unbatched";
    check_state("LSTM", "h0", hx->first, want, input, layout);
    check_state("LSTM", "c0", hx->second, want, input, layout);
    h0 = batched ? hx->first : unsqueeze(hx->first, 1);
    c0 = batched ? hx->second : unsqueeze(hx->second, 1);
  } else {
    h0 = c0 = zeros({states, batch, hidden_size}, like(input));
  }
  const std::vector<Tensor> h_in = split(h0, 1, 0), c_in = split(c0, 1, 0);
  std::vector<Tensor> h_out, c_out;
  for (int64_t k = 0; k < num_layers; ++k) {
    std::vector<Tensor> outputs;
    for (int64_t dir = 0; dir < directions; ++dir) {
      const Weights& w = weights_[k * directions + dir];
      const int64_t i = k * directions + dir;
      LSTMState hc{squeeze(h_in[i], 0), squeeze(c_in[i], 0)};
      // Every step's input projection in one product; then the recurrence.
      const std::vector<Tensor> proj = split(linear(x, w.w_ih, w.b_ih), 1, 0);
      std::vector<Tensor> out(steps);
      for (int64_t s = 0; s < steps; ++s) {
        const int64_t t = dir == 1 ? steps - 1 - s : s;
        hc = step(squeeze(proj[t], 0), hc, w.w_hh, w.b_hh);
        out[t] = hc.first;
      }
      outputs.push_back(stack(out, 0));
      h_out.push_back(hc.first);
      c_out.push_back(hc.second);
    }
    x = directions == 1 ? outputs[0] : cat(outputs, -1);
    if (k + 1 < num_layers && dropout > 0 && is_training()) {
      x = streamgrad::dropout(x, dropout, /*training=*/true);
    }
  }
  Tensor h_n = stack(h_out, 0), c_n = stack(c_out, 0);
  if (!batched) {
    x = squeeze(x, 1);
    h_n = squeeze(h_n, 1);
    c_n = squeeze(c_n, 1);
  } else if (batch_first) {
    x = transpose(x, 0, 1);
  }
  return {x, {h_n, c_n}};
}

std::shared_ptr<Module> LSTM::blank_copy() const {
  init::NoInitGuard no_init;
  // Built without dropout, set afterwards: a copy repeats no construction warning.
  auto copy = std::make_shared<LSTM>(input_size, hidden_size, num_layers, bias, batch_first, 0.0,
                                     bidirectional);
  copy->dropout = dropout;
  return copy;
}

}  // namespace nn
}  // namespace streamgrad
