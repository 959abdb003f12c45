// index_select and gather (index_read), index_add, index_copy, scatter_add, scatter and
// scatter_reduce (index_accumulate), check_index_range and index_linear on the host.
//
// Indices are validated in full before the first element is touched, so a bad index
// never reads or writes out of bounds and never leaves a half-updated out. On cpu the
// check runs on the host before launching (the cpu stream has no pending work, so the
// index memory is final); on sim it runs inside the task and its ValueError surfaces at
// the stream's next synchronisation.
#include <limits>
#include <string>

#include "kernels/host/host_kernels.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace kernels {
namespace cpu {
namespace {

void check_indices(const IndexArgs& a) {
  int64_t position = 0;
  for_each_row(a.index_layout, [&](const int64_t* off, int64_t n, const int64_t* step) {
    const int64_t* p = a.index + off[0];
    for (int64_t j = 0; j < n; ++j, ++position) {
      const int64_t v = p[j * step[0]];
      SG_CHECK(v >= 0 && v < a.limit, ValueError, a.name, ": index ", v,
               " (element ", position, " of index, row-major) is out of range for dim ",
               a.dim, " of size ", a.limit, "; valid indices are 0..", a.limit - 1);
    }
  });
}

// Walks `l` (operands: target, other, index) and calls fn(target_offset, other_offset,
// index_value) per element; the caller scales the index by the target's dim stride.
template <typename Fn>
void indexed_walk(const Layout<3>& l, const int64_t* idx, Fn fn) {
  for_each_row(l, [&](const int64_t* off, int64_t n, const int64_t* step) {
    for (int64_t j = 0; j < n; ++j) {
      fn(off[0] + j * step[0], off[1] + j * step[1], idx[off[2] + j * step[2]]);
    }
  });
}

// The first element of `layout` over `data` outside [low, limit): its row-major position
// and value; false when there is none.
bool first_bad(const Layout<1>& layout, const int64_t* data, int64_t low, int64_t limit,
               int64_t* position, int64_t* value) {
  int64_t at = 0;
  bool found = false;
  for_each_row(layout, [&](const int64_t* off, int64_t n, const int64_t* step) {
    for (int64_t j = 0; j < n && !found; ++j, ++at) {
      const int64_t v = data[off[0] + j * step[0]];
      if (v < low || v >= limit) {
        *position = at;
        *value = v;
        found = true;
      }
    }
  });
  return found;
}

// The value that leaves any src unchanged under `op` (include_self false).
template <typename T>
T identity(IndexCombine op) {
  switch (op) {
    case IndexCombine::kMultiply: return T(1);
    case IndexCombine::kMax: return -std::numeric_limits<T>::infinity();
    case IndexCombine::kMin: return std::numeric_limits<T>::infinity();
    case IndexCombine::kAdd:
    case IndexCombine::kAssign: break;
  }
  return T(0);
}

}  // namespace

void index_read(const Stream& stream, const LaunchSpec& spec, DType dt, const IndexArgs& args) {
  const bool host_checked = stream.device().is_cpu();
  if (host_checked) check_indices(args);
  dispatch::enqueue(
      stream, spec,
      [host_checked, dt](const IndexArgs& a) {
        if (!host_checked) check_indices(a);
        dispatch_all(dt, [&](auto t) {
          using T = decltype(t);
          T* o0 = static_cast<T*>(a.out);
          const T* x0 = static_cast<const T*>(a.other);
          const int64_t sd = a.step;
          indexed_walk(a.walk, a.index,
                       [&](int64_t oo, int64_t xo, int64_t i) { o0[oo] = x0[xo + i * sd]; });
        });
      },
      args);
}

void index_accumulate(const Stream& stream, const LaunchSpec& spec, DType dt,
                      const IndexArgs& args) {
  const bool host_checked = stream.device().is_cpu();
  if (host_checked) check_indices(args);
  dispatch::enqueue(
      stream, spec,
      [host_checked, dt](const IndexArgs& a) {
        if (!host_checked) check_indices(a);
        dispatch_floating(dt, [&](auto t) {
          using T = decltype(t);
          T* o0 = static_cast<T*>(a.out);
          const T* s0 = static_cast<const T*>(a.other);
          const int64_t sd = a.step;
          auto each = [&](auto combine) {
            indexed_walk(a.walk, a.index, [&](int64_t oo, int64_t so, int64_t i) {
              T& o = o0[oo + i * sd];
              o = combine(o, s0[so]);
            });
          };
          if (!a.include_self) {
            // Every indexed position starts from the identity, before any src meets it.
            const T id = identity<T>(a.combine);
            each([id](T, T) { return id; });
          }
          // One thread in a fixed order: duplicates combine deterministically (assigned:
          // the last in row-major order of src wins).
          switch (a.combine) {
            case IndexCombine::kAdd: return each([](T o, T v) { return o + v; });
            case IndexCombine::kAssign: return each([](T, T v) { return v; });
            case IndexCombine::kMultiply: return each([](T o, T v) { return o * v; });
            case IndexCombine::kMax:
              return each([](T o, T v) { return (v > o || v != v) && o == o ? v : o; });
            case IndexCombine::kMin:
              return each([](T o, T v) { return (v < o || v != v) && o == o ? v : o; });
          }
        });
      },
      args);
}

void check_index_range(const Stream& stream, const LaunchSpec& spec, const Layout<1>& layout,
                       const int64_t* data, int64_t low, int64_t limit,
                       const std::string& context) {
  int64_t position = 0, value = 0;
  if (stream.device().is_cpu()) {
    // The cpu stream has no pending work: the index memory is final, nothing to enqueue.
    if (first_bad(layout, data, low, limit, &position, &value)) {
      throw IndexError(index_range_message(context, low, limit, position, value));
    }
    return;
  }
  dispatch::enqueue(
      stream, spec,
      [context, low, limit, data](const Layout<1>& l) {
        int64_t at = 0, v = 0;
        if (first_bad(l, data, low, limit, &at, &v)) {
          throw IndexError(index_range_message(context, low, limit, at, v));
        }
      },
      layout);
}

void index_linear(const Stream& stream, const LaunchSpec& spec, const Layout<2>& layout,
                  int64_t* out, const int64_t* index, int64_t size, int64_t stride,
                  bool accumulate) {
  dispatch::enqueue(
      stream, spec,
      [out, index, size, stride, accumulate](const Layout<2>& l) {
        for_each_row(l, [&](const int64_t* off, int64_t n, const int64_t* step) {
          int64_t* o = out + off[0];
          const int64_t* x = index + off[1];
          for (int64_t j = 0; j < n; ++j) {
            const int64_t v = x[j * step[1]];
            int64_t* at = o + j * step[0];
            *at = linear_step(accumulate ? *at : 0, v, size, stride);
          }
        });
      },
      layout);
}

}  // namespace cpu
}  // namespace kernels
}  // namespace streamgrad
