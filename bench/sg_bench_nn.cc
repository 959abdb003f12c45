// sg_bench's model steps (mlp, cnn, resnet), the stream-overlap graph and the layer_norm and
// batch_norm cases (sg_bench.h).
//
// Both model steps keep streamgrad's own defaults: zero_grad() sets the gradients to none,
// so each backward's AccumulateGrad takes the new gradient over (libtorch 1.13's
// zero_grad() zeroes in place and accumulates into it); the README says so.
#include <functional>
#include <iostream>
#include <memory>
#include <vector>

#include "bench/fork_graph.h"
#include "bench/sg_bench.h"
#include "tools/train_models.h"

namespace streamgrad {
namespace bench {
namespace {

using Layers = std::vector<std::shared_ptr<nn::Module>>;

// Parameters from bench_common.h's init_parameters, so that both sides start equal.
void init_parameters_of(const std::vector<Tensor>& params) {
  std::vector<std::vector<int64_t>> shapes;
  for (const Tensor& p : params) shapes.push_back(p.sizes());
  const std::vector<std::vector<float>> init = init_parameters(shapes);
  NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    if (init[i].empty()) continue;
    Tensor p = params[i];
    copy_(p, from_vector(init[i], p.sizes()));
  }
}

// What a step trains: its parameters (in named_parameters() order), the loss of a batch,
// and the switch between training and evaluation (a no-op for code without modules).
struct Step {
  std::vector<Tensor> params;
  std::function<Tensor(const Tensor& x, const Tensor& y)> loss;
  std::function<void(bool train)> set_train = [](bool) {};
};

// fwd (forward and loss), bwd, optim (step and zero_grad), teardown (dropping the loss),
// total; the check is the loss of an eval-mode forward before training. After the timed
// steps every parameter's .grad is checked to be contiguous (issue 24: a transposed
// weight's gradient must not keep its transposed layout).
void model_loop(const Flags& f, Report& r, const Step& step, const Shape& image_shape) {
  init_parameters_of(step.params);
  std::vector<float> images;
  std::vector<int64_t> labels;
  int64_t features = 1;
  for (size_t i = 1; i < image_shape.size(); ++i) features *= image_shape[i];
  make_batch(f.batch, features, &images, &labels);
  const Tensor x = from_vector(images, image_shape);
  const Tensor y = from_vector(labels, {f.batch});
  nn::SGD opt(step.params, nn::SGDOptions(0.01));
  double check;
  {
    step.set_train(false);
    NoGradGuard no_grad;
    check = step.loss(x, y).item<float>();
    step.set_train(true);
  }
  {
    Tensor loss = step.loss(x, y);
    if (f.describe) print_census("streamgrad", census(loss.grad_fn()));
    r.set_check(check, count_nodes(loss.grad_fn()));
  }
  for (int rep = 0; rep < f.warmup + f.reps; ++rep) {
    const double t0 = now_ms();
    Tensor loss = step.loss(x, y);
    const double t1 = now_ms();
    loss.backward();
    const double t2 = now_ms();
    const bool last = rep + 1 == f.warmup + f.reps;
    if (last) {
      for (const Tensor& p : step.params) {
        SG_CHECK(p.grad().is_contiguous(), InternalError, "sg_bench: the .grad of parameter ",
                 p.describe(), " is not contiguous after backward: ", p.grad().describe());
      }
    }
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

Step module_step(nn::Module& model) {
  Step s;
  s.params = model.parameters();
  s.loss = [&model](const Tensor& x, const Tensor& y) {
    return cross_entropy(model.forward(x), y);
  };
  s.set_train = [&model](bool train) {
    if (train) model.train();
    else model.eval();
  };
  return s;
}

}  // namespace

void run_mlp(const Flags& f, Report& r) {
  SG_CHECK(Device(f.device).is_cpu(), ValueError, "sg_bench --case=mlp runs on cpu only");
  nn::Sequential model(Layers{std::make_shared<nn::Linear>(784, 256),
                              std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(256, 256),
                              std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(256, 10)});
  model_loop(f, r, module_step(model), {f.batch, 784});
}

// The same MLP as a user writes it without layers: raw parameters, matmul with the
// transposed weight, `+ b`, and cross-entropy as log-softmax from exp/log/sum and gather.
void run_mlp_hand(const Flags& f, Report& r) {
  SG_CHECK(Device(f.device).is_cpu(), ValueError, "sg_bench --case=mlp_hand runs on cpu only");
  Step s;
  const std::vector<std::pair<int64_t, int64_t>> dims = {{784, 256}, {256, 256}, {256, 10}};
  for (const auto& [in, out] : dims) {
    s.params.push_back(zeros({out, in}).requires_grad_());
    s.params.push_back(zeros({out}).requires_grad_());
  }
  const std::vector<Tensor> p = s.params;
  s.loss = [p](const Tensor& x, const Tensor& y) {
    Tensor h = x;
    for (size_t i = 0; i < p.size(); i += 2) {
      h = matmul(h, transpose(p[i], 0, 1)) + p[i + 1];
      if (i + 2 < p.size()) h = relu(h);
    }
    Tensor log_probs = h - log(sum(exp(h), {1}, /*keepdim=*/true));
    return neg(mean(gather(log_probs, 1, unsqueeze(y, 1))));
  };
  model_loop(f, r, s, {f.batch, 784});
}

void run_cnn(const Flags& f, Report& r) {
  SG_CHECK(Device(f.device).is_cpu(), ValueError, "sg_bench --case=cnn runs on cpu only");
  std::shared_ptr<nn::Module> model = make_model("cnn");
  model_loop(f, r, module_step(*model), {f.batch, 1, 28, 28});
}

void run_resnet(const Flags& f, Report& r) {
  SG_CHECK(Device(f.device).is_cpu(), ValueError, "sg_bench --case=resnet runs on cpu only");
  std::shared_ptr<nn::Module> model = make_model("resnet");
  model_loop(f, r, module_step(*model), {f.batch, 1, 28, 28});
}

// Backward wall time (host call to device idle) of the forked graph on K streams, of one
// branch alone, and of the K branches on one stream; then the events and waits of one
// backward on one stream and on K streams.
void run_overlap(const Flags& f, Report& r) {
  const Device d(f.device);
  SG_CHECK(d.type() == DeviceType::kSim, ValueError,
           "sg_bench --case=overlap needs a sim device (--device=sim:0), got ", d.str());
  std::vector<Stream> streams;
  for (int k = 0; k < f.branches; ++k) streams.push_back(Stream::create(d));
  auto time_backward = [&](const std::vector<Stream>& on, int branches) {
    ForkGraph g = make_fork_graph(d, on, branches, f.length, f.kernel_us);
    synchronize(d);
    const double t0 = now_ms();
    g.loss.backward();
    synchronize(d);
    return now_ms() - t0;
  };
  std::vector<double> forked_ms, branch_ms;
  for (int rep = 0; rep < f.warmup + f.reps; ++rep) {
    const double fork = time_backward(streams, f.branches);
    const double one = time_backward({streams[0]}, 1);
    const double serial = time_backward({}, f.branches);
    if (rep < f.warmup) continue;
    r.add("bwd_forked", fork, 0);
    r.add("bwd_longest_branch", one, 0);
    r.add("bwd_one_stream", serial, 0);
    forked_ms.push_back(fork);
    branch_ms.push_back(one);
  }
  // Issue 11: backward of K branches on K streams within 1.2x the longest branch alone.
  const double ratio = percentile(forked_ms, 0.5) / percentile(branch_ms, 0.5);
  nlohmann::ordered_json& extra = r.extra();
  extra["overlap_ratio"] = ratio;
  extra["limit_ratio"] = 1.2;
  std::cerr << "streamgrad overlap: forked backward / longest branch = " << ratio
            << (ratio <= 1.2 ? " (<= 1.2: ok)" : " (> 1.2: NOT overlapped)") << "\n";
  for (const bool forked : {false, true}) {
    ForkGraph g = make_fork_graph(d, forked ? streams : std::vector<Stream>{}, f.branches,
                                  f.length, f.kernel_us);
    synchronize(d);
    SyncCounter count;
    g.loss.backward();
    synchronize(d);
    extra[forked ? "forked" : "one_stream"] = {
        {"events", count.events()},
        {"waits", count.waits()},
        {"cross_stream_edges", g.cross_stream_edges}};
    std::cerr << "streamgrad overlap: " << (forked ? "forked" : "one stream") << ": "
              << count.events() << " events, " << count.waits() << " waits per backward, "
              << g.cross_stream_edges << " cross-stream edges\n";
    if (forked) {
      if (f.describe) print_census("streamgrad", census(g.loss.grad_fn()));
      r.set_check(g.x.grad().item<float>(), count_nodes(g.loss.grad_fn()));
    }
  }
}

// layer_norm over rows of kLayerNormWidth: without history ("fwd"), and forward plus
// backward to the input, weight and bias ("fwd_bwd"). Check: the sum of the output's
// squares.
void run_layer_norm(const Flags& f, Report& r) {
  const int64_t rows = f.numel / kLayerNormWidth;
  const Tensor x = from_vector(math_input(f.numel), {rows, kLayerNormWidth}).requires_grad_();
  const Tensor w = from_vector(layer_norm_weight(), {kLayerNormWidth}).requires_grad_();
  const Tensor b = from_vector(layer_norm_bias(), {kLayerNormWidth}).requires_grad_();
  const Tensor g = ones({rows, kLayerNormWidth});
  {
    const Tensor y = layer_norm(x, {kLayerNormWidth}, w, b);
    r.set_check(sum(mul(y, y)).item<double>(), 0);
  }
  time_forward_backward<NoGradGuard>(
      f.warmup, f.reps, r, [&]() { return layer_norm(x, {kLayerNormWidth}, w, b); },
      [&]() {
        const Tensor y = layer_norm(x, {kLayerNormWidth}, w, b);
        return grad({y}, {x, w, b}, {g});
      });
}

// batch_norm in training mode, as BatchNorm2d runs it: without history ("fwd"), and
// forward plus the gradients of x, weight and bias ("fwd_bwd").
void run_batch_norm(const Flags& f, Report& r) {
  const Shape shape{f.batch, kBatchNormChannels, kBatchNormSide, kBatchNormSide};
  const Tensor x = from_vector(math_input(numel_of(shape)), shape).requires_grad_();
  const Tensor w = from_vector(batch_norm_param(false), {kBatchNormChannels}).requires_grad_();
  const Tensor b = from_vector(batch_norm_param(true), {kBatchNormChannels}).requires_grad_();
  const Tensor running_mean = zeros({kBatchNormChannels});
  const Tensor running_var = ones({kBatchNormChannels});
  const Tensor g = ones(shape);
  const auto forward = [&]() {
    return batch_norm(x, w, b, running_mean, running_var, /*training=*/true, 0.1, 1e-5);
  };
  {
    const Tensor y = forward();
    r.set_check(sum(mul(y, y)).item<double>(), 0);
  }
  time_forward_backward<NoGradGuard>(f.warmup, f.reps, r, forward, [&]() {
    const Tensor y = forward();
    return grad({y}, {x, w, b}, {g});
  });
}

}  // namespace bench
}  // namespace streamgrad
