// libtorch's side of the side-by-side benchmark: the same graphs, flags, phases and JSON
// line as bench/sg_bench (bench/bench_common.h), written with libtorch's C++ API the way
// bench/README.md describes the cases.
//
//   bench/install_libtorch.sh && bazel build -c opt //bench:torch_bench
//   bazel-bin/bench/torch_bench --case=dag --n=5000 --reduce=stack --describe
//
// Threads: torch::set_num_threads(--threads); OpenBLAS follows OPENBLAS_NUM_THREADS /
// OMP_NUM_THREADS, which run.sh sets per process. The mlp and cnn steps keep libtorch
// 1.13's default zero_grad(), which zeroes the gradients in place.
// Exit status: 0, 1 when libtorch threw, 2 for bad flags, 3 when the check is wrong; the
// overlap case (streams of the simulated device) prints a line marked "skipped".
#include <torch/csrc/autograd/function.h>
#include <torch/torch.h>

#include <exception>
#include <functional>
#include <iostream>
#include <unordered_set>
#include <vector>

#include "bench/bench_report.h"

namespace streamgrad {
namespace bench {
namespace {

using torch::Tensor;
namespace F = torch::nn::functional;

// Nodes reachable from `root` by type, each counted once; edges without a function
// (inputs that need no grad) are not nodes (libtorch's census, bench/README.md).
std::map<std::string, int64_t> census(const std::shared_ptr<torch::autograd::Node>& root) {
  std::map<std::string, int64_t> out;
  if (!root) return out;
  std::unordered_set<const torch::autograd::Node*> seen{root.get()};
  std::vector<const torch::autograd::Node*> todo{root.get()};
  while (!todo.empty()) {
    const torch::autograd::Node* node = todo.back();
    todo.pop_back();
    ++out[node->name()];
    for (const torch::autograd::Edge& e : node->next_edges()) {
      if (e.function && seen.insert(e.function.get()).second) todo.push_back(e.function.get());
    }
  }
  return out;
}

int64_t count_nodes(const Tensor& loss) {
  int64_t n = 0;
  for (const auto& [name, count] : census(loss.grad_fn())) n += count;
  return n;
}

Tensor leaf(const Flags& f) { return torch::ones({f.numel}, torch::requires_grad()); }

float first_grad(const Tensor& x) { return x.grad().view({-1})[0].item<float>(); }

// The fresh-graph loop (bench/README.md) (as sg_bench's).
void fresh_graph_loop(const Flags& f, Report& r, Tensor& x, const std::function<Tensor()>& forward) {
  const int64_t per = nominal_nodes(f);
  {
    Tensor loss = forward();
    const int64_t nodes = count_nodes(loss);
    if (f.describe) print_census("libtorch", census(loss.grad_fn()));
    loss.backward();
    r.set_check(first_grad(x), nodes);
  }
  for (int rep = 0; rep < f.warmup + f.reps; ++rep) {
    x.mutable_grad() = Tensor();
    const double t0 = now_ms();
    Tensor loss = forward();
    const double t1 = now_ms();
    loss.backward();
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

Tensor chain_forward(const Tensor& x, const Flags& f) {
  Tensor y = x;
  for (int64_t i = 0; i < f.n; ++i) y = f.op == "mul" ? y * 1.0001 : y + 1e-4;
  return y;
}

Tensor fold(const std::vector<Tensor>& v) {
  Tensor s = v[0];
  for (size_t i = 1; i < v.size(); ++i) s = s + v[i];
  return s;
}

void run_chain(const Flags& f, Report& r) {
  Tensor x = leaf(f);
  fresh_graph_loop(f, r, x, [&] { return chain_forward(x, f).sum(); });
  torch::NoGradGuard no_grad;
  for (int rep = 0; rep < f.warmup + f.reps; ++rep) {
    const double t0 = now_ms();
    Tensor y = chain_forward(x, f);
    const double t1 = now_ms();
    if (rep >= f.warmup) r.add("nograd", t1 - t0, f.n);
  }
}

void run_fanin(const Flags& f, Report& r) {
  Tensor x = leaf(f);
  fresh_graph_loop(f, r, x, [&] {
    std::vector<Tensor> parts;
    parts.reserve(static_cast<size_t>(f.k));
    for (int64_t i = 0; i < f.k; ++i) parts.push_back(x * 1.0001);
    return (f.reduce == "stack" ? torch::stack(parts) : fold(parts)).sum();
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
      v[i] = op.arity == 1 ? v[op.a] * 1.0001 : v[op.a] + v[op.b];
    }
    std::vector<Tensor> sinks;
    sinks.reserve(dag.sinks.size());
    for (int64_t s : dag.sinks) sinks.push_back(v[s]);
    v.clear();
    return (f.reduce == "stack" ? torch::stack(sinks) : fold(sinks)).sum();
  });
}

void run_retain(const Flags& f, Report& r) {
  Tensor x = leaf(f);
  Tensor y = x, y_mid;
  for (int64_t i = 1; i <= f.n; ++i) {
    y = y * 1.0001;
    if (i == f.mid) y_mid = y;
  }
  Tensor loss = y.sum();
  y = Tensor();
  const int64_t per = nominal_nodes(f);
  if (f.describe) print_census("libtorch", census(loss.grad_fn()));
  Tensor g_mid = torch::autograd::grad({loss}, {y_mid}, {}, /*retain_graph=*/true)[0];
  r.set_check(g_mid.view({-1})[0].item<float>(), count_nodes(loss));
  for (int rep = 0; rep < f.warmup + f.reps; ++rep) {
    x.mutable_grad() = Tensor();
    const double t0 = now_ms();
    loss.backward({}, /*retain_graph=*/true);
    const double t1 = now_ms();
    auto gx = torch::autograd::grad({loss}, {x}, {}, /*retain_graph=*/true);
    const double t2 = now_ms();
    auto gm = torch::autograd::grad({loss}, {y_mid}, {}, /*retain_graph=*/true);
    const double t3 = now_ms();
    if (rep < f.warmup) continue;
    r.add("rebwd", t1 - t0, per);
    r.add("grad_x", t2 - t1, per);
    r.add("grad_mid", t3 - t2, f.n - f.mid + 2);
  }
}

// What a step trains (as sg_bench_nn.cc's Step): parameters in named_parameters() order,
// the loss of a batch, and the train/eval switch.
struct Step {
  std::vector<Tensor> params;
  std::function<Tensor(const Tensor& x, const Tensor& y)> loss;
  std::function<void(bool train)> set_train = [](bool) {};
};

// As sg_bench's model_loop: same data, same initial parameters, same phases.
void model_loop(const Flags& f, Report& r, const Step& step, std::vector<int64_t> image_shape) {
  std::vector<std::vector<int64_t>> shapes;
  for (const Tensor& p : step.params) shapes.push_back(p.sizes().vec());
  const std::vector<std::vector<float>> init = init_parameters(shapes);
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < step.params.size(); ++i) {
      if (init[i].empty()) continue;
      Tensor p = step.params[i];
      p.copy_(torch::from_blob(const_cast<float*>(init[i].data()), shapes[i]));
    }
  }
  std::vector<float> images;
  std::vector<int64_t> labels;
  int64_t features = 1;
  for (size_t i = 1; i < image_shape.size(); ++i) features *= image_shape[i];
  make_batch(f.batch, features, &images, &labels);
  const Tensor x = torch::from_blob(images.data(), image_shape).clone();
  const Tensor y = torch::from_blob(labels.data(), {f.batch}, torch::kLong).clone();
  torch::optim::SGD opt(step.params, torch::optim::SGDOptions(0.01));
  double check;
  {
    step.set_train(false);
    torch::NoGradGuard no_grad;
    check = step.loss(x, y).item<float>();
    step.set_train(true);
  }
  {
    Tensor loss = step.loss(x, y);
    if (f.describe) print_census("libtorch", census(loss.grad_fn()));
    r.set_check(check, count_nodes(loss));
  }
  for (int rep = 0; rep < f.warmup + f.reps; ++rep) {
    const double t0 = now_ms();
    Tensor loss = step.loss(x, y);
    const double t1 = now_ms();
    loss.backward();
    const double t2 = now_ms();
    opt.step();
    opt.zero_grad();
    const double t3 = now_ms();
    loss = Tensor();
    const double t4 = now_ms();
    if (rep < f.warmup) continue;
    r.add("fwd", t1 - t0, 0);
    r.add("bwd", t2 - t1, 0);
    r.add("optim", t3 - t2, 0);
    r.add("teardown", t4 - t3, 0);
    r.add("total", t4 - t0, 0);
  }
}

Step module_step(torch::nn::Sequential& model) {
  Step s;
  for (const auto& p : model->named_parameters()) s.params.push_back(p.value());
  s.loss = [model](const Tensor& x, const Tensor& y) mutable {
    return F::cross_entropy(model->forward(x), y);
  };
  s.set_train = [model](bool train) mutable { model->train(train); };
  return s;
}

void run_mlp(const Flags& f, Report& r) {
  namespace nn = torch::nn;
  nn::Sequential model(nn::Linear(784, 256), nn::ReLU(), nn::Linear(256, 256), nn::ReLU(),
                       nn::Linear(256, 10));
  model_loop(f, r, module_step(model), {f.batch, 784});
}

// sg_bench's mlp_hand, op for op.
void run_mlp_hand(const Flags& f, Report& r) {
  Step s;
  const std::vector<std::pair<int64_t, int64_t>> dims = {{784, 256}, {256, 256}, {256, 10}};
  for (const auto& [in, out] : dims) {
    s.params.push_back(torch::zeros({out, in}).requires_grad_());
    s.params.push_back(torch::zeros({out}).requires_grad_());
  }
  const std::vector<Tensor> p = s.params;
  s.loss = [p](const Tensor& x, const Tensor& y) {
    Tensor h = x;
    for (size_t i = 0; i < p.size(); i += 2) {
      h = torch::matmul(h, torch::transpose(p[i], 0, 1)) + p[i + 1];
      if (i + 2 < p.size()) h = torch::relu(h);
    }
    Tensor log_probs = h - torch::log(torch::sum(torch::exp(h), {1}, /*keepdim=*/true));
    return -torch::mean(torch::gather(log_probs, 1, y.unsqueeze(1)));
  };
  model_loop(f, r, s, {f.batch, 784});
}

// tools/train's cnn (tools/train_models.cc), layer by layer.
void run_cnn(const Flags& f, Report& r) {
  namespace nn = torch::nn;
  nn::Sequential model(
      nn::Conv2d(nn::Conv2dOptions(1, 16, 3).padding(1)), nn::BatchNorm2d(16), nn::ReLU(),
      nn::MaxPool2d(nn::MaxPool2dOptions(2)), nn::Conv2d(nn::Conv2dOptions(16, 32, 3).padding(1)),
      nn::BatchNorm2d(32), nn::ReLU(), nn::MaxPool2d(nn::MaxPool2dOptions(2)), nn::Flatten(),
      nn::Linear(32 * 7 * 7, 128), nn::ReLU(), nn::Dropout(0.25), nn::Linear(128, 10));
  model_loop(f, r, module_step(model), {f.batch, 1, 28, 28});
}


// tools/train's resnet (tools/train_models_gpt.cc): its basic block, modules registered in
// the same order so that named_parameters() lists the same shapes in the same order.
struct BasicBlockImpl : torch::nn::Module {
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride) {
    namespace nn = torch::nn;
    conv1 = register_module(
        "conv1", nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)));
    bn1 = register_module("bn1", nn::BatchNorm2d(out));
    conv2 = register_module("conv2",
                            nn::Conv2d(nn::Conv2dOptions(out, out, 3).padding(1).bias(false)));
    bn2 = register_module("bn2", nn::BatchNorm2d(out));
    if (stride != 1 || in != out) {
      downsample = register_module(
          "downsample",
          nn::Sequential(nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
                         nn::BatchNorm2d(out)));
    }
  }
  Tensor forward(const Tensor& x) {
    const Tensor h = torch::relu(bn1->forward(conv1->forward(x)));
    const Tensor y = bn2->forward(conv2->forward(h));
    return torch::relu(y + (downsample.is_empty() ? x : downsample->forward(x)));
  }
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  torch::nn::Sequential downsample{nullptr};
};
TORCH_MODULE(BasicBlock);

void run_resnet(const Flags& f, Report& r) {
  namespace nn = torch::nn;
  nn::Sequential model(nn::Conv2d(nn::Conv2dOptions(1, 16, 3).padding(1).bias(false)),
                       nn::BatchNorm2d(16), nn::ReLU());
  int64_t in = 16;
  for (const int64_t out : {16, 32, 64}) {
    for (int64_t b = 0; b < 2; ++b) {  // ResNet's default: two blocks per stage
      model->push_back(BasicBlock(in, out, b == 0 && out != 16 ? 2 : 1));
      in = out;
    }
  }
  model->push_back(nn::Functional([](const Tensor& x) { return x.mean({2, 3}); }));
  model->push_back(nn::Linear(64, 10));
  model_loop(f, r, module_step(model), {f.batch, 1, 28, 28});
}

// bench_common.h's --case=math, as sg_bench's run_math.
void run_math(const Flags& f, Report& r) {
  const std::string& op = f.op;
  const auto apply = [&op](const Tensor& x) {
    if (op == "exp") return x.exp();
    if (op == "tanh") return x.tanh();
    if (op == "sigmoid") return x.sigmoid();
    if (op == "gelu") return F::gelu(x);
    if (op == "gelu_tanh") return F::gelu(x, F::GELUFuncOptions().approximate("tanh"));
    return F::silu(x);
  };
  std::vector<float> values = math_input(f.numel);
  const Tensor x = torch::from_blob(values.data(), {f.numel}).clone().requires_grad_();
  const Tensor g = torch::ones({f.numel});
  r.set_check(apply(x).sum().item<double>(), 0);
  time_forward_backward<torch::NoGradGuard>(
      f.warmup, f.reps, r, [&]() { return apply(x); },
      [&]() {
        const Tensor y = apply(x);
        return torch::autograd::grad({y}, {x}, {g});
      });
}

// bench_common.h's --case=layer_norm, as sg_bench's run_layer_norm.
void run_layer_norm(const Flags& f, Report& r) {
  const int64_t rows = f.numel / kLayerNormWidth;
  std::vector<float> values = math_input(f.numel), wv = layer_norm_weight(),
                     bv = layer_norm_bias();
  const Tensor x =
      torch::from_blob(values.data(), {rows, kLayerNormWidth}).clone().requires_grad_();
  const Tensor w = torch::from_blob(wv.data(), {kLayerNormWidth}).clone().requires_grad_();
  const Tensor b = torch::from_blob(bv.data(), {kLayerNormWidth}).clone().requires_grad_();
  const Tensor g = torch::ones({rows, kLayerNormWidth});
  const auto options = F::LayerNormFuncOptions({kLayerNormWidth}).weight(w).bias(b).eps(1e-5);
  {
    const Tensor y = F::layer_norm(x, options);
    r.set_check((y * y).sum().item<double>(), 0);
  }
  time_forward_backward<torch::NoGradGuard>(
      f.warmup, f.reps, r, [&]() { return F::layer_norm(x, options); },
      [&]() {
        const Tensor y = F::layer_norm(x, options);
        return torch::autograd::grad({y}, {x, w, b}, {g});
      });
}

// bench_common.h's --case=batch_norm, as sg_bench's run_batch_norm.
void run_batch_norm(const Flags& f, Report& r) {
  const std::vector<int64_t> shape{f.batch, kBatchNormChannels, kBatchNormSide, kBatchNormSide};
  std::vector<float> values = math_input(f.batch * kBatchNormChannels * kBatchNormSide *
                                         kBatchNormSide),
                     wv = batch_norm_param(false), bv = batch_norm_param(true);
  const Tensor x = torch::from_blob(values.data(), shape).clone().requires_grad_();
  const Tensor w = torch::from_blob(wv.data(), {kBatchNormChannels}).clone().requires_grad_();
  const Tensor b = torch::from_blob(bv.data(), {kBatchNormChannels}).clone().requires_grad_();
  const Tensor running_mean = torch::zeros({kBatchNormChannels});
  const Tensor running_var = torch::ones({kBatchNormChannels});
  const Tensor g = torch::ones(shape);
  const auto forward = [&]() {
    return torch::batch_norm(x, w, b, running_mean, running_var, /*training=*/true, 0.1, 1e-5,
                             /*cudnn_enabled=*/false);
  };
  {
    const Tensor y = forward();
    r.set_check((y * y).sum().item<double>(), 0);
  }
  time_forward_backward<torch::NoGradGuard>(f.warmup, f.reps, r, forward, [&]() {
    const Tensor y = forward();
    return torch::autograd::grad({y}, {x, w, b}, {g});
  });
}
}  // namespace
}  // namespace bench
}  // namespace streamgrad

namespace streamgrad {
namespace bench {
void run_gpt(const Flags& f, Report& r);        // torch_bench_gpt.cc
void run_attention(const Flags& f, Report& r);  // torch_bench_gpt.cc
}  // namespace bench
}  // namespace streamgrad

int main(int argc, char** argv) {
  using namespace streamgrad::bench;
  const Flags f = parse_flags(argc, argv);
  if (f.case_name == "overlap") {
    nlohmann::json j = {{"side", "libtorch"}, {"name", config_name(f)}, {"case", f.case_name},
                        {"device", f.device}, {"threads", f.threads},
                        {"skipped", "streams of the simulated device: streamgrad only"}};
    std::cout << j.dump() << std::endl;
    return 0;
  }
  if (f.device != "cpu") {
    std::cerr << "torch_bench: --device=" << f.device << ": only cpu is measured\n";
    return 2;
  }
  torch::set_num_threads(f.threads);
  Report r("libtorch", f);
  try {
    const std::string& c = f.case_name;
    if (c == "chain") run_chain(f, r);
    else if (c == "fanin") run_fanin(f, r);
    else if (c == "dag") run_dag(f, r);
    else if (c == "retain") run_retain(f, r);
    else if (c == "mlp") run_mlp(f, r);
    else if (c == "mlp_hand") run_mlp_hand(f, r);
    else if (c == "math") run_math(f, r);
    else if (c == "gpt") run_gpt(f, r);
    else if (c == "layer_norm") run_layer_norm(f, r);
    else if (c == "batch_norm") run_batch_norm(f, r);
    else if (c == "attention") run_attention(f, r);
    else if (c == "resnet") run_resnet(f, r);
    else run_cnn(f, r);
  } catch (const std::exception& e) {
    std::cerr << "torch_bench: " << config_name(f) << ": " << e.what() << "\n";
    return 1;
  }
  r.print();
  return r.check_ok() ? 0 : 3;
}
