// Warp collectives (__shfl*_sync, __ballot_sync and its votes, __syncwarp) for the
// emulated threads: a lane that arrives waits until every lane named in its mask has
// arrived with the same mask; then every lane gets its value at once. The lane numbering
// is the thread's linear index in the block modulo 32, as on the GPU.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/cudaemu/block_runner.h"
#include "runtime/cudaemu/launch_state.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace cudaemu {
namespace internal {
namespace {

std::string hex(unsigned mask) { return absl::StrFormat("0x%08x", mask); }

const char* state_words(State s) {
  switch (s) {
    case State::kDone: return "has returned";
    case State::kBarrier: return "waits at __syncthreads";
    case State::kWarp: return "waits in another warp collective";
    case State::kReady: break;
  }
  return "has not arrived";
}

// The source lane of a shuffle by PTX's shfl rules: lanes are split into segments of
// `width`; a source outside the lane's segment (or below it, for up) gives its own value.
int source_lane(Collective kind, int lane, int arg, int width) {
  const int segmask = (32 - width) & 31;
  const int b = arg & 31;
  const int min_lane = lane & segmask;
  const int max_lane = kind == Collective::kShflUp ? min_lane : min_lane | (31 & ~segmask);
  int j = lane;
  bool ok = true;
  switch (kind) {
    case Collective::kShflIdx: j = min_lane | (b & ~segmask); ok = j <= max_lane; break;
    case Collective::kShflUp: j = lane - b; ok = j >= max_lane; break;
    case Collective::kShflDown: j = lane + b; ok = j <= max_lane; break;
    case Collective::kShflXor: j = lane ^ b; ok = j <= max_lane; break;
    default: break;
  }
  return ok ? j : lane;
}

}  // namespace

uint64_t Launch::collective(Collective kind, const char* builtin, unsigned mask, uint64_t value,
                            int arg, int width) {
  EmuThread& t = current();
  if (t.cancel) throw Cancel{};
  const unsigned lane = t.linear % 32, warp = t.linear / 32;
  const unsigned lanes = std::min(32u, threads_per_block_ - warp * 32);
  const unsigned exists = lanes == 32 ? ~0u : (1u << lanes) - 1;
  // Built only on failure: this is the hot path of every shuffle.
  const auto call = [&] { return absl::StrCat(builtin, " (mask ", hex(mask), ")"); };
  if ((mask >> lane & 1) == 0) {
    fail(absl::StrCat(call(), " is called by lane ", lane, ", which its mask leaves out; every "
                      "calling lane must be in the mask"));
  }
  if ((mask & ~exists) != 0) {
    fail(absl::StrCat(call(), " names lanes that do not exist: the block has ",
                      threads_per_block_, " threads, so warp ", warp, " has lanes 0..",
                      lanes - 1, " only; build the mask from the lanes present"));
  }
  if (kind != Collective::kSyncWarp && kind != Collective::kBallot &&
      (width < 1 || width > 32 || (width & (width - 1)) != 0)) {
    fail(absl::StrCat(call(), " with width ", width, ": the width must be a power of 2 in 1..32"));
  }
  t.kind = kind;
  t.builtin = builtin;
  t.mask = mask;
  t.in = value;
  t.arg = arg;
  t.width = width;
  std::vector<WarpGroup>& groups = warps_[warp];
  size_t g = 0;
  while (g < groups.size() && groups[g].mask != mask) ++g;
  if (g == groups.size()) {
    groups.push_back(WarpGroup{mask, 0, kind, builtin});
  } else if (groups[g].kind != kind) {
    fail(absl::StrCat(call(), " is called while other lanes of the mask wait in ",
                      groups[g].builtin, "; every lane must call the same collective"));
  }
  groups[g].arrived |= 1u << lane;
  if (groups[g].arrived == mask) {
    const WarpGroup done = groups[g];
    groups.erase(groups.begin() + static_cast<long>(g));
    complete(warp, done);
    return t.out;
  }
  wait(t, State::kWarp);
  return t.out;
}

void Launch::complete(unsigned warp, const WarpGroup& g) {
  EmuThread* lanes = &threads_[warp * 32];
  unsigned ballot = 0;
  for (int l = 0; l < 32; ++l) {
    if ((g.mask >> l & 1) != 0 && lanes[l].in != 0) ballot |= 1u << l;
  }
  for (int l = 0; l < 32; ++l) {
    if ((g.mask >> l & 1) == 0) continue;
    EmuThread& u = lanes[l];
    if (g.kind == Collective::kBallot) {
      u.out = ballot;
    } else if (g.kind == Collective::kSyncWarp) {
      u.out = 0;
    } else {
      const int j = source_lane(g.kind, l, u.arg, u.width);
      if ((g.mask >> j & 1) == 0) {
        fail(absl::StrCat(g.builtin, " (mask ", hex(g.mask), "): lane ", l, " reads lane ", j,
                          ", which is not in the mask (its value is undefined on a GPU); "
                          "widen the mask or keep the source inside it"));
      }
      u.out = lanes[j].in;
    }
    u.state = State::kReady;
  }
}

std::string Launch::missing_lane(const EmuThread& waiting) const {
  const unsigned warp = waiting.linear / 32;
  const std::vector<WarpGroup>& groups = warps_[warp];
  unsigned arrived = 0;
  for (const WarpGroup& g : groups) {
    if (g.mask == waiting.mask) arrived = g.arrived;
  }
  const unsigned missing = waiting.mask & ~arrived;
  const unsigned l = static_cast<unsigned>(__builtin_ctz(missing));
  const EmuThread& m = threads_[warp * 32 + l];
  std::string why = state_words(m.state);
  if (m.state == State::kWarp) {
    absl::StrAppend(&why, " (", m.builtin, " with mask ", hex(m.mask), ")");
  }
  return absl::StrCat(where(waiting), ": lane ", waiting.linear % 32, " of warp ", warp,
                      " waits in ", waiting.builtin, " (mask ", hex(waiting.mask), "), but lane ",
                      l, " (thread (", m.idx.x, ", ", m.idx.y, ", ", m.idx.z, ")) ", why,
                      "; every lane named in the mask must call the same warp collective "
                      "with the same mask");
}

uint64_t warp_collective(Collective kind, const char* builtin, unsigned mask, uint64_t value,
                         int arg, int width) {
  Launch* l = running_launch();
  if (l == nullptr) {
    throw DeviceError(absl::StrCat("cuda emulation: ", builtin, " called from host code; call "
                                   "it inside a kernel run by emu_launch"));
  }
  return l->collective(kind, builtin, mask, value, arg, width);
}

}  // namespace internal
}  // namespace cudaemu
}  // namespace streamgrad
