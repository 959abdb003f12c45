// Issue 14, must-show 4: device memory of tools/train's CNN training step (batch 64) on
// sim:0 with and without autocast. For each of off, bf16 and fp16 it prints, after a few
// warm-up steps: the bytes live after the forward (what backward keeps: saved
// activations, parameters, optimiser state, the batch), and the peak over one whole
// step (forward, backward, optimiser), both from the caching allocator's allocated-bytes
// statistics (rounded block sizes).
//
//   bazel run -c opt //bench:amp_memory [-- --device=sim:0 --batch=64]
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "streamgrad.h"
#include "nn/train_step.h"
#include "tools/train_models.h"

ABSL_FLAG(std::string, device, "sim:0", "device to measure");
ABSL_FLAG(int64_t, batch, 64, "examples per step");

namespace streamgrad {
namespace {

struct Figures {
  int64_t after_forward = 0, peak = 0;
};

Figures measure(const std::string& amp_name, Device device, int64_t batch) {
  manual_seed(0);
  std::shared_ptr<nn::Module> model = make_model("cnn");
  model->to(device);
  nn::Adam opt(model->parameters(), nn::AdamOptions(1e-3));
  nn::AmpConfig amp = nn::amp_config(amp_name, device);
  nn::GradScaler scaler;
  if (amp_name == "fp16") amp.scaler = &scaler;
  nn::Batch b;
  b.data = rand({batch, 1, 28, 28}, TensorOptions().device(device));
  b.target = from_vector<int64_t>(std::vector<int64_t>(batch, 3), {batch},
                                  TensorOptions().dtype(DType::kInt64).device(device));
  for (int i = 0; i < 3; ++i) nn::train_step(*model, opt, b, amp);  // optimiser state exists
  synchronize(device);
  opt.zero_grad();
  reset_peak_stats(device);
  Figures f;
  const Tensor loss = nn::amp_loss(*model, b, amp);
  synchronize(device);
  f.after_forward = memory_stats(device).allocated_bytes.current;
  nn::backward_and_step(loss, opt, amp);
  synchronize(device);
  f.peak = memory_stats(device).allocated_bytes.peak;
  return f;
}

int run() {
  const Device device(absl::GetFlag(FLAGS_device));
  const int64_t batch = absl::GetFlag(FLAGS_batch);
  std::printf("cnn training step, batch %lld, on %s (allocated bytes, MiB)\n",
              static_cast<long long>(batch), device.str().c_str());
  std::printf("%-5s %14s %10s\n", "amp", "after forward", "step peak");
  Figures base;
  for (const char* amp : {"off", "bf16", "fp16"}) {
    if (std::string(amp) == "fp16" && device.is_cpu()) continue;  // fp16 is for sim and cuda
    const Figures f = measure(amp, device, batch);
    if (std::string(amp) == "off") base = f;
    std::printf("%-5s %14.2f %10.2f  (%.2fx, %.2fx of off)\n", amp, f.after_forward / 1048576.0,
                f.peak / 1048576.0, static_cast<double>(f.after_forward) / base.after_forward,
                static_cast<double>(f.peak) / base.peak);
  }
  return 0;
}

}  // namespace
}  // namespace streamgrad

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return streamgrad::run();
}
