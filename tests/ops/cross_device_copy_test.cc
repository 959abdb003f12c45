// copy_ between devices: one copy ordered against both devices' current streams (S7), so
// that a read on the destination's current stream sees the whole result; dtype
// conversion, strided destinations, broadcast sources; the backward sends the gradient
// back to the source's device in the source's dtype.
//
// Reference behaviour: PyTorch's Tensor.copy_ accepts a source on another device and of
// another dtype and is differentiable w.r.t. the source, whose gradient lands on the
// source's device (test_autograd.py, "test_copy_" and the cross-device copy tests in
// test_cuda.py).
#include <mutex>
#include <optional>

#include "runtime/observe/stream_sanitizer.h"
#include "runtime/sim/sim.h"
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

const Device kSrc("sim:0");
const Device kDst("sim:1");

SimSchedulerOptions adversarial(uint64_t seed) {
  return {SimSchedulerKind::kDeterministic, SimPolicy::kAdversarial, seed, 0};
}

// Every launch that writes into [begin, end): its stream.
class WriteRecorder final : public LaunchObserver {
 public:
  WriteRecorder(const void* begin, size_t bytes)
      : begin_(static_cast<const char*>(begin)), end_(begin_ + bytes) {
    add_launch_observer(this);
  }
  ~WriteRecorder() override { remove_launch_observer(this); }
  void on_launch(const Stream& stream, const LaunchDesc& desc) override {
    for (const MemRange& w : desc.writes) {
      const char* p = static_cast<const char*>(w.ptr);
      if (w.bytes > 0 && p < end_ && begin_ < p + w.bytes) {
        std::lock_guard<std::mutex> lk(mu_);
        streams_.push_back(stream);
      }
    }
  }
  std::vector<Stream> streams() {
    std::lock_guard<std::mutex> lk(mu_);
    return streams_;
  }

 private:
  const char* begin_;
  const char* end_;
  std::mutex mu_;
  std::vector<Stream> streams_;
};

TEST_CASE("a cross-device copy_ is one copy into the destination, with no staging buffer",
          "[ops][copy_][S7]") {
  const Tensor src = random_input({4, 8}, kSrc, 1).detach();
  Tensor dst = zeros({4, 8}, f64(kDst));
  const int64_t allocs_before = memory_stats(kDst).num_allocs;
  {
    WriteRecorder writes(dst.data_ptr(), 32 * sizeof(double));
    copy_(dst, src);
    // runtime/memory/copy.h: a device-to-device copy runs on the source's current stream.
    REQUIRE(writes.streams().size() == 1);
    CHECK(writes.streams()[0] == current_stream(kSrc));
  }
  CHECK(memory_stats(kDst).num_allocs == allocs_before);
  check_values(dst, values(src));
}

TEST_CASE("a cross-device copy_ into a contiguous slice writes only that slice",
          "[ops][copy_]") {
  const Tensor src = input({1, 2, 3}, {3}, kSrc, false);
  Tensor base = full({3, 3}, 9, f64(kDst));
  Tensor row = narrow(base, 0, 1, 1);  // contiguous, at an offset into base's storage
  const Tensor dst = squeeze(row, 0);
  Tensor d = dst;
  copy_(d, src);
  check_values(base, {9, 9, 9, 1, 2, 3, 9, 9, 9});
}

// Runs `body` under the adversarial deterministic scheduler for many seeds with a
// collecting sanitizer, and asks for no finding: a missing wait shows as a wrong value
// (the body checks values) or as a finding.
template <typename F>
void for_adversarial_seeds(F body) {
  for (uint64_t seed = 0; seed < 24; ++seed) {
    INFO("adversarial seed " << seed);
    SimSchedulerScope scope(adversarial(seed));
    StreamSanitizer san(StreamSanitizer::Mode::kCollect);
    body(seed);
    for (const SanitizerFinding& f : san.findings()) INFO(f.message);
    CHECK(san.findings().empty());
  }
}

// dst lives on sim:1 and is used on a side stream there (the current one); it was just
// written on that stream, so the copy must wait for that write and the read after it
// for the copy.
TEST_CASE("cross-device copy_ is ordered against the destination's current stream",
          "[ops][copy_][streams]") {
  const DType src_dtype = GENERATE(DType::kFloat64, DType::kFloat32);
  const bool strided = GENERATE(false, true);
  INFO("src " << dtype_name(src_dtype) << (strided ? ", strided destination" : ""));
  for_adversarial_seeds([&](uint64_t seed) {
    const std::vector<double> v = random_values(24, seed);
    const Tensor src = to(input(v, {4, 6}, kSrc, false), src_dtype);
    const std::vector<double> want = values(to(src, DType::kFloat64));
    const Stream side = Stream::create(kDst);
    StreamGuard on_side(side);
    Tensor base = full(strided ? Shape{6, 4} : Shape{4, 6}, 7, f64(kDst));
    Tensor dst = strided ? transpose(base, 0, 1) : base;
    mul_(dst, 3.0);  // the write the copy must come after
    copy_(dst, src);
    const Tensor read = contiguous(mul(dst, 1.0));  // a kernel on sim:1's current stream
    check_values(read, want);
  });
}

TEST_CASE("cross-device copy_ broadcasts and converts, between cpu and sim too",
          "[ops][copy_]") {
  for_adversarial_seeds([&](uint64_t seed) {
    const std::vector<double> row = random_values(3, seed);
    for (const char* from : {"sim:0", "cpu"}) {
      for (const char* into : {"sim:1", "cpu"}) {
        if (std::string(from) == into) continue;
        INFO(from << " -> " << into);
        const Tensor src = input(row, {3}, Device(from), false);
        const Stream side = Stream::create(Device(into));
        StreamGuard on_side(side);
        Tensor dst = zeros({2, 3}, TensorOptions().dtype(DType::kFloat32).device(into));
        copy_(dst, src);
        const std::vector<float> got = mul(dst, 1.0).to_vector<float>();
        for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == static_cast<float>(row[i % 3]));
      }
    }
  });
}

TEST_CASE("the backward of a cross-device copy_ goes back to the source's device and dtype",
          "[ops][copy_][grad][S7]") {
  for_adversarial_seeds([&](uint64_t seed) {
    const Tensor src = input(random_values(3, seed), {3}, kSrc);
    const Stream side = Stream::create(kDst);
    StreamGuard on_side(side);
    Tensor dst = zeros({2, 3}, f64(kDst));
    copy_(dst, to(src, DType::kFloat32));  // broadcast over rows, converted twice
    const Tensor w = input({1, 2, 3, 4, 5, 6}, {2, 3}, kDst, false);
    const TensorList g = grad({sum(mul(dst, w))}, {src});
    REQUIRE(g[0].device() == kSrc);
    REQUIRE(g[0].dtype() == DType::kFloat64);
    check_values(g[0], {5, 7, 9});
  });
  const Tensor x = random_input({2, 3}, kSrc, 7);
  const auto f = [](const TensorList& in) {
    Tensor dst = zeros({2, 3}, f64(kDst));
    Tensor y = mul(dst, 1.0);  // a non-leaf, so that copy_ may record history
    copy_(y, in[0]);
    return to(mul(y, y), kSrc);
  };
  check_gradients(f, {x});
  check_second_order(f, {x});
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad
