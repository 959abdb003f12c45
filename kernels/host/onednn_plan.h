// Private to the host's oneDNN convolution (onednn_conv.cc): plans, each a oneDNN
// primitive for one pass over one shape plus a reorder in for each input and out for the
// result whose layout differs from the user's plain one (NCHW, OIHW), as the reference
// framework's oneDNN path does per call; the blocked copies and the primitives' scratchpad
// live in a caller's workspace, at the offsets the plan gives.
//
// Thread-safety: plans are made one at a time (under onednn_mutex()) and are immutable
// once made, shared through onednn_conv_plan_cache(); run() may be called concurrently
// with separate workspaces (one at a time under ThreadSanitizer, which cannot see into
// oneDNN). Every call into oneDNN holds a OneOmpThread (onednn_threads.h).
// Failure: a shape oneDNN cannot plan is an InternalError naming the pass and the shapes
// (the front door admits only what oneDNN takes).
#ifndef STREAMGRAD_KERNELS_HOST_ONEDNN_PLAN_H_
#define STREAMGRAD_KERNELS_HOST_ONEDNN_PLAN_H_

#include <cstddef>
#include <memory>
#include <mutex>

#include "kernels/host/host_kernels.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace onednn {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr size_t kAlign = 64;

inline size_t aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

std::mutex& onednn_mutex();
dnnl::engine& engine();

// One operand of the primitive: the user's plain layout, the primitive's, and the reorder
// between them (in for inputs, out for the result) where they differ.
struct Operand {
  int arg = 0;  // DNNL_ARG_*
  memory::desc user, inner;
  bool reordered = false;
  dnnl::reorder reorder;
  size_t offset = 0;  // of the blocked copy in the workspace
};

// a, b, c as ConvPass names them (kernels/dispatch/kernel_args.h); a is written.
struct Plan {
  dnnl::primitive conv;
  Operand a, b, c;
  size_t scratch = 0;    // bytes at the workspace's start, shared by every step
  size_t workspace = 0;  // scratch + the blocked copies
};

// The plan of `pass` over `s` and `w`, from the cache or made now. `name` is the
// launch's (onednn_conv2d_backward_input, ...), for the error message.
std::shared_ptr<const Plan> plan_for(const char* name, ConvPass pass, const ConvShape& s,
                                     const Window2d& w);

// The scratchpad of `plan`'s primitives, at the start of a workspace.
memory scratchpad(const Plan& plan, char* at);

// Runs `plan` on the calling thread: the inputs' reorders, the primitive, the result's.
// `made_b`, where given, is b's blocked copy made already (by the input gradient's plan of
// the same images, whose copy of grad_out has the same layout), which is then not made
// again; `made_c` likewise c's (the weights, copied once for every part of a launch).
void run(const Plan& plan, void* a, const void* b, const void* c, char* ws,
         const char* made_b = nullptr, const char* made_c = nullptr);

}  // namespace onednn
}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_HOST_ONEDNN_PLAN_H_
