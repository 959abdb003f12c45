// streamgrad: a C++17 autograd engine whose backward pass is stream-aware.
//
// The one header users include. Today it offers the runtime layer (devices, streams,
// events, guards, launches, copies, the caching allocator); tensors, operators and the
// engine join it as they land. See README.md and DESIGN.md.
#ifndef STREAMGRAD_STREAMGRAD_H_
#define STREAMGRAD_STREAMGRAD_H_

#include "runtime/runtime.h"

#endif  // STREAMGRAD_STREAMGRAD_H_
