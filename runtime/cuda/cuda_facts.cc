#include "runtime/cuda/cuda_facts.h"

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"

namespace streamgrad {
namespace {

// 12080 -> "12.8", as nvidia-smi prints CUDA versions.
std::string version(int v) { return absl::StrCat(v / 1000, ".", (v % 1000) / 10); }

// The kernel module's release, read from the file the module publishes (NVML would be one
// more library for one string).
std::string driver_release() {
  std::ifstream f("/proc/driver/nvidia/version");
  std::string line;
  if (!f || !std::getline(f, line)) return "not installed";
  return nvidia_driver_release(line);
}

}  // namespace

std::string nvidia_driver_release(const std::string& version_line) {
  const size_t module = version_line.find("Kernel Module");
  if (module == std::string::npos) return "unknown";
  // The proprietary module names its release right after "Kernel Module"; the open one
  // puts "for x86_64" between them, so the release is the first word that starts with a
  // digit.
  std::istringstream rest(version_line.substr(module + 13));
  std::string word;
  while (rest >> word) {
    if (word[0] >= '0' && word[0] <= '9') return word;
  }
  return "unknown";
}

Facts cuda_backend_facts(int count, cudaError_t count_error) {
  int runtime = 0, driver = 0;
  (void)cudaRuntimeGetVersion(&runtime);
  (void)cudaDriverGetVersion(&driver);  // 0 where no driver is installed
  (void)cudaGetLastError();
  Facts f = {{"runtime", version(runtime)},
             {"driver", driver_release()},
             {"driver's CUDA", driver == 0 ? "none" : version(driver)}};
  if (count == 0) {
    f.emplace_back("no devices because",
                   count_error == cudaSuccess
                       ? "cudaGetDeviceCount found none"
                       : absl::StrCat("cudaGetDeviceCount: ", cudaGetErrorName(count_error),
                                      " (", cudaGetErrorString(count_error), ")"));
  }
  return f;
}

Facts cuda_device_facts(int index) {
  cudaDeviceProp prop;
  const cudaError_t err = cudaGetDeviceProperties(&prop, index);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return {{"properties", absl::StrCat("unreadable: ", cudaGetErrorName(err))}};
  }
  char bus[32] = {0};
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), index) != cudaSuccess) {
    (void)cudaGetLastError();
  }
  return {{"compute capability", absl::StrCat(prop.major, ".", prop.minor)},
          {"multiprocessors", absl::StrCat(prop.multiProcessorCount)},
          {"memory bus width", absl::StrCat(prop.memoryBusWidth, " bits")},
          {"L2 cache", absl::StrCat(prop.l2CacheSize / 1024, " KiB")},
          {"PCI bus id", bus}};
}

}  // namespace streamgrad
