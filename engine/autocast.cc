#include "engine/autocast.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace {

struct Cached {
  Tensor source;  // held so that its address is not reused while the entry lives
  Tensor cast;
};

struct State {
  bool enabled[kNumDeviceTypes] = {false, false, false};
  DType dtype[kNumDeviceTypes] = {DType::kBFloat16, DType::kFloat16, DType::kFloat16};
  int enabled_count = 0;  // device types enabled: active() is one load and compare
  int nesting = 0;
  int suspended = 0;
  bool cache = true;
  std::map<std::pair<const TensorImpl*, DType>, Cached> casts;
};

State& state() {
  thread_local State s;
  return s;
}

int index_of(DeviceType t) { return static_cast<int>(t); }

void set_enabled(State& s, DeviceType t, bool on) {
  bool& e = s.enabled[index_of(t)];
  if (e != on) s.enabled_count += on ? 1 : -1;
  e = on;
}

}  // namespace

DType default_autocast_dtype(DeviceType device_type) {
  return device_type == DeviceType::kCpu ? DType::kBFloat16 : DType::kFloat16;
}

AutocastGuard::AutocastGuard(DeviceType device_type, std::optional<DType> dtype, bool enabled,
                             bool cache_enabled)
    : type_(device_type) {
  const DType want = dtype.value_or(default_autocast_dtype(device_type));
  SG_CHECK(is_reduced_floating(want), ValueError, "AutocastGuard(", device_type_name(device_type),
           "): dtype ", dtype_name(want), " is not a lower-precision dtype; pass "
           "DType::kFloat16 or DType::kBFloat16 (or leave it out for the device's default, ",
           dtype_name(default_autocast_dtype(device_type)), ")");
  State& s = state();
  prev_enabled_ = s.enabled[index_of(type_)];
  prev_dtype_ = s.dtype[index_of(type_)];
  prev_cache_ = s.cache;
  set_enabled(s, type_, enabled);
  s.dtype[index_of(type_)] = want;
  s.cache = cache_enabled;
  ++s.nesting;
}

AutocastGuard::~AutocastGuard() {
  State& s = state();
  set_enabled(s, type_, prev_enabled_);
  s.dtype[index_of(type_)] = prev_dtype_;
  s.cache = prev_cache_;
  if (--s.nesting == 0) s.casts.clear();
}

bool is_autocast_enabled(DeviceType device_type) { return state().enabled[index_of(device_type)]; }

DType autocast_dtype(DeviceType device_type) { return state().dtype[index_of(device_type)]; }

namespace autocast_internal {

bool active() {
  const State& s = state();
  return s.enabled_count > 0 && s.suspended == 0;
}

Suspend::Suspend() { ++state().suspended; }
Suspend::~Suspend() { --state().suspended; }

bool cache_enabled() { return state().cache; }

Tensor cache_lookup(const Tensor& source, DType dtype) {
  const State& s = state();
  auto it = s.casts.find({source.impl(), dtype});
  return it == s.casts.end() ? Tensor() : it->second.cast;
}

void cache_insert(const Tensor& source, DType dtype, const Tensor& cast) {
  State& s = state();
  if (s.nesting == 0) return;  // no guard to clear it: do not keep it
  s.casts[{source.impl(), dtype}] = Cached{source, cast};
}

size_t cache_size() { return state().casts.size(); }

}  // namespace autocast_internal
}  // namespace streamgrad
