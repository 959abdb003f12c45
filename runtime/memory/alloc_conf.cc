#include "runtime/memory/alloc_conf.h"

#include <cmath>
#include <cstdlib>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/base/error.h"

namespace streamgrad {
namespace {

constexpr const char* kVar = "STREAMGRAD_ALLOC_CONF";

[[noreturn]] void refuse(const std::string& spec, const std::string& why) {
  throw ValueError(absl::StrCat(kVar, "=", spec, ": ", why,
                                ". Accepted: max_split_size_mb:M (M > 20), "
                                "garbage_collection_threshold:T (0 < T < 1), "
                                "expandable_segments:False, separated by commas"));
}

}  // namespace

AllocConf parse_alloc_conf(const std::string& spec) {
  AllocConf c;
  if (absl::StripAsciiWhitespace(spec).empty()) return c;
  for (absl::string_view raw : absl::StrSplit(spec, ',')) {
    const absl::string_view entry = absl::StripAsciiWhitespace(raw);
    const std::vector<absl::string_view> kv = absl::StrSplit(entry, ':');
    if (kv.size() != 2 || kv[0].empty() || kv[1].empty()) {
      refuse(spec, absl::StrCat("'", entry, "' is not key:value"));
    }
    const absl::string_view key = absl::StripAsciiWhitespace(kv[0]);
    const std::string value(absl::StripAsciiWhitespace(kv[1]));
    if (key == "max_split_size_mb") {
      uint64_t mb = 0;
      // The reference's floor: below 20 MiB every large request would count as oversize.
      if (!absl::SimpleAtoi(value, &mb) || mb <= 20 || mb > (uint64_t{1} << 40)) {
        refuse(spec, absl::StrCat("max_split_size_mb:", value,
                                  " is not a whole number of MiB above 20"));
      }
      c.max_split_size = static_cast<size_t>(mb) << 20;
    } else if (key == "garbage_collection_threshold") {
      double t = 0;
      if (!absl::SimpleAtod(value, &t) || !std::isfinite(t) || t <= 0 || t >= 1) {
        refuse(spec, absl::StrCat("garbage_collection_threshold:", value,
                                  " is not a fraction strictly between 0 and 1"));
      }
      c.garbage_collection_threshold = t;
    } else if (key == "expandable_segments") {
      if (value == "True" || value == "true") {
        c.expandable_segments = true;
      } else if (value != "False" && value != "false") {
        refuse(spec, absl::StrCat("expandable_segments:", value, " is not True or False"));
      }
    } else if (key == "roundup_power2_divisions" || key == "backend" ||
               key == "pinned_use_cuda_host_register" || key == "pinned_num_register_threads" ||
               key == "release_lock_on_cudamalloc" || key == "pinned_use_background_threads") {
      refuse(spec, absl::StrCat("'", key, "' is a PYTORCH_CUDA_ALLOC_CONF option that "
                                "streamgrad does not have"));
    } else {
      refuse(spec, absl::StrCat("'", key, "' is not an option"));
    }
  }
  return c;
}

const AllocConf& alloc_conf() {
  static const AllocConf conf = [] {
    const char* v = std::getenv(kVar);
    return parse_alloc_conf(v == nullptr ? "" : v);
  }();
  return conf;
}

}  // namespace streamgrad
