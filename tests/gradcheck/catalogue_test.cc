// The operator catalogue (gradcheck/catalogue.h): it covers every function declared in
// ops/ops.h (parsed at test time, so a new op without an entry fails here), its inputs
// are well formed, and every entry passes gradcheck (full and fast mode) on cpu and
// sim:0, gradgradcheck where twice differentiable, and the stream consistency check on
// sim:0.
#include "gradcheck/catalogue.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "gradcheck/gradcheck.h"
#include "runtime/runtime.h"
#include "tests/device_names.h"

namespace streamgrad {
namespace {

// ops/ops.h from the runfiles (a data dependency of this test).
std::string read_ops_header() {
  std::vector<std::string> candidates;
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir != nullptr && workspace != nullptr) {
    candidates.push_back(std::string(srcdir) + "/" + workspace + "/ops/ops.h");
  }
  candidates.push_back("ops/ops.h");
  for (const std::string& path : candidates) {
    std::ifstream in(path);
    if (!in) continue;
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  FAIL("cannot open ops/ops.h from the runfiles");
  return "";
}

// The free functions ops.h declares, with how many overloads each has: lines that start
// with a return type of Tensor, Tensor&, std::pair<Tensor, Tensor> or
// std::tuple<Tensor, Tensor>. The inline
// operators start with "inline" and are sugar over these, so they are not collected.
std::map<std::string, int> declared_ops(const std::string& header) {
  static const std::regex decl(R"(^(Tensor|Tensor&|std::(?:pair|tuple)<Tensor, Tensor>) (\w+)\()");
  std::map<std::string, int> names;
  std::istringstream lines(header);
  std::string line;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_search(line, m, decl) && m[2].str().rfind("operator", 0) != 0) {
      ++names[m[2].str()];
    }
  }
  return names;
}

// An entry covers `op` when it is named `op` or `op_<variant>`, where the variant does
// not start with '_': "mul__scalar" is a variant of mul_, not of mul.
bool covers(const std::string& entry, const std::string& op) {
  if (entry == op) return true;
  const std::string prefix = op + "_";
  return entry.size() > prefix.size() && entry.rfind(prefix, 0) == 0 && entry[prefix.size()] != '_';
}

GradcheckOptions quiet(bool fast = false) {
  GradcheckOptions o;
  o.raise_exception = false;
  o.fast_mode = fast;
  return o;
}

TEST_CASE("every operator declared in ops.h has a catalogue entry", "[catalogue]") {
  const std::map<std::string, int> ops = declared_ops(read_ops_header());
  // A parser that silently matched nothing would make this test vacuous.
  REQUIRE(ops.size() >= 30);
  for (const char* expected : {"add", "add_", "max", "index_select", "to", "copy_", "topk"}) {
    CHECK(ops.count(expected) == 1);
  }
  CHECK(ops.at("sub") == 3);  // tensor, scalar and scalar-first forms
  for (const auto& [op, overloads] : ops) {
    int entries = 0;
    for (const OpSpec& e : op_catalogue()) entries += covers(e.name, op) ? 1 : 0;
    INFO("ops.h declares " << op << " (" << overloads << " overloads); gradcheck/catalogue.cc has "
                           << entries << " entries named " << op << " or " << op << "_<variant>");
    CHECK(entries >= 1);
    // One entry per overload at least (a name-level proxy: overloads are not told apart).
    CHECK(entries >= overloads);
  }
  CHECK(covers("mul_scalar", "mul"));
  CHECK_FALSE(covers("mul__scalar", "mul"));
  CHECK(covers("mul__scalar", "mul_"));
  CHECK_FALSE(covers("mul_scalar", "mul_"));
  CHECK_FALSE(covers("add_", "add"));
}

TEST_CASE("catalogue entries are well formed", "[catalogue]") {
  std::set<std::string> names;
  for (const OpSpec& e : op_catalogue()) {
    INFO(e.name);
    CHECK(names.insert(e.name).second);  // unique
    CHECK(find_op(e.name) == &e);
    CHECK(!e.notes.empty());
    const TensorList in = e.make_inputs(Device("cpu"), 0);
    REQUIRE(!in.empty());
    bool any_grad = false;
    for (const Tensor& t : in) {
      CHECK(t.numel() <= 12);
      if (t.requires_grad()) {
        any_grad = true;
        CHECK(t.dtype() == DType::kFloat64);
        CHECK(t.is_leaf());
      }
    }
    CHECK(any_grad);
    // Seeded: the same seed gives the same values, on every device.
    const TensorList again = e.make_inputs(Device("sim:0"), 0);
    REQUIRE(again.size() == in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i].dtype() == DType::kFloat64) {
        CHECK(in[i].to_vector<double>() == again[i].to_vector<double>());
      }
    }
  }
  // Some entries must really exercise non-contiguous inputs.
  CHECK_FALSE(find_op("add_noncontig")->make_inputs(Device("cpu"), 0)[0].is_contiguous());
  CHECK(find_op("nosuchop") == nullptr);
}

// Runs `check` and turns an exception into a failed result, so that one broken op shows
// up as one failure with its message instead of ending the test case.
template <typename F>
GradcheckResult guarded(F check) {
  try {
    return check();
  } catch (const std::exception& e) {
    GradcheckResult r;
    r.passed = false;
    r.message = std::string("threw: ") + e.what();
    return r;
  }
}

TEST_CASE("every entry passes gradcheck, fast mode and gradgradcheck", "[catalogue][grad]") {
  const Device device = GENERATE(from_range(testing::device_names()));
  for (const OpSpec& e : op_catalogue()) {
    INFO(e.name << " (" << e.notes << ") on " << device);
    const TensorList in = e.make_inputs(device, 0);
    const GradcheckResult full = guarded([&] { return gradcheck(e.fn, in, quiet()); });
    INFO("full: " << full.message);
    CHECK(full.passed);
    // Fast mode agrees with the full check: both pass.
    const GradcheckResult fast = guarded([&] { return gradcheck(e.fn, in, quiet(true)); });
    INFO("fast: " << fast.message);
    CHECK(fast.passed);
    if (e.twice_differentiable) {
      const GradcheckResult twice = guarded([&] { return gradgradcheck(e.fn, in, quiet()); });
      INFO("gradgrad: " << twice.message);
      CHECK(twice.passed);
    }
  }
}

TEST_CASE("every entry is stream-consistent on sim:0", "[catalogue][streams]") {
  StreamCheckOptions small;
  small.adversarial_seeds = 2;
  small.threaded_runs = 1;
  for (const OpSpec& e : op_catalogue()) {
    INFO(e.name << " (" << e.notes << ")");
    const TensorList in = e.make_inputs(Device("sim:0"), 0);
    const GradcheckResult r =
        guarded([&] { return check_stream_consistency(e.fn, in, quiet(), small); });
    INFO(r.message);
    CHECK(r.passed);
  }
}

}  // namespace
}  // namespace streamgrad
