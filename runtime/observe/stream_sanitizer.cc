#include "runtime/observe/stream_sanitizer.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "runtime/backend/config.h"

namespace streamgrad {

StreamSanitizer::StreamSanitizer(Mode mode) : mode_(mode) { add_launch_observer(this); }

StreamSanitizer::~StreamSanitizer() { remove_launch_observer(this); }

std::vector<SanitizerFinding> StreamSanitizer::findings() const {
  std::lock_guard<std::mutex> lk(mu_);
  return findings_;
}

size_t StreamSanitizer::history_size() const {
  std::lock_guard<std::mutex> lk(mu_);
  return memory_.size() + buffers_.size();
}

void StreamSanitizer::clear_findings() {
  std::lock_guard<std::mutex> lk(mu_);
  findings_.clear();
}

int StreamSanitizer::index_of(const Stream& s) {
  auto it = stream_index_.find(s);
  if (it != stream_index_.end()) return it->second;
  const int index = static_cast<int>(streams_.size());
  streams_.push_back(s);
  clocks_.emplace_back();
  stream_index_.emplace(s, index);
  return index;
}

void StreamSanitizer::merge(Clock& into, const Clock& from) {
  if (into.size() < from.size()) into.resize(from.size(), 0);
  for (size_t i = 0; i < from.size(); ++i) into[i] = std::max(into[i], from[i]);
}

bool StreamSanitizer::ordered(const Clock& c, const Epoch& e) const {
  if (e.stream < 0) return true;
  return static_cast<size_t>(e.stream) < c.size() && c[e.stream] >= e.tick;
}

void StreamSanitizer::split_at(uintptr_t at) {
  auto it = memory_.upper_bound(at);
  if (it == memory_.begin()) return;
  --it;
  if (it->first >= at || it->second.end <= at) return;
  Segment tail = it->second;  // the part from `at` keeps the same history
  it->second.end = at;
  memory_.emplace(at, std::move(tail));
}

const std::string* StreamSanitizer::intern(const std::string& name) {
  return &*names_.insert(name).first;
}

uint64_t StreamSanitizer::buffer_at(uintptr_t p) const {
  auto it = buffers_.upper_bound(p);
  if (it == buffers_.begin()) return 0;
  --it;
  return p < it->second.end ? it->second.id : 0;
}

std::string StreamSanitizer::describe_access(const Epoch& e, bool write, bool past) const {
  std::string out = *e.op;
  if (e.node != nullptr) absl::StrAppend(&out, " (in ", *e.node, ")");
  const char* verb = past ? (write ? ", which wrote" : ", which read") : (write ? " writes" : " reads");
  absl::StrAppend(&out, " on ", streams_[e.stream].str(), verb,
                  " bytes [0x", absl::Hex(e.begin), ", 0x", absl::Hex(e.end), ")");
  if (e.buffer != 0) absl::StrAppend(&out, " of buffer #", e.buffer);
  return out;
}

SanitizerFinding StreamSanitizer::describe(const Epoch& now, bool now_write, const Epoch& before,
                                           bool before_write) const {
  SanitizerFinding f{
      SanitizerAccess{*now.op, now.node ? *now.node : "", streams_[now.stream], now.buffer,
                      now.begin, now.end, now_write},
      SanitizerAccess{*before.op, before.node ? *before.node : "", streams_[before.stream],
                      before.buffer, before.begin, before.end, before_write},
      ""};
  std::string reuse;
  if (now.buffer != 0 && before.buffer != 0 && now.buffer != before.buffer) {
    reuse = absl::StrCat(" Buffer #", before.buffer, " was freed and its memory handed out again as"
                         " buffer #", now.buffer, " while ", streams_[before.stream].str(),
                         " could still use it.");
  }
  f.message = absl::StrCat(
      "stream sanitizer: ", describe_access(now, now_write, false), " but is not ordered after ",
      describe_access(before, before_write, true), ".", reuse,
      " Make the second stream wait for the first (Event record/block or wait_stream), "
      "synchronize the first, or record_stream() a buffer freed while another stream uses it");
  return f;
}

void StreamSanitizer::access(int s, const Clock& c, const Epoch& now, bool write,
                             std::vector<SanitizerFinding>& out) {
  const uintptr_t b = now.begin, e = now.end;
  if (b >= e) return;
  split_at(b);
  split_at(e);
  bool reported = false;
  uintptr_t cursor = b;
  auto it = memory_.lower_bound(b);
  while (cursor < e) {
    if (it == memory_.end() || it->first > cursor) {
      const uintptr_t gap_end = it == memory_.end() ? e : std::min(it->first, e);
      it = memory_.emplace(cursor, Segment{gap_end, Epoch{}, {}}).first;
    }
    Segment& seg = it->second;
    if (!reported && !ordered(c, seg.last_write)) {
      out.push_back(describe(now, write, seg.last_write, true));
      reported = true;
    }
    if (write) {
      for (const auto& [stream, read] : seg.reads) {
        if (!reported && stream != s && !ordered(c, read)) {
          out.push_back(describe(now, true, read, false));
          reported = true;
        }
      }
      seg.last_write = now;
      seg.reads.clear();
    } else {
      seg.reads[s] = now;
    }
    cursor = seg.end;
    ++it;
  }
}

void StreamSanitizer::on_launch(const Stream& stream, const LaunchDesc& desc) {
  std::vector<SanitizerFinding> found;
  {
    std::lock_guard<std::mutex> lk(mu_);
    const int s = index_of(stream);
    Clock& c = clocks_[s];
    merge(c, host_);  // enqueued after everything the host has seen complete
    if (c.size() <= static_cast<size_t>(s)) c.resize(s + 1, 0);
    ++c[s];
    const std::string* scope = current_launch_scope();
    const std::string* node = scope != nullptr ? intern(*scope) : nullptr;
    const std::string* op = intern(desc.name);
    for (const MemRange& r : desc.reads) {
      const uintptr_t b = reinterpret_cast<uintptr_t>(r.ptr);
      access(s, c, Epoch{s, c[s], op, b, b + r.bytes, node, buffer_at(b)}, false, found);
    }
    for (const MemRange& r : desc.writes) {
      const uintptr_t b = reinterpret_cast<uintptr_t>(r.ptr);
      access(s, c, Epoch{s, c[s], op, b, b + r.bytes, node, buffer_at(b)}, true, found);
    }
    findings_.insert(findings_.end(), found.begin(), found.end());
    // cpu work completes before launch() returns: the host has seen it at once.
    if (stream.device().is_cpu()) merge(host_, c);
  }
  if (mode_ == Mode::kThrow && suppressed_.load() == 0 && !found.empty()) {
    throw SanitizerError(found.front());
  }
}

void StreamSanitizer::on_event_record(const void* event, const Stream& stream) {
  std::lock_guard<std::mutex> lk(mu_);
  Clock c = clocks_[index_of(stream)];
  merge(c, host_);
  events_[event] = std::move(c);
}

void StreamSanitizer::on_event_block(const void* event, const Stream& stream) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = events_.find(event);
  if (it == events_.end()) return;  // never recorded: waiting on it orders nothing
  const int s = index_of(stream);
  merge(clocks_[s], it->second);
}

void StreamSanitizer::on_event_complete(const void* event) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = events_.find(event);
  if (it != events_.end()) merge(host_, it->second);
}

void StreamSanitizer::on_stream_synchronize(const Stream& stream) {
  std::lock_guard<std::mutex> lk(mu_);
  merge(host_, clocks_[index_of(stream)]);
}

void StreamSanitizer::forget_done(const Clock& done, const void* ptr, size_t bytes) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(ptr), e = b + bytes;
  split_at(b);
  split_at(e);
  // Accesses ordered before `done` are over; the rest stay as ordered as they were. (A
  // write before `done` was itself ordered after the writes before it, or was reported.)
  for (auto it = memory_.lower_bound(b); it != memory_.end() && it->first < e; ++it) {
    Segment& seg = it->second;
    if (seg.last_write.stream >= 0 && ordered(done, seg.last_write)) seg.last_write = Epoch{};
    for (auto r = seg.reads.begin(); r != seg.reads.end();) {
      r = ordered(done, r->second) ? seg.reads.erase(r) : std::next(r);
    }
  }
}

void StreamSanitizer::on_stream_done_with(const Stream& stream, const void* ptr, size_t bytes) {
  std::lock_guard<std::mutex> lk(mu_);
  const int s = index_of(stream);  // may grow clocks_: index after it
  forget_done(clocks_[s], ptr, bytes);
}

void StreamSanitizer::on_event_done_with(const void* event, const void* ptr, size_t bytes) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = events_.find(event);
  if (it != events_.end()) forget_done(it->second, ptr, bytes);
}

void StreamSanitizer::on_device_synchronize(Device device) {
  std::lock_guard<std::mutex> lk(mu_);
  for (size_t i = 0; i < streams_.size(); ++i) {
    if (streams_[i].device() == device) merge(host_, clocks_[i]);
  }
}

void StreamSanitizer::on_memory_reset(const void* ptr, size_t bytes) {
  std::lock_guard<std::mutex> lk(mu_);
  const uintptr_t b = reinterpret_cast<uintptr_t>(ptr), e = b + bytes;
  split_at(b);
  split_at(e);
  memory_.erase(memory_.lower_bound(b), memory_.lower_bound(e));
  erase_buffers(b, e);
}

void StreamSanitizer::erase_buffers(uintptr_t b, uintptr_t e) {
  auto first = buffers_.upper_bound(b);
  if (first != buffers_.begin() && std::prev(first)->second.end > b) --first;
  buffers_.erase(first, buffers_.lower_bound(e));
}

void StreamSanitizer::on_buffer_allocated(const void* ptr, size_t bytes, const Stream&) {
  std::lock_guard<std::mutex> lk(mu_);
  const uintptr_t b = reinterpret_cast<uintptr_t>(ptr), e = b + bytes;
  erase_buffers(b, e);  // freed since: the allocator does not report frees of blocks
  buffers_.emplace(b, Buffer{e, next_buffer_++});
}

void StreamSanitizer::suppress(int delta) {
  suppressed_.fetch_add(delta);
  if (delta < 0 && suppressed_.load() == 0) clear_findings();
}

SanitizerSuppression::SanitizerSuppression() {
  if (StreamSanitizer* s = global_stream_sanitizer()) s->suppress(1);
}

SanitizerSuppression::~SanitizerSuppression() {
  if (StreamSanitizer* s = global_stream_sanitizer()) s->suppress(-1);
}

StreamSanitizer* global_stream_sanitizer() {
  static StreamSanitizer* global =
      config().sanitize_streams ? new StreamSanitizer(StreamSanitizer::Mode::kThrow) : nullptr;
  return global;
}

// STREAMGRAD_SANITIZE_STREAMS takes effect wherever this library is linked.
static const ObserverPlugin kPlugin([] { global_stream_sanitizer(); });

}  // namespace streamgrad
