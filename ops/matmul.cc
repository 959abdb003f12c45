// matmul with every rank the reference accepts: 1-D x 1-D is a dot product (0-dim), a 1-D
// first (second) operand is a row (column) that the result drops again, N-D x 1-D or 2-D
// folds the batch into the rows (one gemm, as linear), and otherwise the batch dims (all but
// the last two) broadcast: 2-D and 3-D products run as one kernel ([M,K]x[K,N], or
// [B,M,K]x[B,K,N] where a 2-D operand or a batch of 1 broadcasts over the batch), larger
// ranks are reshaped to 3-D (expanded first where a batch dim broadcasts). bmm is the
// strict 3-D form.
//
// Backward: dA = g @ B^T, dB = A^T @ g, each summed over the batch when that operand was
// broadcast; written with matmul and transpose, so it is differentiable again. For 16-bit
// operands such a batch sum (a conv2d weight's gradient) adds float32 products and rounds
// once, as a float32-accumulating kernel would.
//
// linear(x, W, b) = x @ W^T + b is one gemm whose output starts as the bias (beta = 1),
// not a matmul then an add: one launch, and no [M, N] temporary. Its backward: dx = g @ W,
// dW = g^T @ x, db = the column sums of g.
#include "absl/strings/str_join.h"
#include "engine/grad_mode.h"
#include "ops/autocast_policy.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace streamgrad {
namespace {

using namespace ops_internal;  // NOLINT

std::string shape_str(const Tensor& t) {
  return absl::StrCat("[", absl::StrJoin(t.sizes(), ", "), "]");
}

// `t` as a 3-D kernel view with `batch` members (stride 0 where it broadcasts).
kernels::View batched_view(const Tensor& t, int64_t batch) {
  kernels::View v = t.view();
  if (t.dim() == 2) {
    v.sizes.insert(v.sizes.begin(), batch);
    v.strides.insert(v.strides.begin(), 0);
  } else if (v.sizes[0] != batch) {  // a batch of 1
    v.sizes[0] = batch;
    v.strides[0] = 0;
  }
  return v;
}

// x @ y (3-D, same batch) into a float32 result: for 16-bit operands whose product is
// then summed over the batch, so that the sum adds float32 partial products and rounds
// once. No history (backward only, outside create_graph).
Tensor batched_product_in_float32(const Tensor& x, const Tensor& y) {
  const int64_t batch = x.size(0);
  Tensor out = new_output({batch, x.size(1), y.size(2)}, DType::kFloat32, x.device());
  kernels::matmul(stream_of(out), out.view(), batched_view(x, batch), batched_view(y, batch));
  return out;
}

// `t` (2-D, or a batch of 1) repeated over `batch` (a view).
Tensor batch_of(const Tensor& t, int64_t batch) {
  return expand(t, {batch, t.size(-2), t.size(-1)});
}

// Whether the gradient for an input of `in`'s shape sums a batched 16-bit product over
// the batch (the input was broadcast: a 2-D operand, or a batch of 1, beside g's batch).
bool summed_in_low_precision(const Tensor& g, const InputInfo& in) {
  return is_reduced_floating(g.dtype()) && g.dim() == 3 && g.size(0) > 1 &&
         (in.sizes.size() == 2 || in.sizes[0] == 1) && !grad_mode_enabled();
}

// A 2-D matrix stored transposed (column-major), such as the weight in x @ w^T: its
// gradient is computed in the same layout, so that the transpose back to the parameter is
// contiguous and AccumulateGrad takes it over instead of copying it (the reference's
// layout contract for .grad). Same gemm, operands swapped: (y^T x^T)^T = x y.
bool column_major(const Tensor& t) {
  return t.dim() == 2 && t.size(0) > 1 && t.size(1) > 1 && t.strides()[0] == 1 &&
         t.strides()[1] == t.size(0);
}

struct MatmulBackward final : Node {
  std::string name() const override { return "MatmulBackward"; }
  TensorList apply(TensorList&& grads) override {
    const Tensor& g = grads[0];
    TensorList out(2);
    if (!g.defined()) return out;
    if (needs_grad(*this, 0)) {
      const Tensor bt = transpose(b.unpack("MatmulBackward"), -1, -2);
      const bool summed = summed_in_low_precision(g, a_in);
      if (a_column_major && g.dim() == 2) {
        out[0] = transpose(matmul(b.unpack("MatmulBackward"), transpose(g, 0, 1)), 0, 1);
      } else {
        out[0] = grad_for(summed ? batched_product_in_float32(g, batch_of(bt, g.size(0)))
                                 : matmul(g, bt),
                          a_in);
      }
    }
    if (needs_grad(*this, 1)) {
      const Tensor a_saved = a.unpack("MatmulBackward");
      const bool summed = summed_in_low_precision(g, b_in);
      if (b_column_major && g.dim() == 2) {
        out[1] = transpose(matmul(transpose(g, 0, 1), a_saved), 0, 1);
      } else {
        const Tensor at = transpose(a_saved, -1, -2);
        out[1] = grad_for(summed ? batched_product_in_float32(batch_of(at, g.size(0)), g)
                                 : matmul(at, g),
                          b_in);
      }
    }
    return out;
  }
  void release_variables() override {
    a.reset();
    b.reset();
  }
  SavedTensor a, b;
  InputInfo a_in, b_in;
  bool a_column_major = false, b_column_major = false;
};

struct LinearBackward final : Node {
  std::string name() const override { return "LinearBackward"; }
  TensorList apply(TensorList&& grads) override {
    const Tensor& g = grads[0];
    TensorList out(has_bias ? 3 : 2);
    if (!g.defined()) return out;
    if (needs_grad(*this, 0)) {
      out[0] = grad_for(matmul(g, weight.unpack("LinearBackward")), input_in);
    }
    if (needs_grad(*this, 1)) {
      out[1] = grad_for(matmul(transpose(g, 0, 1), input.unpack("LinearBackward")), weight_in);
    }
    if (has_bias && needs_grad(*this, 2)) out[2] = grad_for(sum(g, {0}), bias_in);
    return out;
  }
  void release_variables() override {
    input.reset();
    weight.reset();
  }
  SavedTensor input, weight;
  InputInfo input_in, weight_in, bias_in;
  bool has_bias = false;
};

}  // namespace

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  SG_AUTOCAST(kLowerPrecision, linear, input, weight, bias);
  check_defined(input, "linear", "the input");
  check_defined(weight, "linear", "the weight");
  check_same_device(input, weight, "linear");
  check_floating(input, "linear");
  check_same_dtype(input, weight, "linear");
  SG_CHECK(weight.dim() == 2, ValueError, "linear: expected a [out, in] weight, got ",
           weight.describe());
  SG_CHECK(input.dim() >= 1 && input.size(-1) == weight.size(1), ValueError, "linear: input ",
           input.describe(), " has ", input.dim() == 0 ? 0 : input.size(-1),
           " features, weight ", weight.describe(), " expects ", weight.size(1));
  if (bias.defined()) {
    check_same_device(input, bias, "linear");
    check_same_dtype(input, bias, "linear");
    SG_CHECK(bias.sizes() == Shape{weight.size(0)}, ValueError, "linear: bias ", bias.describe(),
             " must be [", weight.size(0), "]");
  }
  Shape out_shape = input.sizes();
  out_shape.back() = weight.size(0);
  const Tensor x2 = input.dim() == 2 ? input : reshape(input, {-1, weight.size(1)});
  Tensor out = new_output({x2.size(0), weight.size(0)}, input.dtype(), input.device());
  kernels::View wt = weight.view();  // W^T: the same memory, strides swapped
  std::swap(wt.sizes[0], wt.sizes[1]);
  std::swap(wt.strides[0], wt.strides[1]);
  const kernels::View bv = bias.defined() ? bias.view() : kernels::View();
  kernels::matmul(stream_of(out), out.view(), x2.view(), wt, bias.defined() ? &bv : nullptr);
  if (any_requires_grad({x2, weight, bias})) {
    auto node = std::make_shared<LinearBackward>();
    if (weight.requires_grad()) node->input = SavedTensor(x2);
    if (x2.requires_grad()) node->weight = SavedTensor(weight);
    node->input_in = meta_of(x2);
    node->weight_in = meta_of(weight);
    node->has_bias = bias.defined();
    if (bias.defined()) node->bias_in = meta_of(bias);
    wire(node, bias.defined() ? TensorList{x2, weight, bias} : TensorList{x2, weight}, {out});
  }
  return input.dim() == 2 ? out : reshape(out, out_shape);
}

namespace {

// The product of 2-D or 3-D operands (checked by the callers), as one kernel.
Tensor matmul_3d(const Tensor& a, const Tensor& b) {
  const int64_t m = a.size(-2), n = b.size(-1);
  Tensor out;
  if (a.dim() == 2 && b.dim() == 2) {
    out = new_output({m, n}, a.dtype(), a.device());
    kernels::matmul(stream_of(out), out.view(), a.view(), b.view());
  } else {
    const int64_t ba = a.dim() == 3 ? a.size(0) : 1, bb = b.dim() == 3 ? b.size(0) : 1;
    SG_CHECK(ba == bb || ba == 1 || bb == 1, ValueError, "matmul: batch sizes of ", shape_str(a),
             " and ", shape_str(b), " differ (", ba, " vs ", bb, "); they must be equal or 1");
    const int64_t batch = ba == 1 ? bb : ba;
    out = new_output({batch, m, n}, a.dtype(), a.device());
    kernels::matmul(stream_of(out), out.view(), batched_view(a, batch), batched_view(b, batch));
  }
  if (auto node = record_product<MatmulBackward>(a, b, out)) {
    node->a_column_major = column_major(a);
    node->b_column_major = column_major(b);
  }
  return out;
}

int64_t product(const Shape& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

// An operand of rank >= 2 as [B, R, C] over the broadcast batch `batch` (B its elements):
// a view where its own batch is `batch` already, else expanded first (which copies).
Tensor as_batch(const Tensor& t, const Shape& batch) {
  const int64_t r = t.size(-2), c = t.size(-1);
  const Shape own(t.sizes().begin(), t.sizes().end() - 2);
  if (own == batch) return reshape(t, {product(batch), r, c});
  Shape full = batch;
  full.push_back(r);
  full.push_back(c);
  return reshape(expand(t, full), {product(batch), r, c});
}

void check_operands(const Tensor& a, const Tensor& b, const char* op) {
  check_defined(a, op, "the first input");
  check_defined(b, op, "the second input");
  check_same_device(a, b, op);
  check_floating(a, op);
  check_same_dtype(a, b, op);
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  SG_AUTOCAST(kLowerPrecision, matmul, a, b);
  check_operands(a, b, "matmul");
  const int64_t da = a.dim(), db = b.dim();
  SG_CHECK(da >= 1 && db >= 1, ValueError, "matmul: both inputs need at least one dimension, "
           "got ", a.describe(), " and ", b.describe(), "; use mul for a 0-dim factor");
  const int64_t k = a.size(-1), kb = db == 1 ? b.size(0) : b.size(-2);
  SG_CHECK(kb == k, ValueError, "matmul: cannot multiply ", shape_str(a), " by ", shape_str(b),
           ": a has ", k, da == 1 ? " elements" : " columns", " but b has ", kb,
           db == 1 ? " elements" : " rows", " (", a.describe(), " @ ", b.describe(), ")");
  if (da <= 3 && db <= 3 && da >= 2 && db >= 2 && !(da == 3 && db == 2)) return matmul_3d(a, b);
  if (da == 1 && db == 1) return reshape(matmul_3d(reshape(a, {1, k}), reshape(b, {k, 1})), {});
  if (da == 2 && db == 1) return squeeze(matmul_3d(a, unsqueeze(b, 1)), 1);
  if (db <= 2) {
    // [..., M, K] @ [K, N] (or [K]): the batch folded into the rows, one gemm.
    const Tensor a2 = da == 1 ? unsqueeze(a, 0) : reshape(a, {-1, k});
    const Tensor out = matmul_3d(a2, db == 1 ? unsqueeze(b, 1) : b);
    Shape shape(a.sizes().begin(), a.sizes().end() - 1);
    if (db == 2) shape.push_back(b.size(1));
    return reshape(out, shape);
  }
  // b has a batch: a 1-D a is a row, a 2-D a broadcasts unexpanded; batches broadcast.
  const Tensor a_ = da == 1 ? unsqueeze(a, 0) : a;
  const Shape batch_a(a_.sizes().begin(), a_.sizes().end() - 2);
  const Shape batch_b(b.sizes().begin(), b.sizes().end() - 2);
  const Shape batch = broadcast_shapes(batch_a, batch_b, "matmul");
  const Tensor out = matmul_3d(a_.dim() == 2 ? a_ : as_batch(a_, batch), as_batch(b, batch));
  Shape shape = batch;
  if (da > 1) shape.push_back(a.size(-2));
  shape.push_back(b.size(-1));
  return reshape(out, shape);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  SG_AUTOCAST(kLowerPrecision, bmm, a, b);
  check_operands(a, b, "bmm");
  SG_CHECK(a.dim() == 3 && b.dim() == 3, ValueError, "bmm: expected two 3-D batches, got ",
           a.describe(), " and ", b.describe(), "; matmul broadcasts other ranks");
  SG_CHECK(b.size(0) == a.size(0) && b.size(1) == a.size(2), ValueError,
           "bmm: expected the second batch to be [", a.size(0), ", ", a.size(2), ", N] for ",
           shape_str(a), ", got ", shape_str(b), " (", a.describe(), " @ ", b.describe(), ")");
  return matmul_3d(a, b);
}

}  // namespace streamgrad
