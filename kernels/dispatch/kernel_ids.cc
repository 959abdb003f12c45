#include "kernels/dispatch/kernel_ids.h"

namespace streamgrad {
namespace kernels {
namespace dispatch {

const char* kernel_id_name(KernelId id) {
  switch (id) {
#define SG_KERNEL_NAME(id, name, ...) \
  case KernelId::id:                  \
    return name;
    SG_KERNEL_LIST(SG_KERNEL_NAME)
#undef SG_KERNEL_NAME
    case KernelId::kNumKernels: break;
  }
  return "unknown kernel";
}

}  // namespace dispatch
}  // namespace kernels
}  // namespace streamgrad
