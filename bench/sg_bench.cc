// streamgrad's side of the side-by-side benchmark (bench/run.sh runs it beside
// bench/torch_bench): the graphs of bench/README.md, timed phase by phase, one JSON line
// per run on stdout and the sanity check on stderr.
//
//   bazel run -c opt //bench:sg_bench -- --case=chain --n=1000 --op=mul --numel=1
//   bazel run -c opt //bench:sg_bench -- --list        # the cases run.sh walks
//
// Threads: --threads sets streamgrad's threads (set_num_threads), its matmuls' included:
// OpenBLAS itself runs on one thread (kernels/host/gemm.h) whatever run.sh sets.
// Exit status: 0, 1 when streamgrad threw, 2 for bad flags, 3 when the check is wrong.
#include "bench/sg_bench.h"

#include <exception>
#include <functional>
#include <iostream>
#include <unordered_set>
#include <vector>

namespace streamgrad {
namespace bench {

std::map<std::string, int64_t> census(const std::shared_ptr<Node>& root) {
  std::map<std::string, int64_t> out;
  if (!root) return out;
  std::unordered_set<const Node*> seen{root.get()};
  std::vector<const Node*> todo{root.get()};
  while (!todo.empty()) {
    const Node* node = todo.back();
    todo.pop_back();
    ++out[node->name()];
    for (const Edge& e : node->next_edges()) {
      if (e.valid() && seen.insert(e.function.get()).second) todo.push_back(e.function.get());
    }
  }
  return out;
}

int64_t count_nodes(const std::shared_ptr<Node>& root) {
  int64_t n = 0;
  for (const auto& [name, count] : census(root)) n += count;
  return n;
}

namespace {

// Backward is asynchronous on sim: the timed phase ends when the device is done.
void finish(Device d) {
  if (!d.is_cpu()) synchronize(d);
}

float first_grad(const Tensor& x) { return x.grad().to_vector<float>()[0]; }

// The fresh-graph loop (bench/README.md): x.grad cleared (untimed), then forward (which frees the
// intermediates user code would let go), backward, and dropping the loss.
void fresh_graph_loop(const Flags& f, Report& r, const Tensor& x,
                      const std::function<Tensor()>& forward) {
  const Device d = x.device();
  const int64_t per = nominal_nodes(f);
  {  // probe: census and check, untimed
    Tensor loss = forward();
    const int64_t nodes = count_nodes(loss.grad_fn());
    if (f.describe) print_census("streamgrad", census(loss.grad_fn()));
    loss.backward();
    finish(d);
    r.set_check(first_grad(x), nodes);
  }
  for (int rep = 0; rep < f.warmup + f.reps; ++rep) {
    x.set_grad(Tensor());
    const double t0 = now_ms();
    Tensor loss = forward();
    finish(d);
    const double t1 = now_ms();
    loss.backward();
    finish(d);
    const double t2 = now_ms();
    loss = Tensor();
    const double t3 = now_ms();
    if (rep < f.warmup) continue;
    r.add("fwd", t1 - t0, per);
    r.add("bwd", t2 - t1, per);
    r.add("fwd+bwd", t2 - t0, per);
    r.add("teardown", t3 - t2, per);
    r.add("total", t3 - t0, per);
  }
}

Tensor leaf(const Flags& f) {
  return ones({f.numel}, TensorOptions().device(Device(f.device))).requires_grad_();
}

Tensor chain_forward(const Tensor& x, const Flags& f) {
  Tensor y = x;
  for (int64_t i = 0; i < f.n; ++i) y = f.op == "mul" ? mul(y, 1.0001) : add(y, 1e-4);
  return y;
}

// s_0 + s_1 + ... as a left fold.
Tensor fold(const std::vector<Tensor>& v) {
  Tensor s = v[0];
  for (size_t i = 1; i < v.size(); ++i) s = add(s, v[i]);
  return s;
}

}  // namespace

void run_chain(const Flags& f, Report& r) {
  Tensor x = leaf(f);
  fresh_graph_loop(f, r, x, [&] { return sum(chain_forward(x, f)); });
  // The same ops without recording: what the kernels and dispatch cost alone.
  NoGradGuard no_grad;
  for (int rep = 0; rep < f.warmup + f.reps; ++rep) {
    const double t0 = now_ms();
    Tensor y = chain_forward(x, f);
    finish(x.device());
    const double t1 = now_ms();
    if (rep >= f.warmup) r.add("nograd", t1 - t0, f.n);
  }
}

void run_fanin(const Flags& f, Report& r) {
  Tensor x = leaf(f);
  fresh_graph_loop(f, r, x, [&] {
    std::vector<Tensor> parts;
    parts.reserve(static_cast<size_t>(f.k));
    for (int64_t i = 0; i < f.k; ++i) parts.push_back(mul(x, 1.0001));
    return sum(f.reduce == "stack" ? stack(parts) : fold(parts));
  });
}

void run_dag(const Flags& f, Report& r) {
  const Dag dag = make_dag(f.n, f.seed, f.window);
  Tensor x = leaf(f);
  fresh_graph_loop(f, r, x, [&] {
    std::vector<Tensor> v(dag.ops.size() + 1);
    v[0] = x;
    for (size_t i = 1; i < v.size(); ++i) {
      const DagOp& op = dag.ops[i - 1];
      v[i] = op.arity == 1 ? mul(v[op.a], 1.0001) : add(v[op.a], v[op.b]);
    }
    std::vector<Tensor> sinks;
    sinks.reserve(dag.sinks.size());
    for (int64_t s : dag.sinks) sinks.push_back(v[s]);
    v.clear();
    return sum(f.reduce == "stack" ? stack(sinks) : fold(sinks));
  });
}

void run_retain(const Flags& f, Report& r) {
  Tensor x = leaf(f);
  Tensor y = x, y_mid;
  for (int64_t i = 1; i <= f.n; ++i) {
    y = mul(y, 1.0001);
    if (i == f.mid) y_mid = y;
  }
  Tensor loss = sum(y);
  y = Tensor();
  const Device d = x.device();
  const int64_t per = nominal_nodes(f);
  if (f.describe) print_census("streamgrad", census(loss.grad_fn()));
  Tensor g_mid = grad({loss}, {y_mid}, {}, /*retain_graph=*/true)[0];
  r.set_check(g_mid.to_vector<float>()[0], count_nodes(loss.grad_fn()));
  for (int rep = 0; rep < f.warmup + f.reps; ++rep) {
    x.set_grad(Tensor());
    const double t0 = now_ms();
    loss.backward(Tensor(), /*retain_graph=*/true);
    finish(d);
    const double t1 = now_ms();
    TensorList gx = grad({loss}, {x}, {}, /*retain_graph=*/true);
    finish(d);
    const double t2 = now_ms();
    TensorList gm = grad({loss}, {y_mid}, {}, /*retain_graph=*/true);
    finish(d);
    const double t3 = now_ms();
    if (rep < f.warmup) continue;
    r.add("rebwd", t1 - t0, per);
    r.add("grad_x", t2 - t1, per);
    r.add("grad_mid", t3 - t2, f.n - f.mid + 2);
  }
}

// One element-wise function over a float32 tensor: without history ("fwd"), and forward
// plus backward to the input ("fwd_bwd"), written as a user writes it.
void run_math(const Flags& f, Report& r) {
  const std::string& op = f.op;
  const auto apply = [&op](const Tensor& x) {
    if (op == "exp") return exp(x);
    if (op == "tanh") return tanh(x);
    if (op == "sigmoid") return sigmoid(x);
    if (op == "gelu") return gelu(x);
    if (op == "gelu_tanh") return gelu(x, "tanh");
    return silu(x);
  };
  const Tensor x = from_vector(math_input(f.numel), {f.numel}).requires_grad_();
  const Tensor g = ones({f.numel});
  r.set_check(sum(apply(x)).item<double>(), 0);
  time_forward_backward<NoGradGuard>(
      f.warmup, f.reps, r, [&]() { return apply(x); },
      [&]() {
        const Tensor y = apply(x);
        return grad({y}, {x}, {g});
      });
}

}  // namespace bench
}  // namespace streamgrad

int main(int argc, char** argv) {
  using namespace streamgrad::bench;
  const Flags f = parse_flags(argc, argv);
  Report r("streamgrad", f);
  try {
    streamgrad::set_num_threads(f.threads);
    const std::string& c = f.case_name;
    if (c == "chain") run_chain(f, r);
    else if (c == "fanin") run_fanin(f, r);
    else if (c == "dag") run_dag(f, r);
    else if (c == "retain") run_retain(f, r);
    else if (c == "mlp") run_mlp(f, r);
    else if (c == "mlp_hand") run_mlp_hand(f, r);
    else if (c == "cnn") run_cnn(f, r);
    else if (c == "resnet") run_resnet(f, r);
    else if (c == "math") run_math(f, r);
    else if (c == "gpt") run_gpt(f, r);
    else if (c == "layer_norm") run_layer_norm(f, r);
    else if (c == "batch_norm") run_batch_norm(f, r);
    else if (c == "attention") run_attention(f, r);
    else run_overlap(f, r);
  } catch (const std::exception& e) {
    std::cerr << "sg_bench: " << config_name(f) << ": " << e.what() << "\n";
    return 1;
  }
  r.print();
  return r.check_ok() ? 0 : 3;
}
