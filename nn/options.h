// SG_NN_OPTION: the chainable setter, getter and member of an options struct, as
// libtorch's TORCH_ARG (`nn::SGDOptions(0.1).momentum(0.9)`, `opts.momentum()`).
//
//   struct FooOptions {
//     SG_NN_OPTION(int64_t, size) = 8;   // FooOptions& size(int64_t); int64_t size() const;
//   };
//
// Header-only; no state. Used by nn/optim.h and nn/data/loader.h.
#ifndef STREAMGRAD_NN_OPTIONS_H_
#define STREAMGRAD_NN_OPTIONS_H_

#define SG_NN_OPTION(type, field)         \
  auto& field(type v) {                   \
    field##_ = v;                         \
    return *this;                         \
  }                                       \
  type field() const { return field##_; } \
  type field##_

#endif  // STREAMGRAD_NN_OPTIONS_H_
