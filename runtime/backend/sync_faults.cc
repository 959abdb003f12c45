#include "runtime/backend/sync_faults.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "runtime/backend/config.h"
#include "runtime/backend/launch.h"
#include "runtime/base/error.h"

namespace streamgrad {

struct SyncFaultScope::State {
  std::string drop;
  int64_t drop_index = 0;  // STREAMGRAD_DROP_SYNC=K
  bool print = false;      // STREAMGRAD_DROP_SYNC=list
  bool keep = true;        // keep every call for calls()
  std::function<void(const SyncCall&)> on_call;
  std::mutex mu;
  int64_t count = 0;
  std::map<std::string, int> occurrences;
  std::vector<SyncCall> calls;
  bool dropped = false;
};

namespace {

// Fault injection state: the active scope's state (or the environment's); the latest
// record of each event seen while on (a wait on an event last recorded while off names
// its stream "?", or the one of an older record of the same pooled event object); the
// names of code addresses (kept: they do not change while the process lives).
struct SyncFaultGlobals {
  std::mutex mu;
  std::shared_ptr<SyncFaultScope::State> active;
  std::shared_ptr<SyncFaultScope::State> from_env;
  std::unordered_map<const void*, std::string> records;
  std::mutex names_mu;
  std::unordered_map<void*, std::string> names;
};

SyncFaultGlobals& sync_globals() {
  static auto* g = new SyncFaultGlobals();  // never destroyed: calls may come at exit
  return *g;
}

// A function's name without namespaces of ours, arguments or qualifiers, then "+0x" and
// the address's offset in it; or "".
std::string function_name(void* address) {
  Dl_info info;
  if (dladdr(address, &info) == 0 || info.dli_sname == nullptr) return "";
  const uintptr_t offset =
      reinterpret_cast<uintptr_t>(address) - reinterpret_cast<uintptr_t>(info.dli_saddr);
  int status = 0;
  char* d = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
  std::string name = status == 0 && d != nullptr ? d : info.dli_sname;
  std::free(d);
  absl::StrReplaceAll({{"(anonymous namespace)::", ""}, {"streamgrad::", ""}}, &name);
  int angle = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '<') ++angle;
    if (name[i] == '>') --angle;
    if (name[i] == '(' && angle == 0 && !absl::EndsWith(name.substr(0, i), "operator")) {
      name.resize(i);
      break;
    }
  }
  return absl::StrCat(name, "+0x", absl::Hex(offset));
}

bool skipped_frame(const std::string& name) {
  for (const char* prefix : {"Event::", "std::", "Stream::wait_", "Storage::record_stream+",
                             "detail::sync_fault"}) {
    if (absl::StartsWith(name, prefix)) return true;
  }
  return false;
}

// The first two named callers outside the synchronisation calls themselves and the
// standard library (std::function's invokers). The first keeps its offset: one function
// may make several calls with the same streams (copy_bytes waits both ways), and the
// offset tells them apart.
std::string call_site() {
  void* frames[32];
  const int n = backtrace(frames, 32);
  std::vector<std::string> named;
  SyncFaultGlobals& g = sync_globals();
  for (int i = 1; i < n && named.size() < 2; ++i) {
    std::string name;
    {
      std::lock_guard<std::mutex> lk(g.names_mu);
      auto it = g.names.find(frames[i]);
      if (it == g.names.end()) {
        // The return address is past the call: look up the call itself.
        it = g.names.emplace(frames[i], function_name(static_cast<char*>(frames[i]) - 1)).first;
      }
      name = it->second;
    }
    if (name.empty() || skipped_frame(name)) continue;
    named.push_back(named.empty() ? name : name.substr(0, name.rfind("+0x")));
  }
  return named.empty() ? "?" : absl::StrJoin(named, " < ");
}

}  // namespace

std::string SyncCall::id() const {
  if (kind == SyncKind::kWait) {
    return absl::StrCat("wait ", stream, " <- ", other, " at ", site, " #", occurrence);
  }
  return absl::StrCat("record_stream ", stream, " (memory of ", other, ") at ", site, " #",
                      occurrence);
}

SyncFaultScope::SyncFaultScope(std::string drop, std::function<void(const SyncCall&)> on_call)
    : state_(std::make_shared<State>()) {
  state_->drop = std::move(drop);
  state_->on_call = std::move(on_call);
  config();  // STREAMGRAD_DROP_SYNC is installed first, so that this scope replaces it
  SyncFaultGlobals& g = sync_globals();
  std::lock_guard<std::mutex> lk(g.mu);
  SG_CHECK(g.active == nullptr || g.active == g.from_env, Error,
           "SyncFaultScope: another scope is alive; use one at a time");
  g.active = state_;
  detail::g_sync_faults_on.store(true);
}

SyncFaultScope::~SyncFaultScope() {
  SyncFaultGlobals& g = sync_globals();
  std::lock_guard<std::mutex> lk(g.mu);
  g.active = g.from_env;
  // The records stay: the next scope's waits may block an event recorded in this one.
  detail::g_sync_faults_on.store(g.active != nullptr);
}

std::vector<SyncCall> SyncFaultScope::calls() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->calls;
}

bool SyncFaultScope::dropped() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->dropped;
}

namespace detail {

std::atomic<bool> g_sync_faults_on{false};

void install_env_sync_faults(int64_t drop_index, bool print) {
  auto state = std::make_shared<SyncFaultScope::State>();
  state->drop_index = drop_index;
  state->print = print;
  state->keep = false;  // a long run would pile calls up
  SyncFaultGlobals& g = sync_globals();
  std::lock_guard<std::mutex> lk(g.mu);
  g.from_env = g.active = state;
  detail::g_sync_faults_on.store(true);
}

void sync_fault_note_record(const void* event, const Stream& stream) {
  SyncFaultGlobals& g = sync_globals();
  std::lock_guard<std::mutex> lk(g.mu);
  if (g.active != nullptr) g.records[event] = stream.str();
}

bool sync_fault_skip(SyncKind kind, const Stream& stream, const void* event,
                     const Stream* memory_stream) {
  SyncFaultGlobals& g = sync_globals();
  SyncCall c;
  std::shared_ptr<SyncFaultScope::State> st;
  {
    std::lock_guard<std::mutex> lk(g.mu);
    st = g.active;
    if (st == nullptr) return false;
    if (event != nullptr) {
      auto it = g.records.find(event);
      c.other = it != g.records.end() ? it->second : "?";
    }
  }
  if (memory_stream != nullptr) c.other = memory_stream->str();
  c.kind = kind;
  c.stream = stream.str();
  c.site = call_site();
  if (const std::string* scope = current_launch_scope()) c.scope = *scope;
  {
    std::lock_guard<std::mutex> lk(st->mu);
    c.index = ++st->count;
    c.occurrence = 1;  // id() without the occurrence is the key
    c.occurrence = ++st->occurrences[c.id()];
    c.dropped = st->drop_index == c.index || (!st->drop.empty() && c.id() == st->drop);
    st->dropped = st->dropped || c.dropped;
    if (st->keep) st->calls.push_back(c);
  }
  if (st->print) {
    std::fprintf(stderr, "streamgrad: sync %lld: %s%s\n", static_cast<long long>(c.index),
                 c.id().c_str(), c.dropped ? " (skipped)" : "");
  }
  if (st->on_call) st->on_call(c);
  return c.dropped;
}

}  // namespace detail

}  // namespace streamgrad
