// STREAMGRAD_ALLOC_CONF: the caching allocator's settings, spelled as the reference
// framework's PYTORCH_CUDA_ALLOC_CONF where they apply, for the sim and cuda allocators:
//
//   STREAMGRAD_ALLOC_CONF=max_split_size_mb:256,garbage_collection_threshold:0.8
//
//   max_split_size_mb:M      cached blocks larger than M MiB (M > 20) are never split: a
//                            request of at most M MiB never takes one, and a larger request
//                            takes one whole only if it wastes less than 20 MiB. Keeps big
//                            free blocks whole for big tensors (fragmentation).
//   garbage_collection_threshold:T   (0 < T < 1) before reserving a new segment that would
//                            take reserved memory past T of what the device (or the memory
//                            fraction) allows, free cached segments go back to the device,
//                            least recently freed first, until it no longer would.
//   expandable_segments:True    one segment per device that grows at its end by mapping
//                            memory into a reserved address range, where the backend can
//                            (sim; cuda where the driver can, else a warning and whole
//                            segments; cpu has size-classed blocks and ignores it): see
//                            caching_allocator.h.
//
// Keys the reference has and streamgrad does not (roundup_power2_divisions, backend, ...)
// are refused by name; so is anything else that is not `key:value` pairs.
//
// Offers: AllocConf, parse_alloc_conf(spec), alloc_conf() (the variable, read once).
// Thread-safety: alloc_conf() is safe from any thread (read once, immutable after).
// Failure: ValueError naming STREAMGRAD_ALLOC_CONF, the entry and what is accepted; from
// alloc_conf() at the first use of a sim or cuda allocator, so nothing runs with a
// setting the user did not get.
#ifndef STREAMGRAD_RUNTIME_MEMORY_ALLOC_CONF_H_
#define STREAMGRAD_RUNTIME_MEMORY_ALLOC_CONF_H_

#include <cstddef>
#include <limits>
#include <string>

namespace streamgrad {

struct AllocConf {
  size_t max_split_size = std::numeric_limits<size_t>::max();  // bytes; max: no limit
  double garbage_collection_threshold = 0;                      // 0: off
  bool expandable_segments = false;
};

// A block larger than max_split_size serves a larger request only if it wastes less
// than this (the reference's kLargeBuffer).
constexpr size_t kOversizeWaste = size_t{20} << 20;

AllocConf parse_alloc_conf(const std::string& spec);
const AllocConf& alloc_conf();

}  // namespace streamgrad

#endif  // STREAMGRAD_RUNTIME_MEMORY_ALLOC_CONF_H_
