// The statistics and the JSON line both sides of the side-by-side benchmark print
// (bench/bench_common.h has the rest of what they share): per metric, the median, p10,
// p90 and min over the timed repetitions, in microseconds per graph node (divided by the
// libtorch's node count) or in milliseconds; the node count and check value; and on stderr
// the sanity check.
//
//   bench::Report r("streamgrad", flags);
//   r.add("bwd", t2 - t1, bench::nominal_nodes(flags));   // once per repetition, ms
//   r.set_check(x_grad, nodes);
//   r.print();
//
// Thread-safety: a Report is used by one thread. Failure: none (a metric with no sample
// prints NaN, which the aggregation reports).
#ifndef STREAMGRAD_BENCH_BENCH_REPORT_H_
#define STREAMGRAD_BENCH_BENCH_REPORT_H_

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_common.h"

namespace streamgrad {
namespace bench {

inline double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Linear interpolation between the order statistics (q in [0, 1]).
inline double percentile(std::vector<double> v, double q) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

class Report {
 public:
  Report(std::string side, const Flags& f) : side_(std::move(side)), flags_(f) {}

  // One repetition's time of `metric` in milliseconds; `per` > 0 reports it per node
  // (µs per node, divided by `per`), else in ms.
  void add(const std::string& metric, double ms, int64_t per) {
    Metric& m = metrics_[metric];
    if (m.samples.empty()) order_.push_back(metric);
    m.samples.push_back(ms);
    m.per = per;
  }
  void set_check(double value, int64_t nodes) {
    check_ = value;
    nodes_ = nodes;
  }
  nlohmann::ordered_json& extra() { return extra_; }

  bool check_ok() const {
    const double want = expected_check(flags_);
    if (std::isnan(want)) return std::isfinite(check_);
    return std::abs(check_ - want) <= kCheckTolerance * std::abs(want);
  }

  // The JSON line on stdout, the sanity check on stderr.
  void print() const {
    nlohmann::ordered_json j;
    j["side"] = side_;
    j["name"] = config_name(flags_);
    j["case"] = flags_.case_name;
    j["device"] = flags_.device;
    j["threads"] = flags_.threads;
    j["reps"] = flags_.reps;
    j["warmup"] = flags_.warmup;
    j["nodes"] = nodes_;
    j["nominal_nodes"] = nominal_nodes(flags_);
    j["check"] = check_;
    const double want = expected_check(flags_);
    j["expected"] = std::isnan(want) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(want);
    j["check_ok"] = check_ok();
    nlohmann::ordered_json& ms = j["metrics"];  // in measuring order
    ms = nlohmann::ordered_json::object();
    for (const std::string& name : order_) {
      const Metric& m = metrics_.at(name);
      const double scale = m.per > 0 ? 1000.0 / static_cast<double>(m.per) : 1.0;
      ms[name] = {{"median", percentile(m.samples, 0.5) * scale},
                  {"p10", percentile(m.samples, 0.1) * scale},
                  {"p90", percentile(m.samples, 0.9) * scale},
                  {"min", percentile(m.samples, 0.0) * scale},
                  {"unit", m.per > 0 ? "us/node" : "ms"},
                  {"per", m.per}};
    }
    if (!extra_.is_null()) j["extra"] = extra_;
    std::cout << j.dump() << std::endl;
    std::cerr << side_ << " sanity: " << config_name(flags_) << ": check " << check_;
    if (!std::isnan(want)) std::cerr << " (expected " << want << ")";
    std::cerr << ", " << nodes_ << " nodes: " << (check_ok() ? "ok" : "WRONG") << "\n";
  }

 private:
  struct Metric {
    std::vector<double> samples;
    int64_t per = 0;
  };
  std::string side_;
  Flags flags_;
  std::map<std::string, Metric> metrics_;
  std::vector<std::string> order_;
  double check_ = std::numeric_limits<double>::quiet_NaN();
  int64_t nodes_ = 0;
  nlohmann::ordered_json extra_;
};

// The timing of the single-op cases (math, layer_norm, attention) on either side:
// `forward()` under the side's no-grad guard for "fwd", then `forward_backward()` (the op
// with history and its gradients) for "fwd_bwd"; what each returns is freed after its
// clock stops, as a user's loop frees it at the end of the iteration.
template <typename NoGrad, typename Forward, typename ForwardBackward>
void time_forward_backward(int warmup, int reps, Report& r, Forward forward,
                           ForwardBackward forward_backward) {
  for (int rep = 0; rep < warmup + reps; ++rep) {
    double t0, t1;
    {
      NoGrad no_grad;
      t0 = now_ms();
      const auto y = forward();
      t1 = now_ms();
    }
    const auto grads = forward_backward();
    const double t2 = now_ms();
    if (rep < warmup) continue;
    r.add("fwd", t1 - t0, 0);
    r.add("fwd_bwd", t2 - t1, 0);
  }
}

// Prints a node census ("MulBackward1 x1000") on stderr.
inline void print_census(const std::string& side, const std::map<std::string, int64_t>& c) {
  int64_t total = 0;
  for (const auto& [name, count] : c) total += count;
  std::cerr << side << " census (" << total << " nodes):";
  for (const auto& [name, count] : c) std::cerr << " " << name << " x" << count;
  std::cerr << "\n";
}

}  // namespace bench
}  // namespace streamgrad

#endif  // STREAMGRAD_BENCH_BENCH_REPORT_H_
