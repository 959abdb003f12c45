// matmul: [M,K]x[K,N], and batched [B,M,K]x[B,K,N] where a 2-D operand (or a batch of 1)
// broadcasts over the batch.
//
// Backward: dA = g @ B^T, dB = A^T @ g, each summed over the batch when that operand was
// broadcast; written with matmul and transpose, so it is differentiable again.
#include "absl/strings/str_join.h"
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

struct MatmulBackward final : Node {
  std::string name() const override { return "MatmulBackward"; }
  TensorList apply(TensorList&& grads) override {
    const Tensor& g = grads[0];
    TensorList out(2);
    if (!g.defined()) return out;
    if (needs_grad(*this, 0)) {
      const Tensor bv = b.unpack("MatmulBackward");
      out[0] = grad_for(matmul(g, transpose(bv, -1, -2)), a_in);
    }
    if (needs_grad(*this, 1)) {
      const Tensor av = a.unpack("MatmulBackward");
      out[1] = grad_for(matmul(transpose(av, -1, -2), g), b_in);
    }
    return out;
  }
  void release_variables() override {
    a.reset();
    b.reset();
  }
  SavedTensor a, b;
  InputInfo a_in, b_in;
};

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_defined(a, "matmul", "the first input");
  check_defined(b, "matmul", "the second input");
  check_same_device(a, b, "matmul");
  check_floating(a, "matmul");
  check_same_dtype(a, b, "matmul");
  SG_CHECK((a.dim() == 2 || a.dim() == 3) && (b.dim() == 2 || b.dim() == 3), ValueError,
           "matmul: expected 2-D or 3-D inputs, got ", a.describe(), " and ", b.describe(),
           "; reshape vectors to [1, K] or [K, 1]");
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  SG_CHECK(b.size(-2) == k, ValueError, "matmul: cannot multiply ", shape_str(a), " by ",
           shape_str(b), ": a has ", k, " columns but b has ", b.size(-2), " rows (", a.describe(),
           " @ ", b.describe(), ")");
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
  record_product<MatmulBackward>(a, b, out);
  return out;
}

}  // namespace streamgrad
