#include "nn/offload.h"

#include <algorithm>
#include <any>
#include <atomic>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include "engine/factories.h"
#include "engine/pinned.h"
#include "ops/ops.h"
#include "runtime/memory/copy.h"
#include "runtime/memory/memory_history.h"

namespace streamgrad {
namespace nn {
namespace {

std::atomic<size_t> g_offloaded{0}, g_offloaded_bytes{0}, g_prefetched{0}, g_fetched_late{0},
    g_deduplicated{0};

size_t bytes_of(const Tensor& t) { return static_cast<size_t>(t.numel()) * element_size(t.dtype()); }

OffloadOptions check(OffloadOptions o) {
  SG_CHECK(o.prefetch >= 0 && o.copy_window >= 0, ValueError,
           "nn::OffloadGuard: prefetch (", o.prefetch, ") and copy_window (", o.copy_window,
           ") count tensors and must be 0 or more");
  return o;
}

// Pinned copies of tensors whose graph is gone, kept for later saves of the same shape on
// the same device. The host allocator reuses a pinned block only once it sees the copy
// streams pass it, so a host running steps ahead of the device would hold the pinned
// copies of every step it is ahead (855 MiB against 285 MiB in use, on the GPT of
// bench/RESULTS.md). Here reuse is ordered on the device instead: the copy-out that
// writes a recycled buffer waits for the event of the last copy-in that read it (the
// copy-outs themselves share one stream). At most as many bytes as one guard has
// offloaded are kept; beyond that, the buffers given longest ago go back to the host
// allocator.
class PinnedPool {
 public:
  struct Buffer {
    Tensor host;
    Event last_read;  // the latest copy-in from it; never recorded: none
  };
  // A buffer of this shape for `device`'s copies, or one whose tensor is undefined.
  Buffer take(Device device, const Shape& sizes, DType dtype) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = by_shape_.find(Key{device, dtype, sizes});
    if (it == by_shape_.end()) return Buffer{Tensor(), Event()};  // (no shape is left empty)
    // The oldest: its last copy-in was enqueued first, so waiting for it costs least.
    const auto entry = it->second.front();
    it->second.pop_front();
    if (it->second.empty()) by_shape_.erase(it);
    Buffer b = std::move(entry->buffer);
    bytes_ -= bytes_of(b.host);
    given_.erase(entry);
    return b;
  }
  void give(Device device, Tensor host, Event last_read) {
    std::vector<Buffer> dropped;  // freed outside the lock
    {
      std::lock_guard<std::mutex> lk(mu_);
      const size_t n = bytes_of(host);
      if (n > limit_) return;  // `host` goes back to the host allocator
      while (bytes_ + n > limit_ && !given_.empty()) {
        // The oldest given is the front of its shape's list too: both are in give order.
        Entry& oldest = given_.front();
        auto shape = by_shape_.find(oldest.key);
        shape->second.pop_front();
        if (shape->second.empty()) by_shape_.erase(shape);
        bytes_ -= bytes_of(oldest.buffer.host);
        dropped.push_back(std::move(oldest.buffer));
        given_.pop_front();
      }
      Key key{device, host.dtype(), host.sizes()};
      given_.push_back(Entry{key, Buffer{std::move(host), std::move(last_read)}});
      by_shape_[key].push_back(std::prev(given_.end()));
      bytes_ += n;
    }
  }
  void raise_limit(size_t bytes) {
    std::lock_guard<std::mutex> lk(mu_);
    limit_ = std::max(limit_, bytes);
  }

 private:
  using Key = std::tuple<Device, DType, Shape>;
  struct Entry {
    Key key;
    Buffer buffer;
  };
  std::mutex mu_;
  std::list<Entry> given_;  // every buffer kept, oldest given first
  std::map<Key, std::deque<std::list<Entry>::iterator>> by_shape_;  // each in give order
  size_t bytes_ = 0;
  size_t limit_ = 0;
};

PinnedPool& pinned_pool() {
  static auto* pool = new PinnedPool();  // never destroyed: graphs may die during exit
  return *pool;
}

}  // namespace

// One saved tensor.
struct OffloadedTensor {
  Tensor kept;  // a tensor left where it was (cpu, or small)
  Device device{"cpu"};
  Tensor host;     // the pinned copy
  Event out_done;  // the copy-out ran (copy-out stream)
  // The saving op's stream: backward replays that op, and so unpacks the tensor, there.
  std::optional<Stream> saved_on;
  Tensor back;     // the device copy, from a fetch until a node takes it
  Event in_done;   // the latest copy-in ran (copy-in stream)
  bool fetched = false;   // a copy-in is enqueued and `back` not yet taken by every save
  bool consumed = false;  // taken by every node that saved it, in this backward
  int saves = 1;          // nodes that saved this tensor (one copy serves them all)
  int taken = 0;          // of those, how many took it in this backward
  size_t index = 0;       // in save order

  OffloadedTensor() = default;
  OffloadedTensor(const OffloadedTensor&) = delete;
  OffloadedTensor& operator=(const OffloadedTensor&) = delete;
  // A copy brought back but never taken (the graph went without a backward, or backward
  // stopped early) goes back to its stream's pool only after that stream waited for the
  // copy-in that writes it.
  ~OffloadedTensor() {
    if (back.defined()) {
      const Storage storage = back.storage();
      try {
        in_done.block(storage.stream());
      } catch (...) {
        hold_until_copied(storage, offload_streams(device).second);
      }
    }
    if (!host.defined()) return;
    try {
      pinned_pool().give(device, std::move(host), std::move(in_done));
    } catch (...) {
      // Not kept: the host allocator takes the buffer back under its own protection.
    }
  }
  // The fallback when a stream wait cannot be enqueued: the allocator keeps the block
  // until it sees the copy stream pass it (later, but never early).
  static void hold_until_copied(const Storage& storage, const Stream& copy) noexcept {
    try {
      storage.record_stream(copy);
    } catch (...) {
      // The backend is failing: its next call reports it; nothing here can do better.
    }
  }
};

// A device block that a copy-out may still be reading, kept from the allocator until the
// stream it belongs to has been made to wait for that copy.
struct HeldBlock {
  Storage storage;
  std::shared_ptr<OffloadedTensor> entry;
};

struct OffloadGuard::State {
  explicit State(OffloadOptions o) : options(o) {}
  const OffloadOptions options;
  std::mutex mu;
  // Weak: an entry lives as long as the saved tensor that holds it (the graph), no longer.
  std::vector<std::weak_ptr<OffloadedTensor>> saved;
  // Backward needs the latest saved of the tensors it has not used yet: `cursor` walks
  // down the saved list to the next one to fetch; `in_flight` counts those fetched ahead.
  int64_t cursor = -1;
  int in_flight = 0;
  bool started = false;
  // Blocks copied out most recently, oldest first (at most options.copy_window).
  std::deque<HeldBlock> held;
  // The offloaded tensors by what they are a view of (storage, offset, sizes, strides,
  // dtype, version) and the stream that saved them: a tensor saved again, unchanged, on
  // the same stream shares the first save's copy. (Saved on another stream it gets its
  // own: a copy brought back into one stream's memory and read by another's node would
  // need record_stream, which keeps it reserved while the host runs ahead.)
  using ViewKey = std::tuple<uint64_t, int64_t, Shape, Shape, DType, uint32_t, StreamId>;
  std::map<ViewKey, std::weak_ptr<OffloadedTensor>> by_view;
  size_t offloaded_bytes = 0;  // by this guard

  std::any pack(const Tensor& t, const SavedTensorInfo& info);
  Tensor unpack(const std::any& packed);
  // A backward starts (again, for retain_graph): every saved tensor is needed anew.
  void start_round();
  void fetch_ahead();
  // Enqueues e's copy back to its device on the copy-in stream, into memory of the
  // stream that will use it (the saving op's).
  static void fetch(OffloadedTensor& e);
  // Gives held blocks beyond the newest `keep` back to the allocator (under mu).
  void release_held(size_t keep);
};

std::pair<Stream, Stream> offload_streams(Device device) {
  static std::mutex mu;
  static auto* streams = new std::map<Device, std::pair<Stream, Stream>>();
  std::lock_guard<std::mutex> lk(mu);
  auto it = streams->find(device);
  if (it == streams->end()) {
    it = streams->emplace(device, std::make_pair(Stream::create(device), Stream::create(device)))
             .first;
  }
  return it->second;
}

OffloadStats offload_stats() {
  return OffloadStats{g_offloaded.load(), g_offloaded_bytes.load(), g_prefetched.load(),
                      g_fetched_late.load(), g_deduplicated.load()};
}

std::any OffloadGuard::State::pack(const Tensor& t, const SavedTensorInfo& info) {
  auto e = std::make_shared<OffloadedTensor>();
  const size_t bytes = bytes_of(t);
  // Parameters (leaves that require grad) stay: their module holds them, so a copy would
  // free nothing. (An op may save its output before giving it a history, so "no producer"
  // alone does not mean a leaf.)
  const bool parameter = info.producer == nullptr && info.requires_grad;
  if (t.device().is_cpu() || bytes < options.min_bytes || parameter) {
    e->kept = t;
    return e;
  }
  // Storage ids are never reused, so a key cannot match another tensor that took the
  // memory of a freed one; the version tells an in-place change apart.
  const ViewKey key{t.storage().id(), t.storage_offset(), t.sizes(), t.strides(), t.dtype(),
                    t.version(), info.stream.id()};
  {
    std::lock_guard<std::mutex> lk(mu);
    auto it = by_view.find(key);
    if (it != by_view.end()) {
      if (std::shared_ptr<OffloadedTensor> first = it->second.lock()) {
        ++first->saves;
        ++g_deduplicated;
        return first;
      }
    }
  }
  // Runs on the saving op's stream, which is current here.
  const Tensor src = t.is_contiguous() ? t : contiguous(t);
  e->device = t.device();
  e->saved_on = info.stream;
  const Stream out = offload_streams(e->device).first;
  Event ready;
  ready.record(info.stream);
  ready.block(out);
  PinnedPool::Buffer buffer = pinned_pool().take(e->device, t.sizes(), t.dtype());
  if (!buffer.host.defined()) {
    // The memory history (tools/memviz) shows these host blocks as what was offloaded.
    MemoryCategoryScope offloaded("offloaded");
    buffer.host = empty_pinned(t.sizes(), t.dtype());
  }
  buffer.last_read.block(out);  // a recycled buffer: its last copy-in read it first
  e->host = std::move(buffer.host);
  {
    StreamGuard on(out);
    copy_bytes(e->host.data_ptr(), Device("cpu"), src.data_ptr(), e->device, bytes,
               /*non_blocking=*/true);
  }
  e->out_done.record(out);
  {
    std::lock_guard<std::mutex> lk(mu);
    e->index = saved.size();
    saved.push_back(e);
    by_view[key] = e;
    held.push_back(HeldBlock{src.storage(), e});
    release_held(static_cast<size_t>(options.copy_window));
    offloaded_bytes += bytes;
    pinned_pool().raise_limit(offloaded_bytes);
  }
  ++g_offloaded;
  g_offloaded_bytes += bytes;
  return e;
}

void OffloadGuard::State::release_held(size_t keep) {
  while (held.size() > keep) {
    HeldBlock h = std::move(held.front());
    held.pop_front();
    if (h.entry->out_done.query()) continue;  // copied already: any reuse is safe
    const Storage& storage = h.storage;
    try {
      h.entry->out_done.block(storage.stream());
    } catch (...) {
      OffloadedTensor::hold_until_copied(storage, offload_streams(h.entry->device).first);
      throw;
    }
  }
}

void OffloadGuard::State::fetch(OffloadedTensor& e) {
  const Stream owner = *e.saved_on;
  const Stream in = offload_streams(e.device).second;
  e.out_done.block(in);
  {
    StreamGuard on(owner);
    e.back = empty(e.host.sizes(), TensorOptions().dtype(e.host.dtype()).device(e.device));
  }
  // The block may have been given back by work still queued on `owner`: the copy waits
  // for that work before writing it.
  Event owner_done;
  owner_done.record(owner);
  owner_done.block(in);
  {
    StreamGuard on(in);
    copy_bytes(e.back.data_ptr(), e.device, e.host.data_ptr(), Device("cpu"), bytes_of(e.host),
               /*non_blocking=*/true);
  }
  e.in_done.record(in);
  e.fetched = true;
}

void OffloadGuard::State::start_round() {
  for (const std::weak_ptr<OffloadedTensor>& w : saved) {
    if (std::shared_ptr<OffloadedTensor> e = w.lock()) {
      e->consumed = false;
      e->taken = 0;
    }
  }
  cursor = static_cast<int64_t>(saved.size()) - 1;
  started = true;
}

void OffloadGuard::State::fetch_ahead() {
  for (; in_flight < options.prefetch && cursor >= 0; --cursor) {
    std::shared_ptr<OffloadedTensor> e = saved[static_cast<size_t>(cursor)].lock();
    if (e == nullptr || e->consumed || e->fetched) continue;
    fetch(*e);
    ++in_flight;
    ++g_prefetched;
  }
}

Tensor OffloadGuard::State::unpack(const std::any& packed) {
  const std::shared_ptr<OffloadedTensor>& e =
      std::any_cast<const std::shared_ptr<OffloadedTensor>&>(packed);
  if (e->kept.defined()) return e->kept;
  const Stream node = current_stream(e->device);  // the unpacking node's (S2)
  Tensor back;
  {
    std::lock_guard<std::mutex> lk(mu);
    if (!started || e->consumed) start_round();
    if (e->taken == 0) {  // the first of its saves to be unpacked in this backward
      if (e->fetched) {
        --in_flight;
      } else {
        fetch(*e);
        ++g_fetched_late;
      }
    }
    back = e->back;
    if (++e->taken == e->saves) {  // every save has it: the entry holds it no longer
      e->back = Tensor();
      e->fetched = false;
      e->consumed = true;
    }
    e->in_done.block(node);
    fetch_ahead();
  }
  // Unpacked on another stream than the saving op's (a hook that reads saved tensors
  // elsewhere): the block must not be reused in its stream's order while this one reads.
  const Storage storage = back.storage();
  if (storage.stream() != node) storage.record_stream(node);
  return back;
}

OffloadGuard::OffloadGuard(OffloadOptions options)
    : state_(std::make_shared<State>(check(options))),
      hooks_([state = state_](const Tensor& t,
                              const SavedTensorInfo& info) { return state->pack(t, info); },
             [state = state_](const std::any& packed) { return state->unpack(packed); }) {}

OffloadGuard::~OffloadGuard() {
  std::lock_guard<std::mutex> lk(state_->mu);
  try {
    state_->release_held(0);
  } catch (...) {
    // release_held left every block it could not order with the allocator's own
    // protection; the backend's next call reports the failure.
    for (HeldBlock& h : state_->held) {
      OffloadedTensor::hold_until_copied(h.storage, offload_streams(h.entry->device).first);
    }
    state_->held.clear();
  }
}

}  // namespace nn
}  // namespace streamgrad
