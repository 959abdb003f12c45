// The code shown in README.md, compiled and run so that the README cannot rot. Keep the
// two in step: the README's snippets are copied from here.
#include <catch2/catch.hpp>

#include "streamgrad.h"

namespace {
using namespace streamgrad;

// README: "Checking your own operator's gradients"
struct MySquare : Function<MySquare> {
  static TensorList forward(FunctionCtx& ctx, const TensorList& in) {
    ctx.save_for_backward({in[0]});
    return {mul(in[0], in[0])};
  }
  static TensorList backward(FunctionCtx& ctx, const TensorList& grad_out) {
    Tensor x = ctx.saved_tensors()[0];
    return {mul(grad_out[0], mul(x, 2.0))};
  }
};

TEST_CASE("MySquare has the right gradients", "[readme]") {
  const TensorOptions f64 = TensorOptions().dtype(DType::kFloat64).device(default_device());
  TensorList inputs{randn({3, 4}, f64).requires_grad_()};
  GradcheckFn f = [](const TensorList& x) { return MySquare::apply(x, "MySquare"); };

  CHECK(gradcheck(f, inputs).passed);       // throws GradcheckError with the worst element
  CHECK(gradgradcheck(f, inputs).passed);   // gradients of gradients
  GradcheckOptions fast;
  fast.fast_mode = true;                    // random projections: one backward per input
  CHECK(gradcheck(f, inputs, fast).passed);
  if (inputs[0].device().type() == DeviceType::kSim) {
    CHECK(check_stream_consistency(f, inputs).passed);  // every op on its own stream
  }
}

// README: "Autograd in five minutes"
TEST_CASE("autograd in five minutes", "[readme]") {
  Tensor x = randn({64, 784}, TensorOptions().device("sim:0"));
  Tensor w = randn({784, 10}, TensorOptions().device("sim:0")).requires_grad_();
  Tensor loss = mean(relu(matmul(x, w)));
  loss.backward();  // w.grad() is ready for the caller's current stream
  std::vector<float> g = w.grad().to_vector<float>();
  CHECK(g.size() == 7840);
}

// README: "Training in C++" (the test stops after 30 steps and saves to its temp folder).
TEST_CASE("a training loop", "[readme]") {
  const Device device("sim:0");
  auto train = nn::load_fashion_mnist("/usr/share/datasets/fashion-mnist", /*train=*/true);
  // throws IOError naming the file, the problem and how to install the data set

  using Layers = std::vector<std::shared_ptr<nn::Module>>;
  auto model = std::make_shared<nn::Sequential>(Layers{
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(784, 128),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(128, 10)});
  model->to(device);                                      // before the optimiser, as in PyTorch
  nn::Adam opt(model->parameters(), nn::AdamOptions(1e-3));
  nn::DataLoader loader(train, nn::DataLoaderOptions().batch_size(64).device(device));

  std::vector<float> losses;
  for (int64_t epoch = 0; epoch < 1; ++epoch) {
    loader.start_epoch(epoch);                            // a new seeded shuffle
    for (nn::Batch b; loader.next(&b);) {                 // copied ahead on a copy stream
      opt.zero_grad();
      Tensor loss = cross_entropy(model->forward(b.data), b.target);
      loss.backward();
      opt.step();
      losses.push_back(loss.item<float>());               // a host read: do it sparingly
      if (losses.size() == 30) break;                     // (test only)
    }
  }
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/mlp.safetensors";
  nn::save_checkpoint(path, *model, &opt);                // throws on failure, as torch::save
  nn::Metadata meta = nn::load_checkpoint(path, *model, &opt);   // all or nothing
  CHECK(meta.empty());
  CHECK(losses.back() < losses.front());
}

// README: "CUDA" (the cache exists, and obeys its controls, with or without a GPU)
TEST_CASE("the cuDNN plan cache controls", "[readme]") {
  PlanCache& cache = cudnn_conv_plan_cache(0);  // cuda:0's plans
  cache.set_max_size(64);                       // least recently used out first; 0: no caching
  size_t held = cache.size();
  cache.clear();
  set_cudnn_allow_tf32(true);                   // torch.backends.cudnn.allow_tf32; off here
  CHECK(held <= 64);
  CHECK(cache.size() == 0);
  CHECK(cache.max_size() == 64);
  CHECK(cudnn_allow_tf32());
  set_cudnn_allow_tf32(false);
  cache.set_max_size(PlanCache::kDefaultMaxSize);
}

// README: "Several devices in one process: DataParallel"
TEST_CASE("DataParallel as the README shows it", "[readme]") {
  auto model = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(4, 3)});
  const Tensor images = randn({6, 4});
  const Tensor labels = from_vector<int64_t>({0, 1, 2, 0, 1, 2});
  model->to(Device("sim:0"));
  auto dp = std::make_shared<nn::parallel::DataParallel>(
      model, std::vector<Device>{Device("sim:0"), Device("sim:1")});
  nn::SGD opt(dp->parameters(), nn::SGDOptions(0.1));  // the model's own parameters
  cross_entropy(dp->forward(images), to(labels, Device("sim:0"))).backward();
  CHECK(model->parameters()[0].grad().defined());
  opt.step();
}

// README: "Mixed precision"
TEST_CASE("mixed precision as the README shows it", "[readme]") {
  const Device device("sim:0");
  auto model = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(8, 16), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(16, 3)});
  model->to(device);                          // parameters stay float32
  nn::SGD opt(model->parameters(), nn::SGDOptions(0.1));
  nn::GradScaler scaler;                      // init scale 65536, growth 2 every 2000 steps
  const Tensor x = randn({4, 8}, TensorOptions().device(device));
  const Tensor y = to(from_vector<int64_t>({0, 1, 2, 0}), device);
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    Tensor loss;
    {
      AutocastGuard amp(DeviceType::kSim, DType::kFloat16);  // linear in float16,
      loss = cross_entropy(model->forward(x), y);            // the loss in float32
    }
    scaler.scale(loss).backward();            // float32 gradients of loss * scale
    scaler.step(opt);                         // unscaled; skipped if one is Inf or NaN
    scaler.update();
    CHECK(loss.dtype() == DType::kFloat32);
  }
  CHECK(model->parameters()[0].dtype() == DType::kFloat32);
  CHECK(model->parameters()[0].grad().dtype() == DType::kFloat32);
  CHECK(scaler.get_scale() == 65536.0);
}

}  // namespace
