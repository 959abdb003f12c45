#include "distributed/process_group.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "distributed/store.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace distributed {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, ProcessGroupFactory> factories;
};

// Backends register from static initialisers, in any order: ready on first use.
Registry& registry() {
  static auto* r = new Registry();
  return *r;
}

// What init_process_group says about a backend this program lacks.
std::string missing_backend(const std::string& backend, const std::string& linked) {
  std::string why;
  if (backend == "gloo") {
    why = "; 'gloo' is in the full library: link //:streamgrad (or libstreamgrad.so), not "
          "//:streamgrad_lean";
  } else if (backend == "nccl") {
    why = "; 'nccl' needs a build of the full library (//:streamgrad) on a machine with the "
          "CUDA toolkit";
  }
  return absl::StrCat("init_process_group: backend '", backend, "' is not in this program (",
                      linked.empty() ? "it links no process-group backend"
                                     : absl::StrCat("it has ", linked),
                      ")", why);
}

int env_int(const char* name) {
  const char* v = std::getenv(name);
  int out = 0;
  SG_CHECK(v != nullptr && absl::SimpleAtoi(v, &out), DistributedError,
           "init_process_group_from_env: ", name, " is ", v == nullptr ? "not set" : "malformed",
           v == nullptr ? "" : absl::StrCat(" ('", v, "')"),
           "; start the processes with tools/launch, or set MASTER_ADDR, MASTER_PORT, RANK "
           "and WORLD_SIZE");
  return out;
}

}  // namespace

void register_process_group_backend(const std::string& name, ProcessGroupFactory factory) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  SG_CHECK(r.factories.emplace(name, factory).second, InternalError,
           "register_process_group_backend: '", name, "' is registered twice");
}

std::shared_ptr<ProcessGroup> init_process_group(const std::string& backend, int rank,
                                                 int world_size, std::shared_ptr<Store> store,
                                                 std::chrono::milliseconds timeout) {
  SG_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, DistributedError,
           "init_process_group: rank ", rank, " is not in a world of ", world_size,
           " (ranks are 0 to WORLD_SIZE - 1)");
  SG_CHECK(store != nullptr, DistributedError, "init_process_group: the store is null");
  ProcessGroupFactory make = nullptr;
  std::string linked;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lk(r.mu);
    auto it = r.factories.find(backend);
    if (it != r.factories.end()) {
      make = it->second;
    } else {
      linked = absl::StrJoin(r.factories, " and ", [](std::string* out, const auto& kv) {
        absl::StrAppend(out, "'", kv.first, "'");
      });
    }
  }
  if (make == nullptr) throw DistributedError(missing_backend(backend, linked));
  return make(rank, world_size, std::move(store), timeout);
}

std::shared_ptr<ProcessGroup> init_process_group_from_env(const std::string& backend,
                                                          std::chrono::milliseconds timeout) {
  const char* addr = std::getenv("MASTER_ADDR");
  SG_CHECK(addr != nullptr && *addr != '\0', DistributedError,
           "init_process_group_from_env: MASTER_ADDR is not set; start the processes with "
           "tools/launch, or set MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE");
  const int port = env_int("MASTER_PORT"), rank = env_int("RANK"), world = env_int("WORLD_SIZE");
  SG_CHECK(world >= 1 && rank >= 0 && rank < world, DistributedError,
           "init_process_group_from_env: RANK ", rank, " is not in a world of WORLD_SIZE ",
           world);
  auto store = std::make_shared<TCPStore>(addr, port, world, rank == 0, timeout);
  return init_process_group(backend, rank, world, std::move(store), timeout);
}

}  // namespace distributed
}  // namespace streamgrad
