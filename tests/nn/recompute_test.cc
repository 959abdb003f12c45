// Activation checkpointing, reentrant and not: the plain run's gradients bit for bit (with
// dropout too, through the preserved random state), less memory held by the graph, early
// stop, one recomputation when two device workers unpack at once, the forward's streams
// replayed (with forward on two streams, under the adversarial and threaded schedulers and
// the stream sanitizer), nesting (the reference's rules: what an inner checkpoint saves is
// its own, its inputs are saved to the outer one), and the errors: inputs changed in place,
// a function that does other work the second time.
#include <catch2/catch.hpp>

#include <atomic>
#include <vector>

#include "engine/backward.h"
#include "engine/factories.h"
#include "nn/recompute.h"
#include "ops/ops.h"
#include "runtime/observe/stream_sanitizer.h"
#include "runtime/runtime.h"

namespace streamgrad {
namespace {

TensorOptions f32(Device d) { return TensorOptions().dtype(DType::kFloat32).device(d); }

Tensor values(int64_t rows, int64_t cols, Device d, float scale) {
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (size_t k = 0; k < v.size(); ++k) v[k] = scale * static_cast<float>(static_cast<int>(k * 7 % 23) - 11);
  return from_vector<float>(v, {rows, cols}, f32(d));
}

std::vector<float> host(const Tensor& t) { return to(t, Device("cpu")).to_vector<float>(); }

struct Weights {
  explicit Weights(Device d)
      : a(values(64, 64, d, 0.01f).requires_grad_()), b(values(64, 64, d, 0.02f).requires_grad_()) {}
  Tensor a, b;
  std::vector<std::vector<float>> grads() const { return {host(a.grad()), host(b.grad())}; }
  void zero() {
    a.set_grad(Tensor());
    b.set_grad(Tensor());
  }
};

TEST_CASE("checkpointed blocks give the plain run's gradients, dropout included",
          "[checkpoint]") {
  const bool reentrant = GENERATE(false, true);
  const Device d(GENERATE(as<std::string>{}, "cpu", "sim:0"));
  Weights w(d);
  // The reentrant variant differentiates only through inputs that require grad (as the
  // reference's): x does.
  const Tensor x = values(32, 64, d, 0.05f).requires_grad_();
  std::atomic<int> runs{0};
  const nn::CheckpointFn block = [&](const TensorList& in) {
    ++runs;
    Tensor h = tanh(matmul(in[0], w.a));
    h = dropout(h, 0.3, true);
    return TensorList{tanh(matmul(h, w.b))};
  };
  manual_seed(5);
  sum(block({x})[0]).backward();
  const auto plain = w.grads();
  w.zero();
  nn::CheckpointOptions o;
  o.use_reentrant = reentrant;
  manual_seed(5);
  Tensor y = nn::checkpoint(block, {x}, o)[0];
  runs = 0;
  sum(y).backward();
  CHECK(runs == 1);  // recomputed once
  const bool same = w.grads() == plain;
  CHECK(same);
}

TEST_CASE("the graph holds less device memory, and early stop skips work no one needs",
          "[checkpoint][memory]") {
  const Device d("sim:1");
  Weights w(d);
  const Tensor x = values(256, 64, d, 0.05f);
  std::atomic<int> tail_runs{0};
  const nn::CheckpointFn block = [&](const TensorList& in) {
    Tensor h = tanh(matmul(in[0], w.a));
    h = tanh(matmul(h, w.b));
    ++tail_runs;
    return TensorList{mul(h, 2.0)};  // saves nothing
  };
  synchronize(d);
  const int64_t base = memory_stats(d).allocated_bytes.current;
  int64_t plain_held = 0, held = 0;
  {
    Tensor y = block({x})[0];
    synchronize(d);
    plain_held = memory_stats(d).allocated_bytes.current - base;
  }
  const bool early = GENERATE(true, false);
  nn::CheckpointOptions o;
  o.early_stop = early;
  Tensor y = nn::checkpoint(block, {x}, o)[0];
  synchronize(d);
  held = memory_stats(d).allocated_bytes.current - base;
  // Plain: the two tanh outputs and y (64 KiB each); checkpointed: y alone.
  CHECK(plain_held >= 3 * 64 * 1024);
  CHECK(held <= 64 * 1024);
  tail_runs = 0;
  sum(y).backward();
  CHECK(tail_runs == (early ? 0 : 1));
}

TEST_CASE("the recomputation replays the forward's streams and hands tensors over by events",
          "[checkpoint][streams]") {
  const SimSchedulerKind kind =
      GENERATE(SimSchedulerKind::kDeterministic, SimSchedulerKind::kThreaded);
  const bool reentrant = GENERATE(false, true);
  const bool nested = GENERATE(false, true);
  INFO("reentrant " << reentrant << ", nested " << nested);
  SimSchedulerOptions sched;
  sched.kind = kind;
  sched.policy = SimPolicy::kAdversarial;
  sched.seed = 3;
  SimSchedulerScope scope(sched);
  const Device d("sim:0");
  const Stream s1 = Stream::create(d), s2 = Stream::create(d);
  Weights w(d);
  const Tensor x = values(32, 64, d, 0.05f).requires_grad_();
  // Two branches: one on whatever stream is current (s1 in forward), one on s2 (nested:
  // under its own checkpoint, with an input made on s1). In backward neither branch's
  // nodes wait for the other's, so a saved tensor recomputed on the wrong stream, or
  // handed over without an event, is a race.
  const nn::CheckpointFn branch = [&](const TensorList& in) {
    return TensorList{tanh(matmul(in[0], w.b))};
  };
  const nn::CheckpointFn block = [&](const TensorList& in) {
    const Stream here = current_stream(d);
    Tensor left = tanh(matmul(in[0], w.a));
    const Tensor mid = mul(in[0], 1.5);
    s2.wait_stream(here);
    mid.storage().record_stream(s2);
    Tensor right;
    {
      StreamGuard g(s2);
      right = nested ? nn::checkpoint(branch, {mid})[0] : branch({mid})[0];
    }
    here.wait_stream(s2);
    right.storage().record_stream(here);
    return TensorList{add(left, right)};
  };
  const auto run = [&](bool checkpointed) {
    Tensor y;
    {
      s1.wait_stream(current_stream(d));
      StreamGuard g(s1);
      nn::CheckpointOptions o;
      o.use_reentrant = reentrant;
      y = checkpointed ? nn::checkpoint(block, {x}, o)[0] : block({x})[0];
    }
    current_stream(d).wait_stream(s1);
    sum(y).backward();
  };
  run(false);
  const auto plain = w.grads();
  w.zero();
  StreamSanitizer san(StreamSanitizer::Mode::kCollect);
  run(true);
  const bool same = w.grads() == plain;
  CHECK(same);
  synchronize(d);
  const auto found = san.findings();
  CHECK(found.empty());
  if (!found.empty()) WARN(found[0].message);
}

TEST_CASE("two device workers unpacking at once share one recomputation", "[checkpoint]") {
  SimSchedulerOptions sched;
  sched.kind = SimSchedulerKind::kThreaded;
  SimSchedulerScope scope(sched);
  const Tensor a = values(64, 64, Device("sim:0"), 0.01f).requires_grad_();
  const Tensor b = values(64, 64, Device("sim:1"), 0.01f).requires_grad_();
  std::atomic<int> runs{0};
  const nn::CheckpointFn block = [&](const TensorList& in) {
    ++runs;
    return TensorList{tanh(in[0]), tanh(in[1])};
  };
  for (int i = 0; i < 20; ++i) {
    runs = 0;
    const TensorList y = nn::checkpoint(block, {a, b});
    backward({sum(y[0]), sum(y[1])});
    CHECK(runs == 2);  // the forward and one recomputation
  }
}

TEST_CASE("checkpoint refuses what would give wrong gradients", "[checkpoint]") {
  Tensor w = values(8, 8, Device("cpu"), 0.1f).requires_grad_();
  SECTION("an input changed in place after the forward") {
    Tensor x = values(4, 8, Device("cpu"), 0.1f);
    Tensor y = nn::checkpoint([&](const TensorList& in) { return TensorList{tanh(matmul(in[0], w))}; },
                              {x})[0];
    mul_(x, 2.0);
    CHECK_THROWS_WITH(sum(y).backward(), Catch::Contains("input 0") &&
                                             Catch::Contains("modified in place") &&
                                             Catch::Contains("version 0, now 1"));
  }
  SECTION("a function that does other work when recomputed") {
    int calls = 0;
    Tensor x = values(4, 8, Device("cpu"), 0.1f);
    Tensor y = nn::checkpoint(
        [&](const TensorList& in) {
          Tensor h = matmul(in[0], w);
          if (calls++ > 0) h = narrow(h, 0, 0, 2);
          return TensorList{sum(tanh(h))};
        },
        {x})[0];
    CHECK_THROWS_WITH(y.backward(), Catch::Contains("recomputation saved") &&
                                        Catch::Contains("same work each time"));
  }
}

TEST_CASE("nested checkpoints give the plain run's gradients, each level recomputed once",
          "[checkpoint][nested]") {
  const Device d(GENERATE(as<std::string>{}, "cpu", "sim:0"));
  const bool outer_reentrant = GENERATE(false, true);
  const bool inner_reentrant = GENERATE(false, true);
  const bool early = GENERATE(true, false);
  INFO("outer reentrant " << outer_reentrant << ", inner " << inner_reentrant << ", early stop "
                          << early);
  Weights w(d);
  const Tensor x = values(32, 64, d, 0.05f).requires_grad_();
  std::atomic<int> outer_runs{0}, inner_runs{0};
  nn::CheckpointOptions oo, io;
  oo.use_reentrant = outer_reentrant;
  io.use_reentrant = inner_reentrant;
  oo.early_stop = io.early_stop = early;
  const nn::CheckpointFn inner = [&](const TensorList& in) {
    ++inner_runs;
    return TensorList{tanh(dropout(tanh(matmul(in[0], w.b)), 0.3, true))};
  };
  const auto outer = [&](bool nested) {
    return [&, nested](const TensorList& in) {
      ++outer_runs;
      const Tensor h = tanh(matmul(in[0], w.a));
      return nested ? nn::checkpoint(inner, {h}, io) : inner({h});
    };
  };
  manual_seed(5);
  sum(outer(false)({x})[0]).backward();
  auto plain = w.grads();
  plain.push_back(host(x.grad()));
  w.zero();
  x.set_grad(Tensor());
  manual_seed(5);
  const Tensor y = nn::checkpoint(outer(true), {x}, oo)[0];
  outer_runs = inner_runs = 0;
  sum(y).backward();
  auto got = w.grads();
  got.push_back(host(x.grad()));
  CHECK(got == plain);
  if (!outer_reentrant && !inner_reentrant) {
    // The inner part's tensors first: the outer recomputes up to the inner call (and on
    // through it without early stop), then the inner recomputes; the outer's own tensors
    // are back by then.
    CHECK(outer_runs == 1);
    CHECK(inner_runs == (early ? 1 : 2));
  }
  CHECK_FALSE(nn::recomputing());
}

TEST_CASE("a nested checkpoint's inputs are saved to the outer one, not held",
          "[checkpoint][nested][memory]") {
  const Device d("sim:1");
  Weights w(d);
  const Tensor x = values(256, 64, d, 0.05f);
  const nn::CheckpointFn inner = [&](const TensorList& in) {
    return TensorList{mul(tanh(matmul(in[0], w.b)), 2.0)};
  };
  const nn::CheckpointFn outer = [&](const TensorList& in) {
    return nn::checkpoint(inner, {tanh(matmul(in[0], w.a))});
  };
  sum(outer({x})[0]).backward();
  const auto plain = w.grads();
  w.zero();
  synchronize(d);
  const int64_t base = memory_stats(d).allocated_bytes.current;
  Tensor y = nn::checkpoint(outer, {x})[0];
  synchronize(d);
  // y alone (64 KiB): the inner call's input (the outer's tanh) went back to the
  // allocator like everything else the two functions computed.
  CHECK(memory_stats(d).allocated_bytes.current - base <= 64 * 1024);
  sum(y).backward();
  CHECK(w.grads() == plain);
}

TEST_CASE("two device workers unpacking nested checkpoints at once share the outer "
          "recomputation", "[checkpoint][nested]") {
  SimSchedulerOptions sched;
  sched.kind = SimSchedulerKind::kThreaded;
  SimSchedulerScope scope(sched);
  const Tensor a = values(64, 64, Device("sim:0"), 0.01f).requires_grad_();
  const Tensor b = values(64, 64, Device("sim:1"), 0.01f).requires_grad_();
  std::atomic<int> outer_runs{0}, a_runs{0}, b_runs{0};
  const nn::CheckpointFn on_a = [&](const TensorList& in) {
    ++a_runs;
    return TensorList{tanh(tanh(in[0]))};
  };
  const nn::CheckpointFn on_b = [&](const TensorList& in) {
    ++b_runs;
    return TensorList{tanh(tanh(in[0]))};
  };
  const nn::CheckpointFn outer = [&](const TensorList& in) {
    ++outer_runs;
    return TensorList{nn::checkpoint(on_a, {mul(in[0], 2.0)})[0],
                      nn::checkpoint(on_b, {mul(in[1], 2.0)})[0]};
  };
  for (int i = 0; i < 20; ++i) {
    outer_runs = a_runs = b_runs = 0;
    const TensorList y = nn::checkpoint(outer, {a, b});
    backward({sum(y[0]), sum(y[1])});
    // Whichever worker comes first has the outer function run again, up to the second
    // inner call (early stop); each inner function then runs again once.
    CHECK(outer_runs == 2);
    CHECK(a_runs == 3);
    CHECK(b_runs == 2);
  }
}

TEST_CASE("checkpoint_sequential matches the plain Sequential", "[checkpoint]") {
  auto seq = std::make_shared<nn::Sequential>();
  for (int i = 0; i < 4; ++i) {
    seq->push_back(std::make_shared<nn::Linear>(16, 16));
    seq->push_back(std::make_shared<nn::ReLU>());
  }
  const Tensor x = values(8, 16, Device("cpu"), 0.1f);
  sum(seq->forward(x)).backward();
  std::vector<std::vector<float>> plain;
  for (const Tensor& p : seq->parameters()) plain.push_back(p.grad().to_vector<float>());
  for (Tensor p : seq->parameters()) p.set_grad(Tensor());
  sum(nn::checkpoint_sequential(*seq, 3, x)).backward();
  std::vector<std::vector<float>> got;
  for (const Tensor& p : seq->parameters()) got.push_back(p.grad().to_vector<float>());
  CHECK(got == plain);
  CHECK_THROWS_WITH(nn::checkpoint_sequential(*seq, 0, x), Catch::Contains("segments"));
}

// The reference framework moves batch norm's running statistics a second time when it
// recomputes; here they move once per training forward (nn/recompute.h).
TEST_CASE("a checkpointed batch norm updates its running statistics once", "[checkpoint]") {
  const auto make = [] {
    auto seq = std::make_shared<nn::Sequential>();
    seq->push_back(std::make_shared<nn::Conv2d>(2, 3, 3));
    seq->push_back(std::make_shared<nn::BatchNorm2d>(3));
    seq->push_back(std::make_shared<nn::ReLU>());
    seq->push_back(std::make_shared<nn::Conv2d>(3, 2, 1));
    return seq;
  };
  // Requires grad: a reentrant checkpoint gives the parameters inside it gradients only then.
  Tensor x = reshape(values(4, 2 * 6 * 6, Device("cpu"), 0.3f), {4, 2, 6, 6}).detach();
  x.requires_grad_();
  const auto buffers = [](const nn::Sequential& m) {
    std::vector<std::vector<double>> out;
    for (const auto& [name, b] : m.named_buffers()) out.push_back(to(b, DType::kFloat64).to_vector<double>());
    return out;
  };
  for (const bool reentrant : {false, true}) {
    INFO("use_reentrant " << reentrant);
    manual_seed(3);
    auto plain = make();
    manual_seed(3);
    auto ckpt = make();
    nn::CheckpointOptions o;
    o.use_reentrant = reentrant;
    for (int step = 0; step < 2; ++step) {
      sum(plain->forward(x)).backward();
      sum(nn::checkpoint_sequential(*ckpt, 2, x, o)).backward();
    }
    CHECK_FALSE(nn::recomputing());
    CHECK(buffers(*ckpt) == buffers(*plain));
    const auto grads = [](const nn::Sequential& m) {
      std::vector<std::vector<float>> g;
      for (const Tensor& p : m.parameters()) g.push_back(p.grad().to_vector<float>());
      return g;
    };
    CHECK(grads(*ckpt) == grads(*plain));
  }
}

}  // namespace
}  // namespace streamgrad
