// Internal to the front door (kernels/*.cc): the one place where a call's device and its
// 16-bit widening are decided.
//
//   const auto impl = dispatch::resolve<KernelId::kBinary>(name, stream);   // device
//   front::call(impl, stream, name, Chunking::kElementwise, {&out}, {&a, &b},
//               [&](const Operands<1>& o, const Operands<2>& in) { ... impl.fn(...); });
//
// call() runs `body` once with the operands to compute on: the views as given, or, when
// the implementation asked for float32 (ImplOptions::native_16bit false) and every floating
// operand is of one 16-bit dtype, float32 copies (widen.h) whose results are rounded back
// into the 16-bit outputs after body returns. With Chunking::kElementwise a widened call
// whose scratch would pass widen_chunk_elements(stream) (widen.h: 1 MiB on cpu and sim,
// a cap of 256 MiB on cuda) runs body once per chunk of out's first dim of size > 1
// (every operand has out's sizes), each chunk widened on its own.
//
// Mode::accumulate marks kernels whose outputs are read too (index_add, col2im): their
// float32 copies start from the outputs' values.
// call_mixed() is the same for mixed precision (matmul, batch_norm): operands are
// pointers (nullptr: an optional operand left out), and those listed in `params` (an
// output kept in float32, a bias, statistics) may be float32 beside 16-bit activations;
// the call widens when every activation is of one 16-bit dtype and each param of that
// dtype or float32 (Widen::applies_mixed). body(const Ptrs<NO>&, const Ptrs<NI>&, bool);
// outputs listed in `read_outs` are read too (batch_norm's running statistics), so their
// float32 copies start from their values.
// Kernels with a variable number of operands (kernels/foreach.h) decide with widens()
// and widen with cpu::Widen themselves.
//
// Thread-safety: per call, on the caller's thread. Failure: what body and Widen throw
// (ValueError for malformed 16-bit views, before anything is enqueued).
#ifndef STREAMGRAD_KERNELS_FRONT_H_
#define STREAMGRAD_KERNELS_FRONT_H_

#include <array>
#include <cstddef>
#include <initializer_list>

#include "kernels/dispatch/registry.h"
#include "kernels/view.h"
#include "kernels/widen.h"

namespace streamgrad {
namespace kernels {
namespace front {

template <size_t N>
using Operands = std::array<View, N>;

template <size_t N>
using Ptrs = std::array<const View*, N>;

enum class Chunking { kNone, kElementwise };

struct Mode {
  Mode(Chunking c = Chunking::kNone, bool acc = false) : chunking(c), accumulate(acc) {}
  Chunking chunking;
  bool accumulate;  // outputs are read too: widened copies start from their values
};
inline const Mode kAccumulate{Chunking::kNone, /*acc=*/true};

// Whether a call with these views computes in float32 under `options`.
inline bool widens(const dispatch::ImplOptions& options, absl::Span<const View* const> views) {
  return !options.native_16bit && cpu::Widen::applies(views);
}

// Whether a mixed-precision call (call_mixed) with these activations and params computes
// in float32 under `options`.
inline bool widens_mixed(const dispatch::ImplOptions& options,
                         absl::Span<const View* const> activations,
                         absl::Span<const View* const> params) {
  return !options.native_16bit && cpu::Widen::applies_mixed(activations, params);
}

namespace internal {

template <size_t NO, size_t NI, typename Body>
void run_widened(const Stream& stream, const char* name, bool accumulate,
                 const Operands<NO>& outs, const Operands<NI>& ins, Body& body) {
  cpu::Widen w(stream, name);
  Operands<NO> wo;
  Operands<NI> wi;
  for (size_t i = 0; i < NO; ++i) wo[i] = w.out(outs[i], accumulate);
  for (size_t i = 0; i < NI; ++i) wi[i] = w.in(ins[i]);
  body(wo, wi, /*widened=*/true);
  w.finish();
}

}  // namespace internal

// body(const Operands<NO>&, const Operands<NI>&, bool widened).
template <typename Impl, size_t NO, size_t NI, typename Body>
void call(const Impl& impl, const Stream& stream, const char* name, Mode mode,
          const Operands<NO>& outs, const Operands<NI>& ins, Body body) {
  std::array<const View*, NO + NI> all;
  for (size_t i = 0; i < NO; ++i) all[i] = &outs[i];
  for (size_t i = 0; i < NI; ++i) all[NO + i] = &ins[i];
  if (!widens(impl.options, all)) return body(outs, ins, /*widened=*/false);
  if (mode.chunking == Chunking::kElementwise && NO > 0 &&
      cpu::for_each_chunk(stream, outs[0], static_cast<int64_t>(NO + NI),
                          [&](int64_t d, int64_t begin, int64_t n) {
                            Operands<NO> co;
                            Operands<NI> ci;
                            for (size_t i = 0; i < NO; ++i) co[i] = cpu::slice_of(outs[i], d, begin, n);
                            for (size_t i = 0; i < NI; ++i) ci[i] = cpu::slice_of(ins[i], d, begin, n);
                            internal::run_widened(stream, name, mode.accumulate, co, ci, body);
                          })) {
    return;
  }
  internal::run_widened(stream, name, mode.accumulate, outs, ins, body);
}

// body(const Ptrs<NO>&, const Ptrs<NI>&, bool widened); see the banner.
template <typename Impl, size_t NO, size_t NI, typename Body>
void call_mixed(const Impl& impl, const Stream& stream, const char* name, const Ptrs<NO>& outs,
                const Ptrs<NI>& ins, std::initializer_list<const View*> params, Body body,
                std::initializer_list<const View*> read_outs = {}) {
  std::array<const View*, NO + NI> acts{};
  std::array<const View*, NO + NI> prm{};
  size_t na = 0, np = 0;
  auto classify = [&](const View* v) {
    if (v == nullptr) return;
    bool is_param = false;
    for (const View* p : params) is_param = is_param || p == v;
    (is_param ? prm[np++] : acts[na++]) = v;
  };
  for (const View* v : outs) classify(v);
  for (const View* v : ins) classify(v);
  if (!widens_mixed(impl.options, {acts.data(), na}, {prm.data(), np})) {
    return body(outs, ins, /*widened=*/false);
  }
  cpu::Widen w(stream, name);
  Ptrs<NO> wo;
  Ptrs<NI> wi;
  for (size_t i = 0; i < NO; ++i) {
    bool read = false;
    for (const View* r : read_outs) read = read || (r != nullptr && r == outs[i]);
    wo[i] = w.out(outs[i], read);
  }
  for (size_t i = 0; i < NI; ++i) wi[i] = w.in(ins[i]);
  body(wo, wi, /*widened=*/true);
  w.finish();
}

}  // namespace front
}  // namespace kernels
}  // namespace streamgrad

#endif  // STREAMGRAD_KERNELS_FRONT_H_
