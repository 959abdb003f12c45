// streamgrad: a C++17 autograd engine whose backward pass is stream-aware.
//
// The one header users include: the runtime (devices, streams, events, guards, memory),
// tensors and factories, every differentiable op, backward()/grad(), grad and anomaly
// modes, custom functions, the nn layer (modules, optimisers, schedulers, the gradient
// scaler, checkpoints, data sets and the data loader, the training step, DataParallel)
// and distributed training (process groups, DistributedDataParallel, DistributedSampler).
// See README.md and ARCHITECTURE.md.
#ifndef STREAMGRAD_STREAMGRAD_H_
#define STREAMGRAD_STREAMGRAD_H_

#include "distributed/ddp.h"
#include "distributed/process_group.h"
#include "distributed/sampler.h"
#include "distributed/store.h"
#include "engine/autocast.h"
#include "engine/backward.h"
#include "engine/factories.h"
#include "engine/function.h"
#include "engine/grad_mode.h"
#include "gradcheck/gradcheck.h"
#include "engine/pinned.h"
#include "engine/tensor.h"
#include "kernels/plan_cache.h"
#include "nn/checkpoint.h"
#include "nn/clip_grad.h"
#include "nn/containers.h"
#include "nn/data/dataset.h"
#include "nn/data/loader.h"
#include "nn/data/sampler.h"
#include "nn/data/text.h"
#include "nn/grad_scaler.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/module.h"
#include "nn/optim.h"
#include "nn/parallel/data_parallel.h"
#include "nn/parallel/parallel.h"
#include "nn/parallel/replicate.h"
#include "nn/rnn.h"
#include "nn/train_step.h"
#include "nn/transformer.h"
#include "ops/ops.h"
#include "runtime/memory/memory_history.h"
#include "runtime/runtime.h"

#endif  // STREAMGRAD_STREAMGRAD_H_
