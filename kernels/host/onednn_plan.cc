// oneDNN's convolution plans for the host (kernels/host/onednn_plan.h): making them,
// caching them, and running one on the calling thread.
#include "kernels/host/onednn_plan.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "kernels/host/onednn_threads.h"
#include "kernels/plan_cache.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace onednn {

// Held while oneDNN makes a plan, and under ThreadSanitizer while it runs one: oneDNN
// publishes its internal objects between threads through synchronisation ThreadSanitizer
// cannot see (the library is not instrumented), which it reports as races on the first
// two threads that plan at once (DataParallel's replicas do).
std::mutex& onednn_mutex() {
  static auto* mu = new std::mutex();
  return *mu;
}

dnnl::engine& engine() {
  static auto* e = new dnnl::engine(dnnl::engine::kind::cpu, 0);  // leaked, as the cache
  return *e;
}

namespace {

memory::dims image_dims(const ConvShape& s) { return {s.n, s.c, s.h, s.w}; }
memory::dims result_dims(const ConvShape& s) { return {s.n, s.o, s.oh, s.ow}; }
memory::dims weight_dims(const ConvShape& s) {
  if (s.groups == 1) return {s.o, s.c, s.kh, s.kw};
  return {s.groups, s.o / s.groups, s.c / s.groups, s.kh, s.kw};
}

memory::desc plain(const memory::dims& d, bool weight) {
  const Tag t = weight ? (d.size() == 5 ? Tag::goihw : Tag::oihw) : Tag::nchw;
  return memory::desc(d, memory::data_type::f32, t);
}
memory::desc any(const memory::dims& d) {
  return memory::desc(d, memory::data_type::f32, Tag::any);
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// Fills in the layouts and reorders of `o` (user layout `user`, the primitive's `inner`).
void set_operand(Operand& o, int arg, const memory::desc& user, const memory::desc& inner,
                 bool output, Plan& plan) {
  o.arg = arg;
  o.user = user;
  o.inner = inner;
  o.reordered = user != inner;
  if (!o.reordered) return;
  const dnnl::primitive_attr attr = user_scratchpad();
  const dnnl::reorder::primitive_desc rpd =
      output ? dnnl::reorder::primitive_desc(engine(), inner, engine(), user, attr)
             : dnnl::reorder::primitive_desc(engine(), user, engine(), inner, attr);
  o.reorder = dnnl::reorder(rpd);
  plan.scratch = std::max(plan.scratch, aligned(rpd.scratchpad_desc().get_size()));
}

std::shared_ptr<Plan> make_plan(ConvPass pass, const ConvShape& s, const Window2d& w) {
  const memory::dims strides{w.stride[0], w.stride[1]};
  const memory::dims dilates{w.dilation[0] - 1, w.dilation[1] - 1};  // oneDNN counts gaps
  const memory::dims pad_l{w.padding[0], w.padding[1]};
  // What the last window reaches past the input: negative where conv2d's floor division
  // leaves the last rows or columns unread (stride > 1), which oneDNN takes as such.
  const memory::dims pad_r{
      (s.oh - 1) * w.stride[0] + (s.kh - 1) * w.dilation[0] + 1 - s.h - w.padding[0],
      (s.ow - 1) * w.stride[1] + (s.kw - 1) * w.dilation[1] + 1 - s.w - w.padding[1]};
  const memory::dims img = image_dims(s), res = result_dims(s), wt = weight_dims(s);
  const dnnl::primitive_attr attr = user_scratchpad();
  // The forward's description: the primitive of kForward, the hint of the backward passes.
  const dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training,
                                           dnnl::algorithm::convolution_direct, any(img),
                                           any(wt), any(res), strides, dilates, pad_l, pad_r);
  const dnnl::convolution_forward::primitive_desc fpd(fd, attr, engine());
  auto plan = std::make_shared<Plan>();
  memory::desc scratch;
  switch (pass) {
    case ConvPass::kForward:
      plan->conv = dnnl::convolution_forward(fpd);
      set_operand(plan->a, DNNL_ARG_DST, plain(res, false), fpd.dst_desc(), true, *plan);
      set_operand(plan->b, DNNL_ARG_SRC, plain(img, false), fpd.src_desc(), false, *plan);
      set_operand(plan->c, DNNL_ARG_WEIGHTS, plain(wt, true), fpd.weights_desc(), false, *plan);
      scratch = fpd.scratchpad_desc();
      break;
    case ConvPass::kBackwardInput: {
      const dnnl::convolution_backward_data::desc bd(dnnl::algorithm::convolution_direct,
                                                     any(img), any(wt), any(res), strides,
                                                     dilates, pad_l, pad_r);
      const dnnl::convolution_backward_data::primitive_desc bpd(bd, attr, engine(), fpd);
      plan->conv = dnnl::convolution_backward_data(bpd);
      set_operand(plan->a, DNNL_ARG_DIFF_SRC, plain(img, false), bpd.diff_src_desc(), true,
                  *plan);
      set_operand(plan->b, DNNL_ARG_DIFF_DST, plain(res, false), bpd.diff_dst_desc(), false,
                  *plan);
      set_operand(plan->c, DNNL_ARG_WEIGHTS, plain(wt, true), bpd.weights_desc(), false, *plan);
      scratch = bpd.scratchpad_desc();
      break;
    }
    case ConvPass::kBackwardWeight: {
      const dnnl::convolution_backward_weights::desc bd(dnnl::algorithm::convolution_direct,
                                                        any(img), any(wt), any(res), strides,
                                                        dilates, pad_l, pad_r);
      const dnnl::convolution_backward_weights::primitive_desc bpd(bd, attr, engine(), fpd);
      plan->conv = dnnl::convolution_backward_weights(bpd);
      set_operand(plan->a, DNNL_ARG_DIFF_WEIGHTS, plain(wt, true), bpd.diff_weights_desc(),
                  true, *plan);
      set_operand(plan->b, DNNL_ARG_DIFF_DST, plain(res, false), bpd.diff_dst_desc(), false,
                  *plan);
      set_operand(plan->c, DNNL_ARG_SRC, plain(img, false), bpd.src_desc(), false, *plan);
      scratch = bpd.scratchpad_desc();
      break;
    }
  }
  plan->scratch = std::max(plan->scratch, aligned(scratch.get_size()));
  size_t end = plan->scratch;
  for (Operand* o : {&plan->a, &plan->b, &plan->c}) {
    if (!o->reordered) continue;
    o->offset = end;
    end += aligned(o->inner.get_size());
  }
  plan->workspace = end;
  return plan;
}

}  // namespace

std::shared_ptr<const Plan> plan_for(const char* name, ConvPass pass, const ConvShape& s,
                                     const Window2d& w) {
  const std::string key = absl::StrCat(
      static_cast<int>(pass), ":", s.n, ",", s.c, ",", s.h, ",", s.w, ",", s.o,
      ",", s.kh, ",", s.kw, ",", s.oh, ",", s.ow, ",", s.groups, ":", w.stride[0], ",",
      w.stride[1], ",", w.padding[0], ",", w.padding[1], ",", w.dilation[0], ",", w.dilation[1]);
  PlanCache& cache = onednn_conv_plan_cache();
  std::shared_ptr<const Plan> plan = std::static_pointer_cast<const Plan>(cache.find(key));
  if (plan != nullptr) return plan;
  const OneOmpThread one;  // oneDNN blocks its kernels' work for the count they see now
  try {
    std::lock_guard<std::mutex> lk(onednn_mutex());
    plan = make_plan(pass, s, w);
  } catch (const dnnl::error& e) {
    SG_CHECK(false, InternalError, name, ": oneDNN could not plan image [", s.n,
             ", ", s.c, ", ", s.h, ", ", s.w, "], weight [", s.o, ", ", s.c / s.groups, ", ",
             s.kh, ", ", s.kw, "], groups ", s.groups, ": ", e.what(),
             "; set_onednn_enabled(false) uses unfold and matmul instead");
  }
  cache.insert(key, plan);
  return plan;
}

memory scratchpad(const Plan& plan, char* at) {
  const auto bytes = static_cast<memory::dim>(std::max<size_t>(plan.scratch, 1));
  return memory(memory::desc({bytes}, memory::data_type::u8, Tag::a), engine(), at);
}

void run(const Plan& plan, void* a, const void* b, const void* c, char* ws, const char* made_b,
         const char* made_c) {
#ifdef SG_HOST_UNDER_TSAN
  std::lock_guard<std::mutex> lk(onednn_mutex());
#endif
  const OneOmpThread one;
  dnnl::stream strm(engine());
  const memory scratch = scratchpad(plan, ws);
  std::unordered_map<int, memory> args{{DNNL_ARG_SCRATCHPAD, scratch}};
  // The primitive's memory for `o`: the user's, or the blocked copy (filled now for an
  // input; the result's goes out after the primitive).
  const auto bind = [&](const Operand& o, const memory& mine) {
    if (!o.reordered) {
      args[o.arg] = mine;
      return;
    }
    const char* made = &o == &plan.b ? made_b : &o == &plan.c ? made_c : nullptr;
    if (made != nullptr) {
      args[o.arg] = memory(o.inner, engine(), const_cast<char*>(made));
      return;
    }
    args[o.arg] = memory(o.inner, engine(), ws + o.offset);
    if (&o == &plan.a) return;
    o.reorder.execute(strm, {{DNNL_ARG_FROM, mine}, {DNNL_ARG_TO, args[o.arg]},
                             {DNNL_ARG_SCRATCHPAD, scratch}});
  };
  // Read only: oneDNN's memory takes a void*.
  bind(plan.b, memory(plan.b.user, engine(), const_cast<void*>(b)));
  bind(plan.c, memory(plan.c.user, engine(), const_cast<void*>(c)));
  const memory result(plan.a.user, engine(), a);
  bind(plan.a, result);
  plan.conv.execute(strm, args);
  if (plan.a.reordered) {
    plan.a.reorder.execute(strm, {{DNNL_ARG_FROM, args[plan.a.arg]},
                                  {DNNL_ARG_TO, result},
                                  {DNNL_ARG_SCRATCHPAD, scratch}});
  }
  strm.wait();
}

}  // namespace onednn
}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad
