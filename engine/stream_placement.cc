#include "engine/stream_placement.h"

#include "runtime/backend/devices.h"

namespace streamgrad {
namespace {
thread_local StreamPlacementScope* t_scope = nullptr;
}  // namespace

StreamPlacementScope::StreamPlacementScope(const std::vector<Stream>& rotation)
    : previous_(t_scope) {
  for (const Stream& s : rotation) {
    rotation_[s.device()].push_back(s);
    if (restore_.count(s.device()) == 0) restore_.emplace(s.device(), current_stream(s.device()));
  }
  t_scope = this;
}

StreamPlacementScope::~StreamPlacementScope() {
  for (const auto& [device, stream] : restore_) {
    // Later work on the original stream sees everything the rotation did.
    stream.wait_stream(current_stream(device));
    set_current_stream(stream);
  }
  t_scope = previous_;
}

void op_recorded(absl::Span<const Tensor> outputs) {
  StreamPlacementScope* scope = t_scope;
  if (scope == nullptr || outputs.empty()) return;
  for (const Tensor& t : outputs) scope->outputs_.push_back(t);
  const Device device = outputs[0].device();
  auto it = scope->rotation_.find(device);
  if (it == scope->rotation_.end()) return;
  size_t& next = scope->next_[device];
  const Stream s = it->second[next++ % it->second.size()];
  s.wait_stream(current_stream(device));
  set_current_stream(s);
}

}  // namespace streamgrad
