// tools/gradcheck: checks the gradients of every operator in the catalogue (gradcheck/catalogue.h)
// on every device, and prints a table (or JSON) of the results.
//
//   gradcheck                          every op on cpu, every sim and every cuda device
//   gradcheck --ops=add,matmul --devices=cpu,sim:1
//   gradcheck --fast                   random projections instead of full Jacobians
//   gradcheck --streams                adds the stream consistency check on sim devices
//   gradcheck --json --seed=3          {"results":[...],"passed":N,"failed":M,"skipped":K,
//                                      "time_ms":T}; an error that is not finite is null
//
// Per op and device it runs gradcheck ("grad"), gradgradcheck ("gradgrad") where the op is
// twice differentiable and, with --streams on sim devices, check_stream_consistency
// ("streams"). An op that throws is a failed row with the error as its message. Rows on
// cuda that fail with a DeviceError are skipped ("no cuda kernels yet").
//
// Exit code: 0 when nothing failed, 1 when a check failed, 2 for bad flags (an unknown op
// or an absent device; the message lists the known ones; unknown flags or bad values).
#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gradcheck/gradcheck.h"
#include "nlohmann/json.hpp"
#include "gradcheck/catalogue.h"
#include "runtime/runtime.h"
#include "tools/cli_flags.h"

ABSL_FLAG(std::string, ops, "", "comma-separated catalogue entries to check (default: all)");
ABSL_FLAG(std::string, devices, "",
          "comma-separated devices, e.g. cpu,sim:0 (default: cpu, every sim and cuda device)");
ABSL_FLAG(bool, fast, false, "fast mode: compare random projections u^T J v, not full Jacobians");
ABSL_FLAG(bool, streams, false, "also run the stream consistency check on sim devices");
ABSL_FLAG(bool, json, false, "print the results as JSON");
ABSL_FLAG(uint64_t, seed, 0, "seed of the inputs, of fast mode and of the stream check");

namespace streamgrad {
namespace {

enum class Outcome { kPass, kFail, kSkip };

struct Row {
  std::string op, device, check;
  Outcome outcome = Outcome::kPass;
  double max_abs_err = 0, max_rel_err = 0, time_ms = 0;
  std::string message;  // the failure, or why the row was skipped
};

std::vector<const OpSpec*> select_ops(const std::string& flag) {
  std::vector<const OpSpec*> out;
  if (flag.empty()) {
    for (const OpSpec& op : op_catalogue()) out.push_back(&op);
    return out;
  }
  for (const absl::string_view name : absl::StrSplit(flag, ',', absl::SkipEmpty())) {
    const OpSpec* op = find_op(std::string(name));
    if (op == nullptr) {
      std::vector<std::string> known;
      for (const OpSpec& o : op_catalogue()) known.push_back(o.name);
      throw UsageError{
          absl::StrCat("unknown op '", name, "'; known ops: ", absl::StrJoin(known, ", "))};
    }
    out.push_back(op);
  }
  return out;
}

std::vector<Device> present_devices() {
  std::vector<Device> out{Device("cpu")};
  for (DeviceType t : {DeviceType::kSim, DeviceType::kCuda}) {
    for (int i = 0; i < device_count(t); ++i) out.emplace_back(t, i);
  }
  return out;
}

std::vector<Device> select_devices(const std::string& flag) {
  const std::vector<Device> present = present_devices();
  if (flag.empty()) return present;
  std::vector<Device> out;
  for (const absl::string_view spec : absl::StrSplit(flag, ',', absl::SkipEmpty())) {
    bool found = false;
    try {
      const Device d = resolve_device(Device::parse(spec), "gradcheck");
      for (const Device& p : present) found = found || p == d;
      if (found) out.push_back(d);
    } catch (const Error&) {
      // Reported below, with the devices that do exist.
    }
    if (!found) {
      std::vector<std::string> names;
      for (const Device& p : present) names.push_back(p.str());
      throw UsageError{absl::StrCat("unknown or absent device '", spec,
                                    "'; present devices: ", absl::StrJoin(names, ", "))};
    }
  }
  return out;
}

struct Settings {
  bool fast = false;
  uint64_t seed = 0;
};

// Runs one check on fresh inputs (a failed check may leave its inputs perturbed).
Row run_check(const OpSpec& op, Device device, const std::string& check, const Settings& s) {
  Row row{op.name, device.str(), check};
  const auto start = std::chrono::steady_clock::now();
  try {
    const TensorList in = op.make_inputs(device, s.seed);
    GradcheckOptions o;
    o.raise_exception = false;
    o.fast_mode = s.fast;
    o.seed = s.seed;
    GradcheckResult r;
    if (check == "grad") {
      r = gradcheck(op.fn, in, o);
    } else if (check == "gradgrad") {
      r = gradgradcheck(op.fn, in, o);
    } else {
      r = check_stream_consistency(op.fn, in, o);
    }
    row.outcome = r.passed ? Outcome::kPass : Outcome::kFail;
    row.max_abs_err = r.max_abs_err;
    row.max_rel_err = r.max_rel_err;
    row.message = r.message;
  } catch (const DeviceError& e) {
    const bool cuda = device.type() == DeviceType::kCuda;
    row.outcome = cuda ? Outcome::kSkip : Outcome::kFail;
    row.message = cuda ? absl::StrCat("no cuda kernels yet (", e.what(), ")")
                       : absl::StrCat("threw: ", e.what());
  } catch (const std::exception& e) {
    row.outcome = Outcome::kFail;
    row.message = absl::StrCat("threw: ", e.what());
  }
  row.time_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return row;
}

Row stream_row(const OpSpec& op, Device d, const Settings& s) {
  return run_check(op, d, "streams", s);
}

// Rows in op, device, check order. The stream checks run last: they bring every pool
// stream of a sim device into use, and each idle sim stream worker makes later launches
// on that device slower, so running them first would slow every other check down.
std::vector<Row> run_all(const std::vector<const OpSpec*>& ops, const std::vector<Device>& devices,
                         bool streams, const Settings& s) {
  const size_t per_pair = 3;  // grad, gradgrad, streams
  std::vector<std::vector<Row>> slots(ops.size() * devices.size() * per_pair);
  auto slot = [&](size_t o, size_t d, size_t check) -> std::vector<Row>& {
    return slots[(o * devices.size() + d) * per_pair + check];
  };
  for (size_t o = 0; o < ops.size(); ++o) {
    for (size_t d = 0; d < devices.size(); ++d) {
      slot(o, d, 0).push_back(run_check(*ops[o], devices[d], "grad", s));
      if (ops[o]->twice_differentiable) {
        slot(o, d, 1).push_back(run_check(*ops[o], devices[d], "gradgrad", s));
      }
    }
  }
  for (size_t o = 0; o < ops.size() && streams; ++o) {
    for (size_t d = 0; d < devices.size(); ++d) {
      if (devices[d].type() == DeviceType::kSim) {
        slot(o, d, 2).push_back(stream_row(*ops[o], devices[d], s));
      }
    }
  }
  std::vector<Row> rows;
  for (auto& rs : slots) {
    for (Row& r : rs) rows.push_back(std::move(r));
  }
  return rows;
}

const char* outcome_name(Outcome o) {
  return o == Outcome::kPass ? "pass" : o == Outcome::kFail ? "FAIL" : "skip";
}

int count(const std::vector<Row>& rows, Outcome o) {
  int n = 0;
  for (const Row& r : rows) n += r.outcome == o ? 1 : 0;
  return n;
}

void print_text(const std::vector<Row>& rows, double total_ms) {
  absl::PrintF("%-24s %-7s %-9s %-6s %12s %12s %10s\n", "op", "device", "check", "result",
               "max abs err", "max rel err", "time ms");
  for (const Row& r : rows) {
    absl::PrintF("%-24s %-7s %-9s %-6s %12.3g %12.3g %10.1f\n", r.op, r.device, r.check,
                 outcome_name(r.outcome), r.max_abs_err, r.max_rel_err, r.time_ms);
    if (r.outcome != Outcome::kPass && !r.message.empty()) {
      // Indented so that multi-line messages (Jacobians) stay under their row.
      absl::PrintF("    %s\n", absl::StrJoin(absl::StrSplit(r.message, '\n'), "\n    "));
    }
  }
  absl::PrintF("\ngradcheck: %d passed, %d failed, %d skipped in %.0f ms\n",
               count(rows, Outcome::kPass), count(rows, Outcome::kFail),
               count(rows, Outcome::kSkip), total_ms);
}

void print_json(const std::vector<Row>& rows, double total_ms) {
  using nlohmann::ordered_json;  // keys stay in the order written: readers grep the text
  ordered_json j;
  j["results"] = ordered_json::array();
  for (const Row& r : rows) {
    // An error that is not finite (a NaN gradient) is written as null: JSON has no NaN.
    j["results"].push_back({{"op", r.op},
                            {"device", r.device},
                            {"check", r.check},
                            {"passed", r.outcome == Outcome::kPass},
                            {"skipped", r.outcome == Outcome::kSkip},
                            {"max_abs_err", r.max_abs_err},
                            {"max_rel_err", r.max_rel_err},
                            {"time_ms", r.time_ms},
                            {"message", r.message}});
  }
  j["passed"] = count(rows, Outcome::kPass);
  j["failed"] = count(rows, Outcome::kFail);
  j["skipped"] = count(rows, Outcome::kSkip);
  j["time_ms"] = total_ms;
  print_json_line(j);
}

}  // namespace
}  // namespace streamgrad

int main(int argc, char** argv) {
  using namespace streamgrad;  // NOLINT
  const ToolSpec spec{
      "gradcheck",
      "gradcheck: checks the gradients of every streamgrad operator on every device.\n"
      "Usage: gradcheck [--ops=a,b] [--devices=cpu,sim:0] [--fast] [--streams] [--json] "
      "[--seed=N]\n"
      "Exit code: 0 all passed, 1 a check failed, 2 bad flags.",
      __FILE__,
      {{"seed", 0, static_cast<long double>(UINT64_MAX)}},
      {"ops", "devices"}};
  return run_tool(spec, argc, argv, [&] {    const auto ops = select_ops(absl::GetFlag(FLAGS_ops));
    const auto devices = select_devices(absl::GetFlag(FLAGS_devices));
    const Settings settings{absl::GetFlag(FLAGS_fast), absl::GetFlag(FLAGS_seed)};
    const auto start = std::chrono::steady_clock::now();
    const auto rows = run_all(ops, devices, absl::GetFlag(FLAGS_streams), settings);
    const double total_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (absl::GetFlag(FLAGS_json)) {
      print_json(rows, total_ms);
    } else {
      print_text(rows, total_ms);
    }
    return count(rows, Outcome::kFail) == 0 ? 0 : 1;
  });
}
