// DataLoader: batches of a Dataset on a device, assembled ahead of the consumer by
// background workers and copied on a dedicated copy stream, so that input copies overlap
// compute (the stream-aware way PyTorch users get with pin_memory + non_blocking).
//
//   nn::DataLoader loader(train, nn::DataLoaderOptions().batch_size(64).device("sim:0"));
//   for (int64_t epoch = 0; epoch < 5; ++epoch) {
//     loader.start_epoch(epoch);
//     for (nn::Batch b; loader.next(&b);) { ... b.data [64,1,28,28], b.target [64] ... }
//   }
//
// Stream contract (see ARCHITECTURE.md §9): a worker writes batch k into pinned host memory and
// copies it to the device with non_blocking on the loader's copy stream, then records an
// event there. next() hands the batch to the caller's current stream on the device (the
// compute stream): that stream waits on the event (device-side, the host does not wait
// for the copy) and the batch's memory is record_stream'ed on it, so the allocator never
// reuses it under compute. The pinned block returns to the host cache only after the copy
// ran. On cpu there is no copy: batches are host tensors.
//
// Order: every example once per epoch; with shuffle, a permutation drawn from
// (seed, epoch) (the same every run; nn/data/sampler.h); with a sampler, its indices.
// The last partial batch unless drop_last. With several workers batches are still
// delivered in order. At most `prefetch` batches are in flight ahead of the consumer.
//
// Thread-safety: one consumer thread calls start_epoch/next. Failure: ValueError for bad
// options; an exception thrown in a worker (by the dataset) is rethrown by next() for the
// batch it concerns, with its type; destroying the loader mid-epoch stops the workers.
#ifndef STREAMGRAD_NN_DATA_LOADER_H_
#define STREAMGRAD_NN_DATA_LOADER_H_

#include <condition_variable>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "nn/data/dataset.h"
#include "nn/data/sampler.h"
#include "nn/options.h"
#include "runtime/backend/event.h"
#include "runtime/backend/stream.h"

namespace streamgrad {
namespace nn {

struct DataLoaderOptions {
  SG_NN_OPTION(int64_t, batch_size) = 64;
  SG_NN_OPTION(bool, shuffle) = true;
  SG_NN_OPTION(uint64_t, seed) = 0;
  SG_NN_OPTION(bool, drop_last) = false;
  SG_NN_OPTION(int, workers) = 1;
  SG_NN_OPTION(int, prefetch) = 2;
  SG_NN_OPTION(Device, device) = Device("cpu");
  // Which examples, in what order (DistributedSampler: this process's shard); the sampler
  // decides the order, so `shuffle` and `seed` are then unused.
  SG_NN_OPTION(std::shared_ptr<const Sampler>, sampler);
  // For the race reproducer and its tests only: the compute stream does not wait for the
  // copy, the missing wait the stream sanitizer must catch. Never set it in training.
  SG_NN_OPTION(bool, unsafe_skip_copy_wait) = false;
};


struct Batch {
  Tensor data;    // [B, *example_shape], float32
  Tensor target;  // [B], int64
};

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset> dataset, const DataLoaderOptions& options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  int64_t batches_per_epoch() const;
  // The data set's size, or the sampler's.
  int64_t examples_per_epoch() const;
  // Stops the current epoch's workers (if any) and starts epoch `epoch`.
  void start_epoch(int64_t epoch);
  // The next batch of the epoch on the caller's current stream; false at the end.
  bool next(Batch* out);
  // The stream the workers copy on (cpu: the cpu stream).
  const Stream& copy_stream() const { return copy_stream_; }
  const DataLoaderOptions& options() const { return options_; }

 private:
  struct Ready {
    Batch batch;
    std::unique_ptr<Event> copied;  // recorded on copy_stream_ after the copy
    std::exception_ptr error;
  };
  void stop_workers();
  void worker_loop();
  Ready make_batch(int64_t index) const;

  const std::shared_ptr<const Dataset> dataset_;
  const DataLoaderOptions options_;
  const Stream copy_stream_;
  std::vector<int64_t> order_;  // this epoch's example order (written before workers start)
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t next_to_make_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_to_take_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int64_t, Ready> ready_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace nn
}  // namespace streamgrad

#endif  // STREAMGRAD_NN_DATA_LOADER_H_
