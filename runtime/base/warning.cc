#include "runtime/base/warning.h"

#include <cstdio>
#include <mutex>
#include <set>
#include <utility>

namespace streamgrad {
namespace {

thread_local WarningSink* t_sink = nullptr;

struct Global {
  std::mutex mu;
  WarningHandler handler;
  std::set<std::pair<std::string, int>> printed;  // call sites the default already printed
};

Global& global() {
  static auto* g = new Global();  // used by warnings raised during static destruction
  return *g;
}

}  // namespace

WarningSink::WarningSink() : previous_(t_sink) { t_sink = this; }
WarningSink::~WarningSink() { t_sink = previous_; }

void warn(Warning warning) {
  if (t_sink != nullptr) {
    t_sink->handle(std::move(warning));
    return;
  }
  Global& g = global();
  std::lock_guard<std::mutex> lk(g.mu);
  if (g.handler) {
    g.handler(warning);
    return;
  }
  if (!g.printed.emplace(warning.file, warning.line).second) return;
  std::fprintf(stderr, "streamgrad warning: %s (%s:%d)\n", warning.message.c_str(),
               warning.file.c_str(), warning.line);
}

void set_warning_handler(WarningHandler handler) {
  Global& g = global();
  std::lock_guard<std::mutex> lk(g.mu);
  g.handler = std::move(handler);
}

}  // namespace streamgrad
