#include "engine/saved_hooks.h"

#include <utility>
#include <vector>

#include "runtime/base/error.h"

namespace streamgrad {
namespace {

struct HookState {
  std::vector<std::shared_ptr<const SavedTensorsHookPair>> stack;
  std::optional<std::string> disabled;  // the message pushes are refused with
};

HookState& state() {
  thread_local HookState s;
  return s;
}

void push(PackHook pack, UnpackHook unpack) {
  HookState& s = state();
  if (s.disabled) throw Error(*s.disabled);
  SG_CHECK(pack != nullptr && unpack != nullptr, ValueError,
           "SavedTensorsHooks: both a pack and an unpack hook are needed");
  s.stack.push_back(std::make_shared<const SavedTensorsHookPair>(
      SavedTensorsHookPair{std::move(pack), std::move(unpack)}));
}

}  // namespace

SavedTensorsHooks::SavedTensorsHooks(PackHook pack, UnpackHook unpack) {
  push(std::move(pack), std::move(unpack));
}

SavedTensorsHooks::SavedTensorsHooks(SimplePackHook pack, UnpackHook unpack) {
  PackHook full;
  if (pack != nullptr) {
    full = [pack = std::move(pack)](const Tensor& t, const SavedTensorInfo&) { return pack(t); };
  }
  push(std::move(full), std::move(unpack));
}

SavedTensorsHooks::~SavedTensorsHooks() { state().stack.pop_back(); }

DisableSavedTensorsHooks::DisableSavedTensorsHooks(std::string error_message)
    : previous_(state().disabled) {
  state().disabled = std::move(error_message);
}

DisableSavedTensorsHooks::~DisableSavedTensorsHooks() { state().disabled = previous_; }

namespace detail {

std::shared_ptr<const SavedTensorsHookPair> current_saved_tensors_hooks() {
  const HookState& s = state();
  return s.stack.empty() ? nullptr : s.stack.back();
}

}  // namespace detail
}  // namespace streamgrad
