// cat and stack: the front door. Every input copied into its place in the output by one
// launch, so that joining K tensors costs one kernel rather than K copies: the pieces are
// worked out here, then moved by the implementation registered for the stream's device
// (kernels/host/join.cc on cpu and sim; on cuda one copy kernel per piece, all inside the
// one launch). Inputs and out share one dtype: nothing is converted or widened.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/checks.h"
#include "kernels/dispatch/launch.h"
#include "kernels/dispatch/registry.h"
#include "kernels/dispatch/strided.h"
#include "kernels/kernels.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace kernels {
namespace {

using dispatch::KernelId;

// `ins` have out's rank here (stack inserts the new dim first); `stacked` only changes
// what the messages say about the expected sizes.
void join(const dispatch::Impl<KernelId::kJoin>& impl, const char* name, const Stream& stream,
          const View& out, const std::vector<View>& ins, int64_t dim, bool stacked) {
  SG_CHECK(!ins.empty(), ValueError, name, ": expected at least one input");
  int64_t total = 0;
  for (size_t i = 0; i < ins.size(); ++i) {
    const View& in = ins[i];
    const std::string what = absl::StrCat("input ", i);
    cpu::check_same_dtype(name, "out", out, what.c_str(), in);
    bool fits = in.dim() == out.dim();
    for (int64_t d = 0; fits && d < out.dim(); ++d) {
      fits = d == dim ? (!stacked || in.sizes[d] == 1) : in.sizes[d] == out.sizes[d];
    }
    SG_CHECK(fits, ValueError, name, ": ", what, " is ", cpu::describe(in), " but out is ",
             cpu::describe(out), stacked ? "; every input must have out's sizes without dim "
                                         : "; sizes must match out's except along dim ",
             dim);
    SG_CHECK(!__builtin_add_overflow(total, in.sizes[dim], &total), ValueError, name,
             ": the inputs' extents along dim ", dim, " add up to more than int64 can count");
    cpu::check_disjoint(name, "out", out, what.c_str(), in);
  }
  SG_CHECK(total == out.sizes[dim], ValueError, name, ": the inputs' extents along dim ", dim,
           " add up to ", total, " but out ", cpu::describe(out), " has ", out.sizes[dim]);

  const size_t element_bytes = element_size(out.dtype);
  std::vector<JoinPiece> pieces;
  std::vector<MemRange> reads;
  pieces.reserve(ins.size());
  Dims piece_sizes = out.sizes;
  int64_t offset = 0;
  for (const View& in : ins) {
    const int64_t extent = in.sizes[dim];
    piece_sizes[dim] = extent;
    JoinPiece p;
    p.layout = cpu::make_layout<2>(piece_sizes, {out.strides.data(), in.strides.data()});
    if (p.layout.numel > 0) {
      p.out = static_cast<char*>(out.data) + offset * out.strides[dim] *
                                                 static_cast<int64_t>(element_bytes);
      p.in = in.data;
      pieces.push_back(p);
      reads.push_back(in.byte_range());
    }
    offset += extent;
  }
  if (pieces.empty()) return;
  const MemRange writes[] = {out.byte_range()};
  impl.fn(stream, dispatch::LaunchSpec(name, reads, writes), out.dtype, pieces);
}

}  // namespace

void cat(const Stream& stream, const View& out, const std::vector<View>& ins, int64_t dim) {
  const char* name = "cat";
  const auto impl = dispatch::resolve<KernelId::kJoin>(name, stream);
  cpu::check_output(name, "out", out);
  for (size_t i = 0; i < ins.size(); ++i) {
    cpu::check_view(name, absl::StrCat("input ", i).c_str(), ins[i]);
  }
  cpu::check_dim(name, dim, out);
  join(impl, name, stream, out, ins, dim, /*stacked=*/false);
}

void stack(const Stream& stream, const View& out, const std::vector<View>& ins, int64_t dim) {
  const char* name = "stack";
  const auto impl = dispatch::resolve<KernelId::kJoin>(name, stream);
  cpu::check_output(name, "out", out);
  cpu::check_dim(name, dim, out);
  std::vector<View> unsqueezed;
  unsqueezed.reserve(ins.size());
  for (size_t i = 0; i < ins.size(); ++i) {
    cpu::check_view(name, absl::StrCat("input ", i).c_str(), ins[i]);
    SG_CHECK(ins[i].dim() == out.dim() - 1, ValueError, name, ": input ", i, " is ",
             cpu::describe(ins[i]), " but out is ", cpu::describe(out),
             "; every input must have out's sizes without dim ", dim);
    View v = ins[i];
    v.sizes.insert(v.sizes.begin() + dim, 1);
    v.strides.insert(v.strides.begin() + dim, 0);  // a size-1 dim: its stride is never used
    unsqueezed.push_back(std::move(v));
  }
  join(impl, name, stream, out, unsqueezed, dim, /*stacked=*/true);
}

}  // namespace kernels
}  // namespace streamgrad
