#include "runtime/backend/observer.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace streamgrad {
namespace {

struct Observers {
  std::mutex mu;
  std::vector<LaunchObserver*> list;
  std::atomic<int> count{0};  // lets launches skip the lock when nobody observes
};

Observers& observers() {
  static auto* o = new Observers();
  return *o;
}

// Installers are registered from static initialisers, in no particular order relative to
// other translation units: a function-local static is ready whenever the first one comes.
struct Plugins {
  std::mutex mu;
  std::vector<void (*)()> installers;
  bool installed = false;
};

Plugins& plugins() {
  static auto* p = new Plugins();
  return *p;
}

thread_local const std::string* t_launch_scope = nullptr;

}  // namespace

namespace detail {
bool have_observers() { return observers().count.load(std::memory_order_acquire) > 0; }

void notify_observers(const std::function<void(LaunchObserver&)>& fn) {
  if (!have_observers()) return;
  // An observer's own device work (the trace recorder times spans with cuda events) can
  // come back here from inside a notification when the backend reports orderings itself
  // (the interpreted CUDA device): it is none of the observers' business, and taking the
  // lock again would deadlock.
  thread_local bool notifying = false;
  if (notifying) return;
  Observers& o = observers();
  std::lock_guard<std::mutex> lk(o.mu);
  notifying = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{notifying};
  for (LaunchObserver* obs : o.list) fn(*obs);
}

namespace {
thread_local bool t_ordering_report = false;
}  // namespace

OrderingReport::OrderingReport() : previous_(t_ordering_report) { t_ordering_report = true; }
OrderingReport::~OrderingReport() { t_ordering_report = previous_; }
bool in_ordering_report() { return t_ordering_report; }

void install_observer_plugins() {
  // Every launch comes here; after the first, call_once is one atomic load. A launch on
  // another thread meanwhile waits, so no launch runs before the plug-ins are in.
  static std::once_flag once;
  std::call_once(once, [] {
    Plugins& p = plugins();
    std::vector<void (*)()> todo;
    {
      std::lock_guard<std::mutex> lk(p.mu);
      p.installed = true;
      todo = p.installers;
    }
    // Outside the lock: registering a plug-in from an installer runs it at once.
    for (void (*install)() : todo) install();
  });
}

HostFn wrap_host_work(const Stream& stream, HostFn fn) {
  if (!have_observers()) return fn;
  Observers& o = observers();
  std::lock_guard<std::mutex> lk(o.mu);
  for (LaunchObserver* obs : o.list) fn = obs->wrap_host_work(stream, std::move(fn));
  return fn;
}
}  // namespace detail

void register_observer_plugin(void (*install)()) {
  Plugins& p = plugins();
  bool now = false;
  {
    std::lock_guard<std::mutex> lk(p.mu);
    p.installers.push_back(install);
    now = p.installed;
  }
  if (now) install();
}

LaunchScope::LaunchScope(std::string label)
    : label_(std::move(label)), previous_(t_launch_scope) {
  t_launch_scope = &label_;
}

LaunchScope::~LaunchScope() { t_launch_scope = previous_; }

const std::string* current_launch_scope() { return t_launch_scope; }

void add_launch_observer(LaunchObserver* observer) {
  Observers& o = observers();
  std::lock_guard<std::mutex> lk(o.mu);
  o.list.push_back(observer);
  o.count.store(static_cast<int>(o.list.size()), std::memory_order_release);
}

void remove_launch_observer(LaunchObserver* observer) {
  Observers& o = observers();
  std::lock_guard<std::mutex> lk(o.mu);
  o.list.erase(std::remove(o.list.begin(), o.list.end(), observer), o.list.end());
  o.count.store(static_cast<int>(o.list.size()), std::memory_order_release);
}

}  // namespace streamgrad
