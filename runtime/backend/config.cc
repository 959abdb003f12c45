#include "runtime/backend/config.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/backend/cuda_settings.h"
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


const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

bool env_flag(const char* name) {
  const char* v = env(name);
  if (v == nullptr) return false;
  const std::string s(v);
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s == "0" || s == "false" || s == "no" || s == "off") return false;
  throw ValueError(absl::StrCat(name, "=", s, " is not a boolean; use 1 or 0"));
}

template <typename T>
T env_number(const char* name, T fallback) {
  const char* v = env(name);
  if (v == nullptr) return fallback;
  T out{};
  if (!absl::SimpleAtoi(v, &out)) {
    throw ValueError(absl::StrCat(name, "=", v, " is not a valid whole number"));
  }
  return out;
}

CpuCapability parse_cpu_capability(const std::string& s) {
  for (CpuCapability c : {CpuCapability::kDefault, CpuCapability::kAvx2, CpuCapability::kAvx512}) {
    if (s == cpu_capability_name(c)) return c;
  }
  throw ValueError(absl::StrCat("STREAMGRAD_CPU_CAPABILITY=", s,
                                " is not a level; use default, avx2 or avx512"));
}

RuntimeConfig load() {
  RuntimeConfig c;
  c.launch_blocking = env_flag("STREAMGRAD_LAUNCH_BLOCKING");
  c.no_memory_caching = env_flag("STREAMGRAD_NO_MEMORY_CACHING");
  c.sanitize_streams = env_flag("STREAMGRAD_SANITIZE_STREAMS");
  c.allow_tf32 = env_flag("STREAMGRAD_ALLOW_TF32");
  if (const char* t = env("STREAMGRAD_TRACE")) {
    // Checked now, before any work: finding out at exit would lose the whole run's trace.
    const std::string problem = unwritable_reason(t);
    if (problem.empty()) {
      c.trace_path = t;
    } else {
      std::fprintf(stderr,
                   "streamgrad: STREAMGRAD_TRACE=%s cannot be written (%s); tracing is off. "
                   "Point it at a file in a folder that exists and is writable.\n",
                   t, problem.c_str());
    }
  }
  c.sim_devices = env_number<int>("STREAMGRAD_SIM_DEVICES", 2);
  SG_CHECK(c.sim_devices >= 0 && c.sim_devices <= 64, ValueError,
           "STREAMGRAD_SIM_DEVICES=", c.sim_devices, " must be in [0, 64]");
  const char* visible = env("STREAMGRAD_VISIBLE_DEVICES");
  c.sim_visible = parse_visible_devices(visible ? visible : "", c.sim_devices);
  c.sim_memory_bytes = env_number<uint64_t>("STREAMGRAD_SIM_MEMORY_BYTES", 0);
  if (const char* s = env("STREAMGRAD_SIM_SCHEDULER")) c.sim_scheduler = s;
  if (const char* p = env("STREAMGRAD_SIM_POLICY")) c.sim_policy = p;
  c.sim_seed = env_number<uint64_t>("STREAMGRAD_SIM_SEED", 0);
  c.sim_jitter_us = env_number<int>("STREAMGRAD_SIM_JITTER_US", 0);
  SG_CHECK(c.sim_jitter_us >= 0, ValueError, "STREAMGRAD_SIM_JITTER_US must be >= 0");
  c.sim_pct_depth = env_number<int>("STREAMGRAD_SIM_PCT_DEPTH", kSimDefaultPctDepth);
  SG_CHECK(c.sim_pct_depth >= 1 && c.sim_pct_depth <= kSimMaxPctDepth, ValueError,
           "STREAMGRAD_SIM_PCT_DEPTH=", c.sim_pct_depth, " must be in [1, ", kSimMaxPctDepth, "]");
  c.sim_pct_steps = env_number<uint64_t>("STREAMGRAD_SIM_PCT_STEPS", kSimDefaultPctSteps);
  SG_CHECK(c.sim_pct_steps >= 1, ValueError, "STREAMGRAD_SIM_PCT_STEPS must be at least 1");
  c.sim_queue_depth = env_number<int>("STREAMGRAD_SIM_QUEUE_DEPTH", kSimDefaultQueueDepth);
  SG_CHECK(c.sim_queue_depth >= 1, ValueError, "STREAMGRAD_SIM_QUEUE_DEPTH=", c.sim_queue_depth,
           " must be at least 1");
  c.sim_workers = env_number<int>("STREAMGRAD_SIM_WORKERS", kSimDefaultWorkers);
  SG_CHECK(c.sim_workers >= 1, ValueError, "STREAMGRAD_SIM_WORKERS=", c.sim_workers,
           " must be at least 1");
  c.num_threads = env_number<int>("STREAMGRAD_NUM_THREADS", 0);
  SG_CHECK(env("STREAMGRAD_NUM_THREADS") == nullptr ||
               (c.num_threads >= 1 && c.num_threads <= kMaxThreads),
           ValueError, "STREAMGRAD_NUM_THREADS=", c.num_threads, " must be in [1, ",
           kMaxThreads, "]");
  if (const char* level = env("STREAMGRAD_CPU_CAPABILITY")) {
    c.cpu_capability_set = true;
    c.cpu_capability = parse_cpu_capability(level);
  }
  if (const char* drop = env("STREAMGRAD_DROP_SYNC")) {
    int64_t k = 0;
    const bool list = std::string(drop) == "list";
    SG_CHECK(list || (absl::SimpleAtoi(drop, &k) && k >= 1), ValueError,
             "STREAMGRAD_DROP_SYNC=", drop, " is neither 'list' nor a call number >= 1; run "
             "with STREAMGRAD_DROP_SYNC=list to see the calls");
    install_env_sync_faults(k, list);
  }
  return c;
}

// A boolean setting that follows its environment variable until code sets it.
class Override {
 public:
  bool get(bool from_env) const {
    const int o = v_.load(std::memory_order_relaxed);
    return o < 0 ? from_env : o != 0;
  }
  void set(bool on) { v_.store(on ? 1 : 0); }

 private:
  std::atomic<int> v_{-1};  // -1: follow the environment
};

Override& blocking_override() {
  static Override o;
  return o;
}

Override& tf32_override() {
  static Override o;
  return o;
}

Override& cudnn_tf32_override() {
  static Override o;
  return o;
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

const RuntimeConfig& config() {
  static const RuntimeConfig* c = new RuntimeConfig(load());
  return *c;
}

std::vector<int> parse_visible_devices(const std::string& spec, int physical) {
  std::vector<int> out;
  if (absl::StripAsciiWhitespace(spec).empty()) {
    for (int i = 0; i < physical; ++i) out.push_back(i);
    return out;
  }
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    part = absl::StripAsciiWhitespace(part);
    int index = -1;
    if (!absl::SimpleAtoi(part, &index) || index < 0 || index >= physical) {
      throw ValueError(absl::StrCat("STREAMGRAD_VISIBLE_DEVICES=\"", spec, "\": \"", part,
                                    "\" is not a device index in [0, ", physical,
                                    ") (STREAMGRAD_SIM_DEVICES=", physical, ")"));
    }
    for (int seen : out) {
      SG_CHECK(seen != index, ValueError, "STREAMGRAD_VISIBLE_DEVICES=\"", spec,
               "\" names device ", index, " twice");
    }
    out.push_back(index);
  }
  return out;
}

std::string unwritable_reason(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return "it is a folder";
    if (access(path.c_str(), W_OK) != 0) return std::strerror(errno);
    return "";
  }
  if (errno != ENOENT) return std::strerror(errno);
  const size_t slash = path.find_last_of('/');
  const std::string folder =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  if (stat(folder.c_str(), &st) != 0) {
    return absl::StrCat("folder '", folder, "': ", std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) return absl::StrCat("'", folder, "' is not a folder");
  if (access(folder.c_str(), W_OK | X_OK) != 0) {
    return absl::StrCat("folder '", folder, "': ", std::strerror(errno));
  }
  return "";
}

bool launch_blocking() { return blocking_override().get(config().launch_blocking); }

void set_launch_blocking(bool on) { blocking_override().set(on); }

bool matmul_allow_tf32() { return tf32_override().get(config().allow_tf32); }

void set_matmul_allow_tf32(bool allow) { tf32_override().set(allow); }

bool cudnn_allow_tf32() { return cudnn_tf32_override().get(config().allow_tf32); }

void set_cudnn_allow_tf32(bool allow) { cudnn_tf32_override().set(allow); }

}  // namespace streamgrad
