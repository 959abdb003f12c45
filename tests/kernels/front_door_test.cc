// The kernels' front door (kernels/front.h, kernels/dispatch/registry.h): a kernel with no
// implementation for a device type fails with one DeviceError naming the kernel and the
// device; a 16-bit call of a kernel that computes in float32 is widened exactly once (two
// input copies, one rounding copy), and a kernel that takes 16-bit views natively is not
// widened at all.
#include <catch2/catch.hpp>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/dispatch/launch.h"
#include "kernels/dispatch/registry.h"
#include "kernels/kernels.h"
#include "runtime/base/half.h"
#include "tests/kernels/kernel_test_util.h"

namespace streamgrad {
namespace {

namespace d = kernels::dispatch;
using testing::Buffer;
using testing::Shape;

void test_only_on_cpu(const Stream& stream, const d::LaunchSpec& spec, int* calls) {
  d::enqueue(stream, spec, [calls] { ++*calls; });
}

// kTestOnly has a cpu implementation and nothing else.
void register_test_only() {
  static const bool once = [] {
    d::register_impl<d::KernelId::kTestOnly>(DeviceType::kCpu, &test_only_on_cpu);
    return true;
  }();
  (void)once;
}

// Every kernel launch's name, in order.
class LaunchNames : public LaunchObserver {
 public:
  LaunchNames() { add_launch_observer(this); }
  ~LaunchNames() override { remove_launch_observer(this); }
  void on_launch(const Stream&, const LaunchDesc& desc) override {
    if (desc.kind != LaunchKind::kKernel) return;
    std::lock_guard<std::mutex> lock(mu_);
    names_.push_back(desc.name);
  }
  std::vector<std::string> names() const {
    std::lock_guard<std::mutex> lock(mu_);
    return names_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> names_;
};

TEST_CASE("a kernel without an implementation for a device names the kernel and the device",
          "[front_door]") {
  register_test_only();
  int calls = 0;
  const Stream cpu = current_stream(Device("cpu"));
  const auto impl = d::resolve<d::KernelId::kTestOnly>("my_op", cpu);
  impl.fn(cpu, d::LaunchSpec("my_op", {}, {}), &calls);
  CHECK(calls == 1);
  CHECK(d::has_impl(d::KernelId::kTestOnly, DeviceType::kCpu));
  CHECK_FALSE(d::has_impl(d::KernelId::kTestOnly, DeviceType::kSim));

  for (const Stream& s : {current_stream(Device("sim:0")),
                          Stream::unchecked(Device(DeviceType::kCuda, 0), 0)}) {
    const std::string device = device_type_name(s.device().type());
    INFO(device);
    try {
      d::resolve<d::KernelId::kTestOnly>("my_op", s);
      FAIL("no DeviceError");
    } catch (const DeviceError& e) {
      const std::string what = e.what();
      INFO(what);
      CHECK(what.rfind("my_op: ", 0) == 0);                         // the caller's name
      CHECK(what.find("kernel test_only") != std::string::npos);    // the table's kernel
      CHECK(what.find(" for " + device + " ") != std::string::npos);  // the device
    }
  }
}

TEST_CASE("registering a kernel twice for one device is an internal error", "[front_door]") {
  register_test_only();
  CHECK_THROWS_AS(d::register_impl<d::KernelId::kTestOnly>(DeviceType::kCpu, &test_only_on_cpu),
                  InternalError);
}

TEST_CASE("a 16-bit call of a float32 kernel is widened exactly once", "[front_door]") {
  const Device dev = testing::test_device();
  const std::vector<Half> a = {Half::from_float(1.5f), Half::from_float(-2.0f),
                               Half::from_float(0.25f)};
  const std::vector<Half> b = {Half::from_float(2.0f), Half::from_float(0.5f),
                               Half::from_float(4.0f)};
  Buffer<Half> ba(dev, a), bb(dev, b), bo(dev, 3, Half::from_float(0));
  const Stream s = current_stream(dev);
  {
    LaunchNames log;
    kernels::cumsum(s, bo.view(), ba.view(), 0, false);
    // A float32 copy in, the float32 running sum, one rounding copy out.
    CHECK(log.names() == std::vector<std::string>{"copy", "cumsum", "copy"});
  }
  std::vector<Half> got = bo.read();
  CHECK(got[0].to_float() == 1.5f);
  CHECK(got[1].to_float() == -0.5f);
  CHECK(got[2].to_float() == -0.25f);
  {
    LaunchNames log;  // the element-wise kernels take 16-bit operands themselves
    kernels::binary(s, kernels::Binary::kMul, bo.view(), ba.view(), bb.view());
    CHECK(log.names() == std::vector<std::string>{"mul"});
  }
  got = bo.read();
  CHECK(got[0].to_float() == 3.0f);
  CHECK(got[1].to_float() == -1.0f);
  CHECK(got[2].to_float() == 1.0f);
  {
    LaunchNames log;  // copy takes 16-bit views as they are: one launch, no scratch
    kernels::copy(s, bo.view(), ba.view());
    CHECK(log.names() == std::vector<std::string>{"copy"});
  }
  CHECK(bo.read()[1].to_float() == -2.0f);
}

}  // namespace
}  // namespace streamgrad
