// The operator catalogue: one or more checkable entries for every function declared in
// ops/ops.h, each a function of a TensorList with a factory of valid inputs, for
// gradcheck / gradgradcheck / check_stream_consistency (gradcheck/gradcheck.h), the
// catalogue test and tools/gradcheck.
//
//   for (const OpSpec& op : op_catalogue()) {
//     TensorList in = op.make_inputs(Device("sim:0"), /*seed=*/0);
//     GradcheckOptions o; o.raise_exception = false;
//     GradcheckResult r = gradcheck(op.fn, in, o);
//   }
//
// Naming: an entry is named after the ops.h function it exercises, either exactly ("add",
// "add_", "max") or with a variant suffix after an underscore ("add_broadcast",
// "add__broadcast" for the in-place add_, "mul_scalar" for mul(Tensor, double)). The
// catalogue test parses ops.h and requires an entry for every declared function.
//
// Inputs: float64 leaves (gradcheck warns about other dtypes) on the requested device, values
// drawn from a host generator seeded with `seed` alone (independent of manual_seed), in
// each op's valid domain: positive for log/sqrt/fractional pow, away from 0 for relu/abs
// kinks and divisors, pairwise distinct for max/min. At most 12 elements per input, so
// full Jacobians stay cheap. Non-contiguous entries get strided leaves (a transposed or
// every-other-column view, detached so it is a leaf that keeps its layout): gradcheck
// perturbs its inputs in place, so they must be leaves. Index inputs are int64 and masks
// (where's condition, masked_fill's mask) bool; neither requires grad. Entries whose
// outputs leave the input's device (to(device)) name the target with peer_device().
// In-place ops are wrapped: the input is cloned first and the clone modified, so that
// gradients flow back to the leaf.
//
// Thread-safety: op_catalogue() is built once (thread-safe static) and immutable; fn and
// make_inputs may be called from any thread, as the ops themselves.
// Failure: make_inputs throws DeviceError for an absent device; fn throws what the op
// throws (ValueError, DeviceError, Error), e.g. DeviceError on cuda until cuda kernels
// exist.
#ifndef STREAMGRAD_GRADCHECK_CATALOGUE_H_
#define STREAMGRAD_GRADCHECK_CATALOGUE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/node.h"
#include "runtime/base/device.h"

namespace streamgrad {

struct OpSpec {
  std::string name;  // "add", "add_scalar", "matmul_batched", "mul__scalar", ...
  std::function<TensorList(const TensorList&)> fn;
  std::function<TensorList(Device, uint64_t seed)> make_inputs;
  bool twice_differentiable = true;  // whether gradgradcheck applies
  std::string notes;                 // the variant: shapes, layout, domain
};

// Every entry, in ops.h order. Names are unique.
const std::vector<OpSpec>& op_catalogue();

// The entry named `name`, or nullptr.
const OpSpec* find_op(const std::string& name);

// Where to(device) entries send a tensor living on `d`: another device of the same kind
// (sim:0 -> sim:1) when there is one, else cpu; from cpu, sim:0 when present, else cpu.
Device peer_device(Device d);

}  // namespace streamgrad

#endif  // STREAMGRAD_GRADCHECK_CATALOGUE_H_
