// Warnings: a channel for conditions that are legal but probably not what the user meant
// (the reference framework's TORCH_WARN and warning handlers).
//
//   SG_WARN("AccumulateGrad of ", leaf.describe(), " runs on ", s.str(), " ...");
//
//   WarningCollector collect;            // tests: this thread's warnings land here
//   ... code that warns ...
//   CHECK(collect.warnings().size() == 1);
//
//   set_warning_handler([](const Warning& w) { my_log(w.message); });  // process-wide
//
// Where a warning goes: to the innermost WarningSink installed on the raising thread
// (a WarningCollector, or the engine's buffer while a device worker runs a backward
// node: the engine hands those warnings to the thread that called backward() when
// backward ends); without a sink, to the process-wide handler; without a handler, to
// stderr, once per call site (file and line) for the life of the process.
//
// Thread-safety: warn() may be called from any thread; sinks are per thread; the
// process-wide handler is called under a lock, so it need not be thread-safe itself.
// Failure: a handler or sink that throws propagates out of warn() to the warning site.
#ifndef STREAMGRAD_RUNTIME_BASE_WARNING_H_
#define STREAMGRAD_RUNTIME_BASE_WARNING_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace streamgrad {

struct Warning {
  std::string message;
  std::string file;  // where it was raised
  int line = 0;
};

void warn(Warning warning);

using WarningHandler = std::function<void(const Warning&)>;
// Replaces the process-wide handler; an empty handler restores the default (stderr, once
// per call site).
void set_warning_handler(WarningHandler handler);

// Receives the warnings raised on the thread that installed it, for its lifetime.
class WarningSink {
 public:
  WarningSink();
  virtual ~WarningSink();
  WarningSink(const WarningSink&) = delete;
  WarningSink& operator=(const WarningSink&) = delete;
  virtual void handle(Warning warning) = 0;

 private:
  WarningSink* previous_;
};

// A sink that keeps every warning, in order.
class WarningCollector final : public WarningSink {
 public:
  void handle(Warning warning) override { warnings_.push_back(std::move(warning)); }
  const std::vector<Warning>& warnings() const { return warnings_; }

 private:
  std::vector<Warning> warnings_;
};

}  // namespace streamgrad

#define SG_WARN(...) \
  ::streamgrad::warn(::streamgrad::Warning{absl::StrCat(__VA_ARGS__), __FILE__, __LINE__})

#endif  // STREAMGRAD_RUNTIME_BASE_WARNING_H_
