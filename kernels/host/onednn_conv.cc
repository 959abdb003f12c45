// Convolution on cpu and sim streams through oneDNN (host_kernels.h, onednn_conv2d), the
// host's counterpart of cuDNN on cuda: oneDNN's direct convolutions (JIT-compiled for the
// processor) replace unfold + matmul, whose column buffer is kH x kW times the input and
// whose small-channel products spend as long packing operands as multiplying them.
//
// The user's tensors are plain (NCHW, OIHW); the fast kernels want blocked layouts (for
// example nChw16c), which oneDNN chooses. So a plan (onednn_plan.h) is a primitive plus a
// reorder in for each input and out for the result whose layout differs. Both gradients in
// one launch (onednn_conv2d_backward) share grad_out's blocked copy: made once, for the
// input gradient, and read again by the weight gradient where its primitive wants the same
// layout (the ResNet's reorders took a third as long as its convolutions, and this one
// was made twice; bench/RESULTS.md).
//
// A launch is cut along the batch into parts whose blocked copies take at most
// kChunkBytes, and each thread runs the parts it takes one after another through one
// workspace: a part's copies are made, read by the primitive and (the result's) read back
// while they are still in the core's cache. Made whole, a copy of a ResNet activation went
// out to memory and came back: on an Intel Xeon VM a 3.2 MB reorder ran as slowly as a
// memcpy from memory, and the ResNet step's reorders took 37 ms of 160 (bench/RESULTS.md).
// The weights' blocked copy, which every part of a forward or input-gradient launch reads,
// is made once per launch, before the parts.
// The workspaces and every scratchpad come from the caching allocator on the launch's
// stream (stream-ordered, as cuDNN's), so that host memory stays accounted for and a
// step's buffers are reused step after step.
//
// Threads: oneDNN here is built on OpenMP, whose idle threads spin after every parallel
// region (about 30 ms of CPU per ResNet step at two threads, on the core the kernels' pool
// needed next; bench/RESULTS.md), as OpenBLAS's do (kernels/host/gemm.h). So oneDNN runs
// with one OpenMP thread, always, and a launch of at least 2 * kGemmGrain multiply-adds, or
// whose images and results hold at least 2 * kParallelGrain values, is
// shared out over up to get_num_threads() threads (slots), each taking the next part not
// yet taken, each part a one-thread plan over its images, over the kernels' pool
// (kernels/host/parallel.h), whose idle workers spin for a while (get_thread_spin_us())
// before they sleep.
// The weight gradient sums over the batch: each part writes its own, and they are added in
// part order. The cut depends only on the shape and the thread count, so a run repeats bit
// for bit; results may differ between thread counts and batch sizes in the last bits, as
// libtorch's do.
// Under ThreadSanitizer, which cannot see into oneDNN, nothing is cut, and each launch
// announces its tensors and workspace to it (tsan_announce.h).
// Thread-safety: plans are shared and immutable (onednn_plan.h); each slot of a launch has
// its own workspace and scratchpad.
// Failure: a shape oneDNN cannot plan is an InternalError naming the pass and the shapes
// (the front door admits only what oneDNN takes).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "kernels/host/gemm.h"
#include "kernels/host/host_kernels.h"
#include "kernels/host/onednn_plan.h"
#include "kernels/host/onednn_threads.h"
#include "kernels/host/parallel.h"
#include "kernels/host/tsan_announce.h"
#include "runtime/backend/cpu_settings.h"
#include "runtime/base/error.h"
#include "runtime/memory/storage.h"

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace {

using onednn::aligned;
using onednn::engine;
using onednn::memory;
using onednn::Operand;
using onednn::Plan;
using onednn::plan_for;
using onednn::run;
using onednn::scratchpad;

// At most this many bytes of blocked copies per part of a launch (see the file's comment):
// half of an Intel Xeon core's 2 MiB of L2 (512 KiB and 2 MiB measured close to it),
// all of an AMD Zen 5's.
constexpr size_t kChunkBytes = size_t{1} << 20;

// How many threads a launch is shared out over now (see the file's comment). The values
// count as well as the multiply-adds: every part copies its images in and its results out,
// an element-wise pass over memory that a 1 x 1 convolution's few multiply-adds do not
// show. A ResNet's 1 x 1 stride-2 downsamplings (6.4M multiply-adds, 0.6-1.2M values) ran
// on one thread, about 1 ms forward and 1.7 backward each, while the other idled
// (bench/RESULTS.md).
int64_t launch_slots(const ConvShape& s) {
#ifdef SG_HOST_UNDER_TSAN
  (void)s;
  return 1;
#else
  const int64_t macs = s.n * s.o * s.oh * s.ow * (s.c / s.groups) * s.kh * s.kw;
  const int64_t moved = s.n * (s.c * s.h * s.w + s.o * s.oh * s.ow);
  const int64_t grains = std::max(macs / kGemmGrain, moved / kParallelGrain);
  return std::max<int64_t>(1, std::min<int64_t>({get_num_threads(), s.n, grains}));
#endif
}

// Into how many parts along the batch a launch is cut: enough that one part's blocked
// copies (the image and the result; the image twice for `both` gradients) fit in
// kChunkBytes, as many for each of `slots` threads, but at most one per image.
int64_t launch_parts(const ConvShape& s, int64_t slots, bool both) {
#ifdef SG_HOST_UNDER_TSAN
  (void)s;
  (void)both;
  return slots;
#else
  const int64_t image = s.c * s.h * s.w, result = s.o * s.oh * s.ow;
  const int64_t per_image = (both ? 2 : 1) * image + result;
  const int64_t fit = std::max<int64_t>(
      1, static_cast<int64_t>(kChunkBytes / sizeof(float)) / std::max<int64_t>(per_image, 1));
  const int64_t per_slot = ((s.n + slots - 1) / slots + fit - 1) / fit;
  return std::min(s.n, per_slot * slots);
#endif
}

// One part of a cut launch: its images [first, first + plan's batch), its plan, and
// (weight gradient, parts after the first; the first writes the result itself) where it
// writes its partial sum.
struct Part {
  int64_t first = 0;
  std::shared_ptr<const Plan> plan;
  size_t partial = 0;
};

// The parts of one launch of a pass, and their workspaces: one per slot (thread), as
// large as the largest part's, which every part the slot runs reuses while it is in the
// processor's cache.
struct Parts {
  std::vector<Part> list;
  size_t ws = 0;       // where slot 0's workspace starts
  size_t ws_each = 0;  // each slot's
  // The weights' blocked copy that every part reads (forward and input gradient, when the
  // parts' plans agree on its layout): where it is, or kNone (each part makes its own).
  static constexpr size_t kNone = ~size_t{0};
  size_t weights = kNone;
  size_t workspace(int64_t slot) const { return ws + static_cast<size_t>(slot) * ws_each; }
};

// The parts of a launch of `pass` over `s` cut into `count` parts for `slots` threads,
// their partial sums and workspaces from `bytes` on (advanced).
Parts plan_parts(const char* name, ConvPass pass, const ConvShape& s, const Window2d& w,
                 int64_t slots, int64_t count, size_t& bytes) {
  const int64_t weight_numel = s.o * (s.c / s.groups) * s.kh * s.kw;
  Parts parts;
  parts.list.resize(static_cast<size_t>(count));
  std::shared_ptr<const Plan> last;
  int64_t last_n = 0;
  for (int64_t i = 0, first = 0; i < count; ++i) {
    ConvShape sub = s;
    sub.n = s.n / count + (i < s.n % count ? 1 : 0);
    Part& p = parts.list[static_cast<size_t>(i)];
    p.first = first;
    // Parts come in at most two sizes, the larger first: one plan lookup per size.
    if (sub.n != last_n) last = plan_for(name, pass, sub, w);
    last_n = sub.n;
    p.plan = last;
    parts.ws_each = std::max(parts.ws_each, aligned(p.plan->workspace));
    if (pass == ConvPass::kBackwardWeight && i > 0) {
      p.partial = bytes;
      bytes += aligned(static_cast<size_t>(weight_numel) * sizeof(float));
    }
    first += sub.n;
  }
  parts.ws = bytes;
  bytes += static_cast<size_t>(slots) * parts.ws_each;
  const Operand& c = parts.list.front().plan->c;
  bool shared = pass != ConvPass::kBackwardWeight && c.reordered && count > 1;
  for (const Part& p : parts.list) shared = shared && p.plan->c.inner == c.inner;
  if (shared) {
    parts.weights = bytes;
    bytes += aligned(c.inner.get_size());
  }
  return parts;
}

// The weights' blocked copy of `parts` made from the user's `c`, once for all of them
// (each part made its own before: a weight reorder per part, ~2 ms of a one-thread ResNet
// step, bench/RESULTS.md); slot 0's workspace, free until the parts start, holds the
// reorder's scratchpad. Returns where the copy is, or nullptr where there is none.
const char* share_weights(const Parts& parts, const void* c, char* ws) {
  if (parts.weights == Parts::kNone) return nullptr;
#ifdef SG_HOST_UNDER_TSAN
  std::lock_guard<std::mutex> lk(onednn::onednn_mutex());
#endif
  const OneOmpThread one;
  const Plan& plan = *parts.list.front().plan;
  dnnl::stream strm(engine());
  // Read only: oneDNN's memory takes a void*.
  const memory user(plan.c.user, engine(), const_cast<void*>(c));
  plan.c.reorder.execute(strm, {{DNNL_ARG_FROM, user},
                                {DNNL_ARG_TO, memory(plan.c.inner, engine(), ws + parts.weights)},
                                {DNNL_ARG_SCRATCHPAD, scratchpad(plan, ws + parts.workspace(0))}});
  strm.wait();
  return ws + parts.weights;
}

// Where part `p` of an input-gradient launch, run in workspace `at`, left its blocked copy
// of grad_out for the weight gradient's part `q` of the same images, or nullptr when q
// needs its own.
const char* shared_grad_out(const Part& p, const Part& q, const char* ws, size_t at) {
  const Operand& mine = p.plan->b;
  if (!mine.reordered || !q.plan->b.reordered || mine.inner != q.plan->b.inner) return nullptr;
  return ws + at + mine.offset;
}

// The pointers of one pass's operands, each its whole batch's (ConvPass names a, b, c).
struct Operands {
  void* a;
  const void* b;
  const void* c;
};

// Runs part `p` of a launch of `pass` (a weight gradient's later parts into their partial
// sums) in the workspace at ws + at, with grad_out's and the weights' blocked copies
// `made_b` and `made_c` where they are made already.
void run_part(ConvPass pass, const ConvShape& s, const Part& p, bool first_part,
              const Operands& o, char* ws, size_t at, const char* made_b = nullptr,
              const char* made_c = nullptr) {
  const int64_t image = s.c * s.h * s.w, result = s.o * s.oh * s.ow;
  const auto* bf = static_cast<const float*>(o.b);
  const auto* cf = static_cast<const float*>(o.c);
  auto* af = static_cast<float*>(o.a);
  switch (pass) {
    case ConvPass::kForward:  // a result, b image, c weight
      run(*p.plan, af + p.first * result, bf + p.first * image, cf, ws + at, nullptr, made_c);
      break;
    case ConvPass::kBackwardInput:  // a image, b result, c weight
      run(*p.plan, af + p.first * image, bf + p.first * result, cf, ws + at, nullptr, made_c);
      break;
    case ConvPass::kBackwardWeight:  // a weight, b result, c image
      run(*p.plan, first_part ? o.a : ws + p.partial, bf + p.first * result,
          cf + p.first * image, ws + at, made_b);
      break;
  }
}

// A weight gradient's later parts' partial sums added into the first's, in part order.
void add_partials(const ConvShape& s, const std::vector<Part>& parts, void* a, const char* ws) {
  const int64_t weight_numel = s.o * (s.c / s.groups) * s.kh * s.kw;
  auto* af = static_cast<float*>(a);
  for (size_t i = 1; i < parts.size(); ++i) {
    const auto* partial = reinterpret_cast<const float*>(ws + parts[i].partial);
    for (int64_t j = 0; j < weight_numel; ++j) af[j] += partial[j];
  }
}

// fn(i, slot) for each of `count` parts: in order on the calling thread when there is one
// slot, else the slots over the kernels' pool, each slot taking the next part not yet
// taken. Claimed, not dealt out in advance: on the virtual machines measured, one of two
// processors ran the same work up to a quarter slower from step to step, and the other
// then waited for it at the end of every launch (bench/RESULTS.md). Which slot runs a
// part changes only which workspace it uses, not its bits.
template <typename Fn>
void each_part(size_t count, int64_t slots, Fn&& fn) {
  if (slots == 1) {
    for (size_t i = 0; i < count; ++i) fn(i, 0);
    return;
  }
  std::atomic<size_t> next{0};
  parallel_for(0, slots, 1, [&](int64_t slot, int64_t) {
    for (size_t i = next.fetch_add(1, std::memory_order_relaxed); i < count;
         i = next.fetch_add(1, std::memory_order_relaxed)) {
      fn(i, slot);
    }
  });
}

// What a launch's oneDNN calls read and write, told to ThreadSanitizer, which cannot see
// into oneDNN (tsan_announce.h): the whole tensors (plain, contiguous) and the workspace.
void announce_launch(ConvPass pass, const ConvShape& s, const Operands& o, const char* ws,
                     size_t bytes) {
  const int64_t image = s.n * s.c * s.h * s.w, result = s.n * s.o * s.oh * s.ow;
  const int64_t weight = s.o * (s.c / s.groups) * s.kh * s.kw;
  const int64_t a = pass == ConvPass::kForward ? result
                    : pass == ConvPass::kBackwardInput ? image : weight;
  const int64_t b = pass == ConvPass::kForward ? image : result;
  const int64_t c = pass == ConvPass::kBackwardWeight ? image : weight;
  announce(o.b, b, 1, sizeof(float), false);
  announce(o.c, c, 1, sizeof(float), false);
  announce(o.a, a, 1, sizeof(float), true);
  announce(ws, static_cast<int64_t>(bytes), 1, 1, true);
}

}  // namespace

void onednn_conv2d(const Stream& stream, const LaunchSpec& spec, ConvPass pass, DType dt,
                   const ConvShape& s, const Window2d& w, void* a, const void* b,
                   const void* c) {
  SG_CHECK(dt == DType::kFloat32, InternalError, spec.name,
           ": oneDNN convolution takes float32 (the front door admits nothing else)");
  size_t bytes = 0;
  const int64_t slots = launch_slots(s);
  Parts parts = plan_parts(spec.name, pass, s, w, slots, launch_parts(s, slots, false), bytes);
  // Stream-ordered: handed out again only after this launch's work.
  Storage workspace = Storage::allocate(std::max<size_t>(bytes, 1), stream);
  char* ws = static_cast<char*>(workspace.data());
  dispatch::enqueue(stream, spec, [parts = std::move(parts), pass, s, o = Operands{a, b, c},
                                   slots, ws, bytes] {
    announce_launch(pass, s, o, ws, bytes);
    const char* weights = share_weights(parts, o.c, ws);
    each_part(parts.list.size(), slots, [&](size_t i, int64_t slot) {
      run_part(pass, s, parts.list[i], i == 0, o, ws, parts.workspace(slot), nullptr, weights);
    });
    if (pass == ConvPass::kBackwardWeight) add_partials(s, parts.list, o.a, ws);
  });
}

void onednn_conv2d_backward(const Stream& stream, const LaunchSpec& spec, DType dt,
                            const ConvShape& s, const Window2d& w, void* grad_in,
                            void* grad_weight, const void* grad_out, const void* in,
                            const void* weight) {
  SG_CHECK(dt == DType::kFloat32, InternalError, spec.name,
           ": oneDNN convolution takes float32 (the front door admits nothing else)");
  size_t bytes = 0;
  // Both cut the batch alike: part i of one covers the images of part i of the other, and
  // the same slot runs the two, the weight gradient's right after the input gradient's.
  const int64_t slots = launch_slots(s), count = launch_parts(s, slots, true);
  Parts data = plan_parts(spec.name, ConvPass::kBackwardInput, s, w, slots, count, bytes);
  Parts weights = plan_parts(spec.name, ConvPass::kBackwardWeight, s, w, slots, count, bytes);
  Storage workspace = Storage::allocate(std::max<size_t>(bytes, 1), stream);
  char* ws = static_cast<char*>(workspace.data());
  dispatch::enqueue(stream, spec, [data = std::move(data), weights = std::move(weights), s,
                                   gi = Operands{grad_in, grad_out, weight},
                                   gw = Operands{grad_weight, grad_out, in}, slots, ws,
                                   bytes] {
    announce_launch(ConvPass::kBackwardInput, s, gi, ws, bytes);
    announce_launch(ConvPass::kBackwardWeight, s, gw, nullptr, 0);
    const char* blocked_weight = share_weights(data, gi.c, ws);
    each_part(data.list.size(), slots, [&](size_t i, int64_t slot) {
      const Part &d = data.list[i], &wt = weights.list[i];
      const size_t at = data.workspace(slot);
      run_part(ConvPass::kBackwardInput, s, d, i == 0, gi, ws, at, nullptr, blocked_weight);
      run_part(ConvPass::kBackwardWeight, s, wt, i == 0, gw, ws, weights.workspace(slot),
               shared_grad_out(d, wt, ws, at));
    });
    add_partials(s, weights.list, gw.a, ws);
  });
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad
