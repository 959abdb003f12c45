// What the two sides of the side-by-side benchmark share (bench/sg_bench: streamgrad,
// bench/torch_bench: libtorch), so that both build the same graphs and report alike:
//   - the flags both binaries take and the list of cases bench/run.sh walks (`--list`);
//   - the random DAG of bench/README.md (splitmix64, seed 42);
//   - the deterministic data and initial weights of the mlp and cnn steps;
//   - each case's name, nominal node count (libtorch's census of its graph)
//     and expected check value.
// bench/bench_report.h holds the statistics and the JSON line. Depends only on the
// standard library: the libtorch binary never sees a streamgrad header.
//
//   bench::Flags f = bench::parse_flags(argc, argv);   // exits 2 on a bad flag
//   bench::Dag dag = bench::make_dag(f.n, f.seed, f.window);
//
// Thread-safety: nothing here is shared between threads; all functions are reentrant.
// Failure: parse_flags prints what is wrong and exits with status 2 on an unknown flag,
// a malformed number or an unknown case; nothing else fails.
#ifndef STREAMGRAD_BENCH_BENCH_COMMON_H_
#define STREAMGRAD_BENCH_BENCH_COMMON_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

namespace streamgrad {
namespace bench {

struct Flags {
  std::string case_name;   // chain, fanin, dag, retain, mlp, mlp_hand, cnn, overlap, math,
                           // layer_norm, attention
  std::string device = "cpu";
  int64_t n = 1000;        // chain / retain length, dag size
  std::string op = "mul";  // chain: mul (y * 1.0001) or add (y + 1e-4); math: kMathOps
  int64_t numel = 1;       // elements of x in the tiny-op graphs, math and layer_norm
  int64_t k = 1000;        // fanin width
  std::string reduce = "stack";  // fanin, dag: stack(...).sum() or a left fold of adds
  uint64_t seed = 42;      // dag
  int64_t window = 32;     // dag
  int64_t mid = -1;        // retain: the intermediate of grad_mid (-1: n / 2)
  int64_t batch = 64;      // mlp, cnn; attention: batch of [batch, 4, n, 32]
  int branches = 4;        // overlap: K branches on K streams
  int length = 4;          // overlap: fixed-time ops per branch
  double kernel_us = 2000; // overlap: time of each fixed-time kernel
  int reps = 0;            // 0: the case's default
  int warmup = -1;         // -1: the case's default
  int threads = 1;
  bool describe = false;   // node census by type on stderr
};

// ---- Flags and the case list ----

// The element-wise functions of --case=math: op(x) over --numel float32 values.
inline const std::vector<std::string>& math_ops() {
  static const std::vector<std::string> ops = {"exp", "tanh", "sigmoid", "gelu", "gelu_tanh",
                                               "silu"};
  return ops;
}

// --case=layer_norm: layer_norm of --numel float32 values (math_input) as rows of this many,
// normalised over the last dim, with weight 0.5 + j / W and bias 0.25 - j / (2 W) for
// column j (exact in float32).
constexpr int64_t kLayerNormWidth = 256;
// --case=attention: causal self-attention of q, k, v [--batch, 4 heads, --n positions, 32]
// (the GPT step's heads), each from math_input scaled by 1/4, seeds apart.
constexpr int64_t kAttentionHeads = 4, kAttentionDim = 32;
// --case=batch_norm: training-mode batch_norm of x [--batch, 16, 28, 28] (the ResNet's first
// stage) from math_input, with weight 0.5 + c / 16 and bias 0.25 - c / 32 for channel c and
// running statistics (momentum 0.1, eps 1e-5).
constexpr int64_t kBatchNormChannels = 16, kBatchNormSide = 28;
inline std::vector<float> batch_norm_param(bool bias) {
  std::vector<float> v(kBatchNormChannels);
  for (int64_t c = 0; c < kBatchNormChannels; ++c) {
    const float step = static_cast<float>(c) / kBatchNormChannels;
    v[c] = bias ? 0.25f - step / 2 : 0.5f + step;
  }
  return v;
}
inline std::vector<float> layer_norm_weight() {
  std::vector<float> w(kLayerNormWidth);
  for (int64_t j = 0; j < kLayerNormWidth; ++j) w[j] = 0.5f + static_cast<float>(j) / kLayerNormWidth;
  return w;
}
inline std::vector<float> layer_norm_bias() {
  std::vector<float> b(kLayerNormWidth);
  for (int64_t j = 0; j < kLayerNormWidth; ++j) {
    b[j] = 0.25f - static_cast<float>(j) / (2 * kLayerNormWidth);
  }
  return b;
}

[[noreturn]] inline void flag_error(const std::string& what) {
  std::cerr << "bench: " << what << "\n"
            << "usage: --case=chain|fanin|dag|retain|mlp|mlp_hand|cnn|overlap|math|layer_norm|"
               "batch_norm|attention "
               "[--n=N] "
               "[--op=mul|add|exp|tanh|sigmoid|gelu|gelu_tanh|silu] "
               "[--numel=N] [--k=N] [--reduce=stack|add] [--seed=S] [--window=W] [--mid=M] "
               "[--batch=B] [--branches=K] [--length=L] [--kernel_us=US] [--reps=R] "
               "[--warmup=W] [--threads=T] [--device=cpu|sim:N] [--describe]; or --list\n";
  std::exit(2);
}

inline int64_t parse_int(const std::string& name, const std::string& v, int64_t lo,
                         int64_t hi = 1000000000) {
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < lo || x > hi) {
    flag_error("--" + name + "=" + v + ": expected an integer in [" + std::to_string(lo) +
               ", " + std::to_string(hi) + "]");
  }
  return x;
}

inline double parse_double(const std::string& name, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(x >= 0 && x <= 1e7)) {
    flag_error("--" + name + "=" + v + ": expected a number in [0, 1e7]");
  }
  return x;
}

// The cases bench/run.sh runs, one line of flags each (bench/README.md's graphs, plus the
// streamgrad-only stream-overlap graph on sim:0).
inline std::vector<std::string> case_list() {
  return {
      "--case=chain --n=1000 --numel=1 --op=mul",   "--case=chain --n=1000 --numel=16 --op=mul",
      "--case=chain --n=10000 --numel=1 --op=mul",  "--case=chain --n=10000 --numel=16 --op=mul",
      "--case=chain --n=1000 --numel=1 --op=add",   "--case=chain --n=10000 --numel=1 --op=add",
      "--case=fanin --k=1000 --reduce=stack",       "--case=fanin --k=1000 --reduce=add",
      "--case=dag --n=5000 --reduce=stack",         "--case=dag --n=5000 --reduce=add",
      "--case=retain --n=1000",                     "--case=retain --n=10000",
      "--case=mlp --batch=1",                       "--case=mlp --batch=64",
      "--case=mlp_hand --batch=1",                  "--case=mlp_hand --batch=64",
      "--case=cnn --batch=64",                      "--case=overlap --device=sim:0",
      "--case=math --op=exp --numel=262144",        "--case=math --op=tanh --numel=262144",
      "--case=math --op=sigmoid --numel=262144",    "--case=math --op=gelu --numel=262144",
      "--case=math --op=gelu_tanh --numel=262144",  "--case=math --op=silu --numel=262144",
      "--case=layer_norm --numel=262144",           "--case=gpt",
      "--case=resnet --batch=64",                   "--case=batch_norm --batch=64",
      "--case=attention --batch=16 --n=64",         "--case=attention --batch=4 --n=256",
  };
}

inline Flags parse_flags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--list") {
      for (const std::string& c : case_list()) std::cout << c << "\n";
      std::exit(0);
    }
    if (arg == "--describe") {
      f.describe = true;
      continue;
    }
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos) flag_error("bad argument " + arg);
    const std::string name = arg.substr(2, eq - 2), v = arg.substr(eq + 1);
    if (name == "case") f.case_name = v;
    else if (name == "device") f.device = v;
    else if (name == "n") f.n = parse_int(name, v, 1);
    else if (name == "op") f.op = v;
    else if (name == "numel") f.numel = parse_int(name, v, 1);
    else if (name == "k") f.k = parse_int(name, v, 1);
    else if (name == "reduce") f.reduce = v;
    else if (name == "seed") f.seed = static_cast<uint64_t>(parse_int(name, v, 0, INT64_MAX));
    else if (name == "window") f.window = parse_int(name, v, 1);
    else if (name == "mid") f.mid = parse_int(name, v, 0);
    else if (name == "batch") f.batch = parse_int(name, v, 1);
    else if (name == "branches") f.branches = static_cast<int>(parse_int(name, v, 1));
    else if (name == "length") f.length = static_cast<int>(parse_int(name, v, 1));
    else if (name == "kernel_us") f.kernel_us = parse_double(name, v);
    else if (name == "reps") f.reps = static_cast<int>(parse_int(name, v, 1));
    else if (name == "warmup") f.warmup = static_cast<int>(parse_int(name, v, 0));
    else if (name == "threads") f.threads = static_cast<int>(parse_int(name, v, 1));
    else flag_error("unknown flag --" + name);
  }
  const std::string& c = f.case_name;
  if (c != "chain" && c != "fanin" && c != "dag" && c != "retain" && c != "mlp" &&
      c != "mlp_hand" && c != "cnn" && c != "overlap" && c != "math" && c != "layer_norm" &&
      c != "batch_norm" && c != "gpt" && c != "resnet" && c != "attention") {
    flag_error("unknown or missing --case '" + c + "'");
  }
  if (c == "math") {
    const std::vector<std::string>& ops = math_ops();
    if (std::find(ops.begin(), ops.end(), f.op) == ops.end()) {
      flag_error("--case=math: unknown --op " + f.op);
    }
  } else if (c == "layer_norm" && f.numel % kLayerNormWidth != 0) {
    flag_error("--case=layer_norm: --numel must be a multiple of " +
               std::to_string(kLayerNormWidth));
  } else if (f.op != "mul" && f.op != "add") {
    flag_error("--op must be mul or add, got " + f.op);
  }
  if (f.reduce != "stack" && f.reduce != "add") flag_error("--reduce must be stack or add");
  if (f.mid < 0) f.mid = f.n / 2;
  if (c == "retain" && f.mid >= f.n) flag_error("--mid must be below --n");
  // Defaults sized so that one libtorch process takes about a second on this 2-core machine.
  const bool big = (c == "chain" || c == "retain") && f.n >= 10000;
  if (f.reps == 0) {
    const bool mlp = c == "mlp" || c == "mlp_hand";
    f.reps = c == "overlap" ? 10 : c == "cnn" || c == "gpt" || c == "resnet" ? 15 : mlp ? 200
             : big || c == "dag" ? 20 : 100;
  }
  if (f.warmup < 0) {
    f.warmup = c == "cnn" || c == "overlap" || c == "gpt" || c == "resnet" ? 2 : 3;
  }
  return f;
}

// The benchmark's name as the table shows it: the case and the flags that shape its graph.
inline std::string config_name(const Flags& f) {
  const std::string& c = f.case_name;
  auto s = [](int64_t v) { return std::to_string(v); };
  if (c == "chain") return "chain n=" + s(f.n) + " numel=" + s(f.numel) + " op=" + f.op;
  if (c == "fanin") return "fanin k=" + s(f.k) + " numel=" + s(f.numel) + " reduce=" + f.reduce;
  if (c == "dag") {
    return "dag n=" + s(f.n) + " seed=" + s(static_cast<int64_t>(f.seed)) +
           " window=" + s(f.window) + " reduce=" + f.reduce;
  }
  if (c == "retain") return "retain n=" + s(f.n) + " mid=" + s(f.mid);
  if (c == "mlp") return "mlp 784-256-256-10 batch=" + s(f.batch);
  if (c == "mlp_hand") return "mlp by hand 784-256-256-10 batch=" + s(f.batch);
  if (c == "cnn") return "cnn (tools/train) batch=" + s(f.batch);
  if (c == "resnet") return "resnet (tools/train) batch=" + s(f.batch);
  if (c == "gpt") return "gpt 2 blocks dim=128 heads=4 context=64 batch=16 (AdamW)";
  if (c == "math") return "math op=" + f.op + " numel=" + s(f.numel);
  if (c == "layer_norm") {
    return "layer_norm [" + s(f.numel / kLayerNormWidth) + ", " + s(kLayerNormWidth) +
           "] numel=" + s(f.numel);
  }
  if (c == "batch_norm") {
    return "batch_norm training [" + s(f.batch) + ", " + s(kBatchNormChannels) + ", " +
           s(kBatchNormSide) + ", " + s(kBatchNormSide) + "]";
  }
  if (c == "attention") {
    return "attention causal [" + s(f.batch) + ", " + s(kAttentionHeads) + ", " + s(f.n) + ", " +
           s(kAttentionDim) + "]";
  }
  return "overlap K=" + s(f.branches) + " L=" + s(f.length) + " kernel=" +
         s(static_cast<int64_t>(f.kernel_us)) + "us";
}

// ---- The random DAG (bench/README.md, "The random DAG") ----

struct SplitMix64 {
  uint64_t state;
  explicit SplitMix64(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 24 random bits: exact in float32 on both sides.
  float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
};

// Value i (1..n) is ops[i - 1] applied to earlier values; value 0 is x.
struct DagOp {
  int arity;  // 1: v[a] * 1.0001; 2: v[a] + v[b]
  int64_t a, b;
};
struct Dag {
  std::vector<DagOp> ops;
  std::vector<int64_t> sinks;  // values i >= 1 never used as an operand, increasing
  int64_t muls = 0, adds = 0;
};

inline Dag make_dag(int64_t n, uint64_t seed, int64_t window) {
  Dag d;
  SplitMix64 rng(seed);
  std::vector<bool> used(n + 1, false);
  for (int64_t i = 1; i <= n; ++i) {
    const uint64_t u = rng.next();
    DagOp op{(u & 1) ? 2 : 1, 0, 0};
    op.a = i - 1 - static_cast<int64_t>(rng.next() % static_cast<uint64_t>(std::min(i, window)));
    if (op.arity == 2) op.b = static_cast<int64_t>(rng.next() % static_cast<uint64_t>(i));
    used[op.a] = true;
    if (op.arity == 2) used[op.b] = true;
    (op.arity == 2 ? d.adds : d.muls)++;
    d.ops.push_back(op);
  }
  for (int64_t i = 1; i <= n; ++i) {
    if (!used[i]) d.sinks.push_back(i);
  }
  return d;
}

constexpr double kMulFactor = static_cast<double>(1.0001f);  // see kCheckTolerance

// d loss / d x of the DAG in double arithmetic (the graph is linear in x).
inline double dag_gradient(const Dag& d) {
  std::vector<double> g(d.ops.size() + 1, 0.0);
  for (int64_t s : d.sinks) g[s] += 1.0;
  for (int64_t i = static_cast<int64_t>(d.ops.size()); i >= 1; --i) {
    const DagOp& op = d.ops[i - 1];
    if (op.arity == 1) {
      g[op.a] += g[i] * kMulFactor;
    } else {
      g[op.a] += g[i];
      g[op.b] += g[i];
    }
  }
  return g[0];
}

// ---- Expected values and node counts ----

// libtorch's census of its own graph (AccumulateGrad included, no GraphRoot); 0 when
// there is none. Per-node figures of both sides divide by this same count.
inline int64_t nominal_nodes(const Flags& f) {
  const std::string& c = f.case_name;
  if (c == "chain" || c == "retain") return f.n + 2;
  if (c == "fanin") return f.reduce == "stack" ? f.k + 3 : 2 * f.k + 1;
  if (c == "dag") {
    const Dag d = make_dag(f.n, f.seed, f.window);
    const int64_t reduce_nodes =
        f.reduce == "stack" ? 1 : static_cast<int64_t>(d.sinks.size()) - 1;
    return f.n + reduce_nodes + 2;
  }
  if (c == "mlp") return 16;
  return 0;
}

// Both engines multiply float32 tensors by the scalar 1.0001 rounded to float32, which is
// 1.66e-8 larger: a 10,000-op chain's gradient is 1.66e-4 above 1.0001^n. The expected
// values use that float32 factor; what remains is float32 rounding (a few 1e-6), so
// kCheckTolerance catches a mul chain or a fan-in one node too long or too short.
constexpr double kCheckTolerance = 3e-5;  // relative

// The sanity check's expected value (NaN where there is none: the mlp and cnn checks are
// the loss before training, which the two sides should agree on; bench/report.py
// compares them).
inline double expected_check(const Flags& f) {
  const std::string& c = f.case_name;
  if (c == "chain") return f.op == "mul" ? std::pow(kMulFactor, static_cast<double>(f.n)) : 1.0;
  if (c == "fanin") return kMulFactor * static_cast<double>(f.k);
  if (c == "dag") return dag_gradient(make_dag(f.n, f.seed, f.window));
  if (c == "retain") return std::pow(kMulFactor, static_cast<double>(f.n - f.mid));
  if (c == "overlap") return f.branches;  // x.grad of the forked graph
  return std::numeric_limits<double>::quiet_NaN();
}

// ---- Data and weights of the mlp / cnn steps ----

// The input of --case=math: uniform in [-4, 4), the range where the functions bend.
inline std::vector<float> math_input(int64_t numel) {
  SplitMix64 rng(11);
  std::vector<float> v(static_cast<size_t>(numel));
  for (float& x : v) x = 8 * rng.uniform() - 4;
  return v;
}

// --case=attention's q, k and v one after the other: math_input / 4, in [-1, 1).
inline std::vector<float> attention_input(const Flags& f) {
  std::vector<float> v = math_input(3 * f.batch * kAttentionHeads * f.n * kAttentionDim);
  for (float& x : v) x *= 0.25f;
  return v;
}

// Images in [0, 1) and labels in [0, 10), the same on both sides.
inline void make_batch(int64_t batch, int64_t features, std::vector<float>* images,
                       std::vector<int64_t>* labels) {
  SplitMix64 rng(7);
  images->resize(static_cast<size_t>(batch * features));
  for (float& v : *images) v = rng.uniform();
  labels->resize(static_cast<size_t>(batch));
  for (int64_t& l : *labels) l = static_cast<int64_t>(rng.next() % 10);
}

// Initial values of the parameters, given their shapes in named_parameters() order (which
// both frameworks give as weight then bias, layer by layer): each weight (2-D or more)
// and the 1-D bias right after it are uniform in +-1/sqrt(fan_in), PyTorch's default
// range, seeded per parameter; an empty vector means "keep the default" (batch-norm's
// weight and bias, which follow a bias rather than a weight).
inline std::vector<std::vector<float>> init_parameters(
    const std::vector<std::vector<int64_t>>& shapes) {
  std::vector<std::vector<float>> out(shapes.size());
  int64_t fan_in = 0;  // of the previous parameter if it was a weight, else 0
  for (size_t i = 0; i < shapes.size(); ++i) {
    int64_t numel = 1;
    for (int64_t s : shapes[i]) numel *= s;
    const bool weight = shapes[i].size() >= 2;
    if (weight) fan_in = numel / shapes[i][0];
    if (weight || fan_in > 0) {
      SplitMix64 rng(1000 + i);
      const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
      out[i].resize(static_cast<size_t>(numel));
      for (float& x : out[i]) x = (2 * rng.uniform() - 1) * bound;
    }
    if (!weight) fan_in = 0;
  }
  return out;
}

}  // namespace bench
}  // namespace streamgrad

#endif  // STREAMGRAD_BENCH_BENCH_COMMON_H_
