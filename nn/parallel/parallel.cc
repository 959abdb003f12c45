#include "nn/parallel/parallel.h"

#include <exception>
#include <thread>

#include "absl/strings/str_cat.h"
#include "engine/grad_mode.h"
#include "ops/op_utils.h"
#include "ops/ops.h"
#include "runtime/base/error.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace nn {
namespace parallel {

std::vector<Tensor> scatter(const Tensor& input, const std::vector<Device>& devices, int64_t dim) {
  SG_CHECK(input.defined(), ValueError, "scatter: the input is undefined");
  SG_CHECK(!devices.empty(), ValueError, "scatter: no devices to scatter ", input.describe(),
           " to; pass at least one");
  SG_CHECK(input.dim() > 0, ValueError, "scatter: cannot split the 0-d tensor ", input.describe(),
           "; give it a batch dimension");
  const int64_t d = ops_internal::wrap_dim(dim, input.dim(), "scatter");
  const int64_t n = input.size(d), k = static_cast<int64_t>(devices.size());
  SG_CHECK(n > 0, ValueError, "scatter: ", input.describe(), " has no elements along dim ", d,
           " to split");
  const int64_t step = (n + k - 1) / k;  // chunk()'s part size
  std::vector<Tensor> parts;
  for (int64_t start = 0, i = 0; start < n; start += step, ++i) {
    const Tensor part = narrow(input, d, start, std::min(step, n - start));
    parts.push_back(to(part, devices[static_cast<size_t>(i)]));
  }
  return parts;
}

Tensor gather(const std::vector<Tensor>& tensors, Device device, int64_t dim) {
  SG_CHECK(!tensors.empty(), ValueError, "gather: no tensors to gather onto ", device.str());
  const bool scalars = tensors.front().defined() && tensors.front().dim() == 0;
  std::vector<Tensor> moved;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    SG_CHECK(t.defined(), ValueError, "gather: tensor ", i, " is undefined");
    SG_CHECK((t.dim() == 0) == scalars, ValueError, "gather: tensor ", i, " ", t.describe(),
             " mixes 0-d and batched tensors; gather one kind at a time");
    // A loss per replica: gathered into a vector of them, as the reference does.
    moved.push_back(to(scalars ? unsqueeze(t, 0) : t, device));
  }
  return cat(moved, scalars ? 0 : ops_internal::wrap_dim(dim, moved.front().dim(), "gather"));
}

std::vector<Tensor> parallel_apply(const std::vector<std::shared_ptr<Module>>& modules,
                                   const std::vector<Tensor>& inputs) {
  SG_CHECK(modules.size() == inputs.size(), ValueError, "parallel_apply: ", modules.size(),
           " modules but ", inputs.size(), " inputs; pass one input per module");
  const size_t n = modules.size();
  std::vector<Tensor> outputs(n);
  std::vector<std::exception_ptr> errors(n);
  const bool grad_enabled = grad_mode_enabled();
  std::vector<Stream> streams;
  for (size_t i = 0; i < n; ++i) {
    SG_CHECK(modules[i] != nullptr && inputs[i].defined(), ValueError, "parallel_apply: module ", i,
             " or its input is missing");
    // The caller's current stream of each device, which the workers make theirs: the
    // inputs were copied there (scatter), so work there is ordered after them.
    streams.push_back(current_stream(inputs[i].device()));
  }
  auto work = [&](size_t i) {
    try {
      GradModeGuard grad(grad_enabled);
      StreamGuard on(streams[i]);  // also the current device
      outputs[i] = modules[i]->forward(inputs[i]);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  if (n == 1) {
    work(0);
  } else {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < n; ++i) threads.emplace_back(work, i);
    for (std::thread& t : threads) t.join();
  }
  for (size_t i = 0; i < n; ++i) {
    if (errors[i] == nullptr) continue;
    const std::string where =
        absl::StrCat("parallel_apply: replica ", i, " on ", inputs[i].device().str(), ": ");
    try {
      std::rethrow_exception(errors[i]);
    } catch (const Error& e) {
      e.rethrower()(where + e.what());
    }
  }
  return outputs;
}

}  // namespace parallel
}  // namespace nn
}  // namespace streamgrad
