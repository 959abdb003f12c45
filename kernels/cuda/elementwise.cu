// The strided element-wise kernel template and the element-wise ops on it
// (kernels/cuda/cuda_kernels.h). Every line here is GPU-specific; the math is not (it is
// the functors' that the cpu loops run).
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/functors/convert.h"
#include "kernels/functors/elementwise_ops.h"
#include "kernels/functors/random_ops.h"
#include "kernels/functors/select_ops.h"
#include "runtime/cuda/cuda_stream.h"
#include "runtime/cuda/kernel_launch.h"

namespace streamgrad {
namespace kernels {
namespace cuda {
namespace {

template <int N, typename Index, typename Body>
__global__ void __launch_bounds__(kThreads)
    strided_kernel(Indexer<N, Index> ix, Index numel, Body body) {
  const Index step = static_cast<Index>(gridDim.x) * kThreads;
  for (Index i = static_cast<Index>(blockIdx.x) * kThreads + static_cast<Index>(threadIdx.x);
       i < numel; i += step) {
    Index off[N];
    ix.offsets(i, off);
    body(i, off);
  }
}

template <typename Index, int N, typename Body>
void launch_as(const Stream& stream, const char* name, const cpu::Layout<N>& l,
               const Body& body) {
  const Indexer<N, Index> ix = make_indexer<Index>(l);
  launch_kernel(name, SG_KERNEL(strided_kernel<N, Index, Body>), blocks_for(l.numel), kThreads,
                raw_cuda_stream(stream), ix, static_cast<Index>(l.numel), body);
}

template <int N, typename Body>
void launch(const Stream& stream, const char* name, const cpu::Layout<N>& l, const Body& body) {
  if (l.numel == 0) return;
  if (fits_32(l)) {
    launch_as<int32_t>(stream, name, l, body);
  } else {
    launch_as<int64_t>(stream, name, l, body);
  }
}

// The per-element bodies: operand k at offset off[k].
template <typename S, typename Op>
struct Map1 {
  S* out;
  const S* in;
  Op op;
  template <typename Index>
  __device__ __forceinline__ void operator()(Index, const Index* off) const {
    using C = typename ComputeIn<S>::type;
    out[off[0]] = cpu::convert<S>(op(cpu::convert<C>(in[off[1]])));
  }
};

template <typename S, typename Op>
struct Map2 {
  S* out;
  const S* a;
  const S* b;
  Op op;
  template <typename Index>
  __device__ __forceinline__ void operator()(Index, const Index* off) const {
    using C = typename ComputeIn<S>::type;
    out[off[0]] = cpu::convert<S>(op(cpu::convert<C>(a[off[1]]), cpu::convert<C>(b[off[2]])));
  }
};

template <typename T>
struct Fill {
  T* out;
  T value;
  template <typename Index>
  __device__ __forceinline__ void operator()(Index, const Index* off) const {
    out[off[0]] = value;
  }
};

template <typename To, typename From>
struct Convert {
  To* out;
  const From* in;
  template <typename Index>
  __device__ __forceinline__ void operator()(Index, const Index* off) const {
    out[off[0]] = cpu::convert<To>(in[off[1]]);
  }
};

// out[i] = gen(offset + i) for flat row-major index i.
template <typename T, typename Gen>
struct Generate {
  T* out;
  uint64_t offset;
  Gen gen;
  template <typename Index>
  __device__ __forceinline__ void operator()(Index i, const Index* off) const {
    out[off[0]] = static_cast<T>(gen(offset + static_cast<uint64_t>(i)));
  }
};

template <typename T, typename Op>
struct CompareBody {
  uint8_t* out;
  const T* a;
  const T* b;
  Op op;
  template <typename Index>
  __device__ __forceinline__ void operator()(Index, const Index* off) const {
    out[off[0]] = op(compare_value(a[off[1]]), compare_value(b[off[2]]));
  }
};

template <typename T, typename S, typename Op>
struct CompareScalarBody {
  uint8_t* out;
  const T* in;
  S scalar;
  Op op;
  template <typename Index>
  __device__ __forceinline__ void operator()(Index, const Index* off) const {
    out[off[0]] = op(compare_value(in[off[1]]), scalar);
  }
};

template <typename T>
struct WhereBody {
  T* out;
  const uint8_t* condition;
  const T* a;
  const T* b;
  template <typename Index>
  __device__ __forceinline__ void operator()(Index, const Index* off) const {
    out[off[0]] = SelectOp{}(condition[off[1]], a[off[2]], b[off[3]]);
  }
};

}  // namespace

void unary(const Stream& stream, Unary op, DType dt, const cpu::Layout<2>& l, void* out,
           const void* in) {
  dispatch_computed(dt, [&](auto t) {
    using S = decltype(t);
    with_unary(op, [&](auto f) {
      launch(stream, "unary", l, Map1<S, decltype(f)>{static_cast<S*>(out),
                                                      static_cast<const S*>(in), f});
    });
  });
}

// For 16-bit data the front door has rounded the scalar to the dtype already.
void unary_scalar(const Stream& stream, UnaryScalar op, DType dt, const cpu::Layout<2>& l,
                  void* out, const void* in, double scalar) {
  dispatch_computed(dt, [&](auto t) {
    using S = decltype(t);
    using C = typename ComputeIn<S>::type;
    with_unary_scalar(op, static_cast<C>(scalar), [&](auto f) {
      launch(stream, "unary_scalar", l,
             Map1<S, decltype(f)>{static_cast<S*>(out), static_cast<const S*>(in), f});
    });
  });
}

void binary(const Stream& stream, Binary op, DType dt, const cpu::Layout<3>& l, void* out,
            const void* a, const void* b) {
  dispatch_computed(dt, [&](auto t) {
    using S = decltype(t);
    with_binary(op, [&](auto f) {
      launch(stream, "binary", l,
             Map2<S, decltype(f)>{static_cast<S*>(out), static_cast<const S*>(a),
                                  static_cast<const S*>(b), f});
    });
  });
}

void axpy(const Stream& stream, DType dt, const cpu::Layout<3>& l, void* out, const void* a,
          const void* b, double alpha) {
  dispatch_computed(dt, [&](auto t) {
    using S = decltype(t);
    using C = typename ComputeIn<S>::type;
    launch(stream, "axpy", l,
           Map2<S, AxpyOp<C>>{static_cast<S*>(out), static_cast<const S*>(a),
                              static_cast<const S*>(b), AxpyOp<C>{static_cast<C>(alpha)}});
  });
}

void fill(const Stream& stream, DType dt, const cpu::Layout<1>& l, void* out, double value) {
  cpu::dispatch_all(dt, [&](auto t) {
    using T = decltype(t);
    launch(stream, "fill", l, Fill<T>{static_cast<T*>(out), cpu::convert<T>(value)});
  });
}

void copy(const Stream& stream, DType to, DType from, const cpu::Layout<2>& l, void* out,
          const void* in) {
  cpu::dispatch_all(to, [&](auto t) {
    using To = decltype(t);
    cpu::dispatch_all(from, [&](auto f) {
      using From = decltype(f);
      launch(stream, "copy", l,
             Convert<To, From>{static_cast<To*>(out), static_cast<const From*>(in)});
    });
  });
}

void arange(const Stream& stream, DType dt, const cpu::Layout<1>& l, void* out, double start,
            double step) {
  cpu::dispatch_any(dt, [&](auto t) {
    using T = decltype(t);
    launch(stream, "arange", l, Generate<T, ArangeOp<T>>{static_cast<T*>(out), 0, {start, step}});
  });
}

void uniform(const Stream& stream, DType dt, const cpu::Layout<1>& l, void* out, double low,
             double high, uint64_t seed, uint64_t offset) {
  cpu::dispatch_floating(dt, [&](auto t) {
    using T = decltype(t);
    launch(stream, "uniform", l,
           Generate<T, UniformGen<T>>{static_cast<T*>(out), offset,
                                      make_uniform<T>(seed, low, high)});
  });
}

void normal(const Stream& stream, DType dt, const cpu::Layout<1>& l, void* out, double mean,
            double stddev, uint64_t seed, uint64_t offset) {
  cpu::dispatch_floating(dt, [&](auto t) {
    using T = decltype(t);
    launch(stream, "normal", l,
           Generate<T, NormalGen>{static_cast<T*>(out), offset, make_normal(seed, mean, stddev)});
  });
}

void compare(const Stream& stream, Compare op, DType dt, const cpu::Layout<3>& l, void* out,
             const void* a, const void* b) {
  cpu::dispatch_any(dt, [&](auto t) {
    using T = decltype(t);
    with_compare(op, [&](auto f) {
      launch(stream, "compare", l,
             CompareBody<T, decltype(f)>{static_cast<uint8_t*>(out), static_cast<const T*>(a),
                                         static_cast<const T*>(b), f});
    });
  });
}

void compare_scalar(const Stream& stream, Compare op, DType dt, const cpu::Layout<2>& l,
                    void* out, const void* in, double scalar) {
  cpu::dispatch_any(dt, [&](auto t) {
    using T = decltype(t);
    with_compare(op, [&](auto f) {
      with_compare_scalar<T>(scalar, [&](auto sv) {
        launch(stream, "compare_scalar", l,
               CompareScalarBody<T, decltype(sv), decltype(f)>{
                   static_cast<uint8_t*>(out), static_cast<const T*>(in), sv, f});
      });
    });
  });
}

void where(const Stream& stream, DType dt, const cpu::Layout<4>& l, void* out,
           const void* condition, const void* a, const void* b) {
  cpu::dispatch_any(dt, [&](auto t) {
    using T = decltype(t);
    launch(stream, "where", l,
           WhereBody<T>{static_cast<T*>(out), static_cast<const uint8_t*>(condition),
                        static_cast<const T*>(a), static_cast<const T*>(b)});
  });
}

}  // namespace cuda
}  // namespace kernels
}  // namespace streamgrad
