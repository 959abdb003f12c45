#include "nn/data/loader.h"

#include <algorithm>
#include <numeric>

#include "engine/factories.h"
#include "engine/grad_mode.h"
#include "engine/pinned.h"
#include "ops/ops.h"
#include "runtime/backend/devices.h"
#include "runtime/backend/guard.h"
#include "runtime/base/error.h"
#include "runtime/memory/memory_history.h"

namespace streamgrad {
namespace nn {
namespace {

Stream make_copy_stream(Device d) {
  const Device device = resolve_device(d, "DataLoader");
  return device.is_cpu() ? current_stream(device) : Stream::create(device);
}

}  // namespace

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, const DataLoaderOptions& o)
    : dataset_(std::move(dataset)), options_(o), copy_stream_(make_copy_stream(o.device())) {
  SG_CHECK(dataset_ != nullptr, ValueError, "DataLoader: the dataset is null");
  SG_CHECK(o.batch_size() > 0 && o.workers() > 0 && o.prefetch() > 0, ValueError,
           "DataLoader: batch_size ", o.batch_size(), ", workers ", o.workers(), " and prefetch ",
           o.prefetch(), " must be positive");
}

DataLoader::~DataLoader() { stop_workers(); }

int64_t DataLoader::examples_per_epoch() const {
  return options_.sampler() != nullptr ? options_.sampler()->size() : dataset_->size();
}

int64_t DataLoader::batches_per_epoch() const {
  const int64_t n = examples_per_epoch(), b = options_.batch_size();
  return options_.drop_last() ? n / b : (n + b - 1) / b;
}

void DataLoader::stop_workers() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

void DataLoader::start_epoch(int64_t epoch) {
  stop_workers();
  if (options_.sampler() != nullptr) {
    order_ = options_.sampler()->indices(epoch);
    for (int64_t i : order_) {
      SG_CHECK(i >= 0 && i < dataset_->size(), ValueError, "DataLoader: the sampler gave index ",
               i, " for a data set of ", dataset_->size(), " examples; size the sampler for it");
    }
  } else if (options_.shuffle()) {
    order_ = shuffled_indices(dataset_->size(), options_.seed(), epoch);
  } else {
    order_.resize(dataset_->size());
    std::iota(order_.begin(), order_.end(), 0);
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = false;
    next_to_make_ = next_to_take_ = 0;
    ready_.clear();
  }
  for (int w = 0; w < options_.workers(); ++w) workers_.emplace_back([this] { worker_loop(); });
}

DataLoader::Ready DataLoader::make_batch(int64_t index) const {
  const MemoryCategoryScope category("input");  // for the memory history
  const int64_t n = examples_per_epoch(), b = options_.batch_size();
  const int64_t first = index * b, count = std::min(b, n - first);
  Shape shape = dataset_->example_shape();
  const int64_t per = numel_of(shape);
  shape.insert(shape.begin(), count);
  Shape target_shape = dataset_->target_shape();
  const int64_t per_target = numel_of(target_shape);
  target_shape.insert(target_shape.begin(), count);
  NoGradGuard no_grad;
  // Assembled in ordinary host memory; pin_memory then copies it into a pinned block with
  // a launch, so the stream sanitizer sees every write into memory a copy may have read.
  const DType dt = dataset_->data_dtype();
  Tensor data = empty(shape, TensorOptions().dtype(dt).device("cpu"));
  Tensor target = empty(target_shape, TensorOptions().dtype(DType::kInt64).device("cpu"));
  char* d = static_cast<char*>(data.view().data);
  int64_t* t = static_cast<int64_t*>(target.view().data);
  const int64_t bytes = per * static_cast<int64_t>(element_size(dt));
  for (int64_t i = 0; i < count; ++i) {
    dataset_->get_example(order_[first + i], d + i * bytes, t + i * per_target);
  }
  Ready r;
  if (copy_stream_.device().is_cpu()) {
    r.batch = {data, target};
    return r;
  }
  StreamGuard on_copy(copy_stream_);
  r.batch.data = to(pin_memory(data), copy_stream_.device(), /*non_blocking=*/true);
  r.batch.target = to(pin_memory(target), copy_stream_.device(), /*non_blocking=*/true);
  r.copied = std::make_unique<Event>();
  r.copied->record(copy_stream_);
  return r;
}

void DataLoader::worker_loop() {
  const int64_t total = batches_per_epoch();
  for (;;) {
    int64_t index;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] {
        return stop_ || next_to_make_ >= total || next_to_make_ - next_to_take_ < options_.prefetch();
      });
      if (stop_ || next_to_make_ >= total) return;
      index = next_to_make_++;
    }
    Ready r;
    try {
      r = make_batch(index);
    } catch (...) {
      r.error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      ready_.emplace(index, std::move(r));
    }
    cv_.notify_all();
  }
}

bool DataLoader::next(Batch* out) {
  SG_CHECK(out != nullptr, ValueError, "DataLoader::next: out is null");
  SG_CHECK(!workers_.empty() || order_.size() == static_cast<size_t>(examples_per_epoch()), Error,
           "DataLoader::next: call start_epoch(epoch) first");
  Ready r;
  {
    std::unique_lock<std::mutex> lk(mu_);
    if (next_to_take_ >= batches_per_epoch()) return false;
    cv_.wait(lk, [&] { return ready_.count(next_to_take_) == 1; });
    auto it = ready_.find(next_to_take_);
    r = std::move(it->second);
    ready_.erase(it);
    ++next_to_take_;
  }
  cv_.notify_all();
  if (r.error) std::rethrow_exception(r.error);
  if (r.copied != nullptr) {
    const Stream compute = current_stream(copy_stream_.device());
    // See Note in loader.h: compute waits for the copy, and owns the memory from now on.
    if (!options_.unsafe_skip_copy_wait()) r.copied->block(compute);
    r.batch.data.storage().record_stream(compute);
    r.batch.target.storage().record_stream(compute);
  }
  *out = std::move(r.batch);
  return true;
}

}  // namespace nn
}  // namespace streamgrad
