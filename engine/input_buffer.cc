#include "engine/input_buffer.h"

#include "engine/grad_mode.h"
#include "runtime/backend/devices.h"
#include "runtime/backend/guard.h"

namespace streamgrad {
namespace {

// S8: a gradient read on a stream other than its allocation stream must not be reused
// before that read completes.
void note_use(const Tensor& t, const Stream& s) {
  if (t.device() == s.device() && t.storage().stream() != s) t.storage().record_stream(s);
}

// Whether `t` may be written in place on `stream`: nothing else holds it, and no other
// stream was handed it. A node may pass one gradient to several consumers (AddBackward's
// two inputs get the same tensor); one that read it on its own stream and dropped its
// handle may still have that read queued, which a write here would overtake (S8 keeps
// the memory alive, not its value).
bool writable_on(const Tensor& t, const Stream& stream) {
  return sole_owner(t) && !t.requires_grad() && t.storage().used_only_on(stream);
}

// acc + g, into acc's memory when nothing else can see it (as the reference engine
// does): an n-way fan-in then allocates nothing. Under create_graph the sum must be
// recorded, so it stays out of place. Float addition commutes exactly, so either
// operand may be the one written.
Tensor accumulate(Tensor acc, Tensor g, const Stream& stream) {
  if (!grad_mode_enabled() && acc.dtype() == g.dtype() && acc.sizes() == g.sizes()) {
    if (!writable_on(acc, stream) && writable_on(g, stream)) std::swap(acc, g);
    if (writable_on(acc, stream)) {
      accumulate_into(acc, g, stream);
      return acc;
    }
  }
  return engine_add()(acc, g);
}

// Orders work on `consumer` after `e`: a device-side wait between streams of one device
// type; a host wait across types (a gradient that crossed from cuda to sim, say), which no
// backend can order on the device.
void order_after(const Event& e, const Stream& consumer) {
  if (e.device() && !e.device()->is_cpu() && e.device()->type() != consumer.device().type()) {
    e.synchronize();
  } else {
    e.block(consumer);
  }
}

}  // namespace

void InputBuffer::add(size_t pos, Tensor&& value, const std::optional<Stream>& producer,
                      const std::optional<Stream>& consumer) {
  if (!value.defined()) return;
  Slot& slot = slots_[pos];
  const Device device = value.device();
  if (!slot.value.defined()) {
    slot.value = std::move(value);
    slot.stream = producer;
    if (!device.is_cpu()) {
      if (consumer && consumer->device() == device) {
        slot.accum = consumer;
      } else if (producer && producer->device() == device) {
        slot.accum = producer;
      } else {
        slot.accum = current_stream(device);
      }
    }
    if (producer && (producer != consumer || producer != slot.accum)) {
      slot.ready = std::make_unique<Event>();
      slot.ready->record(*producer);
    }
    return;
  }
  if (device.is_cpu()) {
    // Host gradients: every producer already finished before handing them over.
    slot.value = accumulate(std::move(slot.value), std::move(value), current_stream(device));
    slot.stream.reset();
    slot.ready.reset();
    return;
  }
  const Stream a = *slot.accum;
  if (slot.ready && slot.stream != a) order_after(*slot.ready, a);
  if (producer && *producer != a) {
    Event e;
    e.record(*producer);
    order_after(e, a);
  }
  note_use(slot.value, a);
  note_use(value, a);
  {
    StreamGuard on_a(a);
    slot.value = accumulate(std::move(slot.value), std::move(value), a);
  }
  slot.stream = a;
  slot.ready.reset();
  if (consumer != slot.stream) {
    slot.ready = std::make_unique<Event>();
    slot.ready->record(a);
  }
}

void InputBuffer::wait_ready(const std::optional<Stream>& consumer) {
  for (Slot& slot : slots_) {
    if (!slot.value.defined()) continue;
    if (slot.ready) {
      if (consumer) {
        if (slot.stream != consumer) order_after(*slot.ready, *consumer);
      } else {
        slot.ready->synchronize();  // a cpu consumer reads on the host
      }
    }
    if (consumer) note_use(slot.value, *consumer);
  }
}

TensorList InputBuffer::take() {
  TensorList out;
  out.reserve(slots_.size());
  for (Slot& slot : slots_) out.push_back(std::move(slot.value));
  return out;
}

}  // namespace streamgrad
