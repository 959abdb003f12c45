// The level table in use: cpu_capability() (runtime/backend/cpu_settings.h) picks one of the
// tables that the loops_<level> libraries define; under ThreadSanitizer, their announced
// wrappers (announced_loops.cc).
#include "kernels/host/loops.h"
#include "kernels/host/tsan_announce.h"

namespace streamgrad {
namespace kernels {
namespace cpu {

const Loops& loops_for(CpuCapability c) {
#ifdef SG_HOST_UNDER_TSAN
  return announced_loops_for(c);
#endif
  switch (c) {
#if defined(__x86_64__)
    case CpuCapability::kAvx512: return level_avx512::kLoops;
    case CpuCapability::kAvx2: return level_avx2::kLoops;
#endif
    default: return level_default::kLoops;
  }
}

const Loops& loops() { return loops_for(cpu_capability()); }

const NnLoops& nn_loops_for(CpuCapability c) {
#ifdef SG_HOST_UNDER_TSAN
  return announced_nn_loops_for(c);
#endif
  switch (c) {
#if defined(__x86_64__)
    case CpuCapability::kAvx512: return level_avx512::kNnLoops;
    case CpuCapability::kAvx2: return level_avx2::kNnLoops;
#endif
    default: return level_default::kNnLoops;
  }
}

const NnLoops& nn_loops() { return nn_loops_for(cpu_capability()); }

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad
