#include "nn/offload.h"

#include <any>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "engine/factories.h"
#include "engine/pinned.h"
#include "ops/ops.h"
#include "runtime/memory/copy.h"

namespace streamgrad {
namespace nn {
namespace {

std::atomic<size_t> g_offloaded{0}, g_offloaded_bytes{0}, g_prefetched{0}, g_fetched_late{0};

size_t bytes_of(const Tensor& t) { return static_cast<size_t>(t.numel()) * element_size(t.dtype()); }

}  // namespace

// One saved tensor.
struct OffloadedTensor {
  Tensor kept;  // a tensor left where it was (cpu, or small)
  Device device{"cpu"};
  Tensor host;     // the pinned copy
  Event out_done;  // the copy-out ran (copy-out stream)
  Tensor back;     // the device copy, from a fetch until a node takes it
  Event in_done;   // the latest copy-in ran (copy-in stream)
  bool fetched = false;   // a copy-in is enqueued and `back` not yet taken
  bool consumed = false;  // taken by its node in this backward
  size_t index = 0;       // in save order
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

  std::any pack(const Tensor& t, const SavedTensorInfo& info);
  Tensor unpack(const std::any& packed);
  // A backward starts (again, for retain_graph): every saved tensor is needed anew.
  void start_round();
  void fetch_ahead();
  // Enqueues e's copy back to its device on the copy-in stream.
  static void fetch(OffloadedTensor& e);
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
                      g_fetched_late.load()};
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
  // Runs on the saving op's stream, which is current here.
  const Tensor src = t.is_contiguous() ? t : contiguous(t);
  e->device = t.device();
  const Stream out = offload_streams(e->device).first;
  Event ready;
  ready.record(info.stream);
  ready.block(out);
  e->host = empty_pinned(t.sizes(), t.dtype());
  {
    StreamGuard on(out);
    copy_bytes(e->host.data_ptr(), Device("cpu"), src.data_ptr(), e->device, bytes,
               /*non_blocking=*/true);
  }
  src.storage().record_stream(out);  // the device block outlives the copy that reads it
  e->out_done.record(out);
  {
    std::lock_guard<std::mutex> lk(mu);
    e->index = saved.size();
    saved.push_back(e);
  }
  ++g_offloaded;
  g_offloaded_bytes += bytes;
  return e;
}

void OffloadGuard::State::fetch(OffloadedTensor& e) {
  const Stream in = offload_streams(e.device).second;
  e.out_done.block(in);
  {
    StreamGuard on(in);
    e.back = empty(e.host.sizes(), TensorOptions().dtype(e.host.dtype()).device(e.device));
    copy_bytes(e.back.data_ptr(), e.device, e.host.data_ptr(), Device("cpu"), bytes_of(e.host),
               /*non_blocking=*/true);
  }
  e.in_done.record(in);
  e.fetched = true;
}

void OffloadGuard::State::start_round() {
  for (const std::weak_ptr<OffloadedTensor>& w : saved) {
    if (std::shared_ptr<OffloadedTensor> e = w.lock()) e->consumed = false;
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
    if (e->fetched) {
      --in_flight;
    } else {
      fetch(*e);
      ++g_fetched_late;
    }
    back = std::move(e->back);
    e->back = Tensor();
    e->fetched = false;
    e->consumed = true;
    e->in_done.block(node);
    fetch_ahead();
  }
  back.storage().record_stream(node);  // made on the copy-in stream, used on the node's
  return back;
}

OffloadGuard::OffloadGuard(OffloadOptions options)
    : state_(std::make_shared<State>(options)),
      hooks_([state = state_](const Tensor& t,
                              const SavedTensorInfo& info) { return state->pack(t, info); },
             [state = state_](const std::any& packed) { return state->unpack(packed); }) {}

}  // namespace nn
}  // namespace streamgrad
