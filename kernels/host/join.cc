// cat and stack on the host: every input copied into its place in the output by one
// task, as raw bytes of the element size (no conversion); a piece whose rows are
// contiguous on both sides is one memcpy per row.
#include <cstring>
#include <vector>

#include "kernels/host/host_kernels.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace {

template <typename E>
void copy_piece(const JoinPiece& p) {
  E* o0 = static_cast<E*>(p.out);
  const E* x0 = static_cast<const E*>(p.in);
  for_each_row(p.layout, [&](const int64_t* off, int64_t n, const int64_t* step) {
    E* o = o0 + off[0];
    const E* x = x0 + off[1];
    if (step[0] == 1 && step[1] == 1) {
      std::memcpy(o, x, static_cast<size_t>(n) * sizeof(E));
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * step[0]] = x[i * step[1]];
    }
  });
}

void copy_pieces(const std::vector<JoinPiece>& pieces, size_t element_bytes) {
  for (const JoinPiece& p : pieces) {
    switch (element_bytes) {
      case 1:
        copy_piece<uint8_t>(p);
        break;
      case 2:
        copy_piece<uint16_t>(p);
        break;
      case 4:
        copy_piece<uint32_t>(p);
        break;
      case 8:
        copy_piece<uint64_t>(p);
        break;
      default:
        SG_INTERNAL_CHECK(false, "join: element size ", element_bytes);
        break;
    }
  }
}

}  // namespace

void join(const Stream& stream, const LaunchSpec& spec, DType dt,
          const std::vector<JoinPiece>& pieces) {
  const size_t element_bytes = element_size(dt);
  dispatch::enqueue(
      stream, spec,
      [element_bytes](const std::vector<JoinPiece>& p) { copy_pieces(p, element_bytes); },
      pieces);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad
