// A program for tests/kernels:loops_tsan_test (ThreadSanitizer builds only): races one
// operand of one entry of the level tables (kernels/host/loops.h), or of an operator that
// reaches an uninstrumented library, against a plain write,
// so that the test can see TSan report it although the tsan build compiles the loops
// without TSan's instrumentation (announced_loops.cc announces their memory instead).
//
//   loops_tsan_race --list            one line per case: NAME OPERANDS
//   loops_tsan_race NAME K            thread A writes a byte of operand K while thread B
//                                     calls the entry: TSan must report a data race
//   loops_tsan_race NAME K joined     A is joined before B starts: nothing to report
//
// A case's operands are every pointer its entry's comment in loops.h says it reads or
// writes; for the operator cases (gemm and oneDNN, which TSan does not instrument either),
// the inputs. "unary_strided" reads every second element: operand 1 is the element it reads
// second, operand 2 the one it skips (a race there would be a false report: the test
// expects none). Exit status: TSan's 66 on a report (halt_on_error), 0 otherwise, 2 for
// bad arguments.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "kernels/functors/optim_ops.h"
#include "kernels/host/loops.h"
#include "runtime/backend/cpu_settings.h"
#include "streamgrad.h"

namespace {

namespace k = streamgrad::kernels;
namespace cpu = streamgrad::kernels::cpu;
using streamgrad::CpuCapability;
using streamgrad::DType;
using streamgrad::ones;
using streamgrad::Tensor;

constexpr int64_t kN = 32;

struct Case {
  std::string name;
  std::vector<void*> operands;
  std::function<void()> call;
};

// Buffers that live as long as the cases: 4 KiB each, zeroed (a float 0 is a fine input
// to every entry).
void* buffer() {
  static std::vector<std::vector<double>> all;
  all.emplace_back(512, 0.0);
  return all.back().data();
}

cpu::Layout<1> row1(const int64_t* stride) {
  const int64_t sizes[] = {kN};
  return cpu::make_layout<1>(sizes, {stride});
}
cpu::Layout<2> row2(const int64_t* s0, const int64_t* s1) {
  const int64_t sizes[] = {kN};
  return cpu::make_layout<2>(sizes, {s0, s1});
}
cpu::Layout<3> row3(const int64_t* s0, const int64_t* s1, const int64_t* s2) {
  const int64_t sizes[] = {kN};
  return cpu::make_layout<3>(sizes, {s0, s1, s2});
}

std::vector<Case> cases() {
  static const int64_t one = 1, two = 2, zero = 0;
  const DType f = DType::kFloat32;
  std::vector<Case> c;
  auto add = [&c](std::string name, std::vector<void*> ops, std::function<void()> call) {
    c.push_back({std::move(name), std::move(ops), std::move(call)});
  };
  {
    void *o = buffer(), *x = buffer();
    add("unary", {o, x},
        [=] { cpu::loops().unary(k::Unary::kExp, f, row2(&one, &one), o, x, 0, kN); });
  }
  {
    // Reads x[0], x[2], ...: operand 1 is x[2], operand 2 is x[1], which it never reads.
    void *o = buffer(), *x = buffer();
    float* xf = static_cast<float*>(x);
    add("unary_strided", {o, xf + 2, xf + 1},
        [=] { cpu::loops().unary(k::Unary::kNeg, f, row2(&one, &two), o, x, 0, kN); });
  }
  {
    void *o = buffer(), *x = buffer();
    add("unary_scalar", {o, x}, [=] {
      cpu::loops().unary_scalar(k::UnaryScalar::kMul, f, row2(&one, &one), o, x, 2.0, 0, kN);
    });
  }
  {
    // b broadcast along the row (step 0): its one element.
    void *o = buffer(), *a = buffer(), *b = buffer();
    add("binary", {o, a, b}, [=] {
      cpu::loops().binary(k::Binary::kAdd, f, row3(&one, &one, &zero), o, a, b, 0, kN);
    });
  }
  {
    void *o = buffer(), *a = buffer(), *b = buffer();
    add("axpy", {o, a, b},
        [=] { cpu::loops().axpy(f, row3(&one, &one, &one), o, a, b, 0.5, 0, kN); });
  }
  {
    void* o = buffer();
    add("fill", {o}, [=] { cpu::loops().fill(DType::kInt64, row1(&one), o, 3.0, 0, kN); });
  }
  {
    void *o = buffer(), *x = buffer();
    add("copy", {o, x},
        [=] { cpu::loops().copy(DType::kFloat64, f, row2(&one, &one), o, x, 0, kN); });
  }
  {
    void* x = buffer();
    add("sum_block", {x}, [=] { (void)cpu::loops().sum_block(f, x, kN); });
  }
  {
    void *x = buffer(), *acc = buffer();
    add("extreme", {x, acc}, [=] { cpu::loops().extreme(true, f, x, kN, acc); });
  }
  {
    void *acc = buffer(), *row = buffer();
    add("columns", {acc, row},
        [=] { cpu::loops().columns(k::Reduce::kSum, f, acc, row, kN); });
  }
  {
    void *top = buffer(), *bottom = buffer(), *values = buffer(), *indices = buffer();
    add("max_pool_2x2", {top, bottom, values, indices}, [=] {
      cpu::nn_loops().max_pool_2x2(f, top, bottom, kN / 2, values,
                                   static_cast<int64_t*>(indices), 0, kN);
    });
  }
  {
    void* x = buffer();
    add("centred_squares", {x}, [=] { (void)cpu::nn_loops().centred_squares(f, x, kN, 0.5); });
  }
  {
    void *g = buffer(), *x = buffer(), *sg = buffer(), *sgc = buffer();
    add("grad_sums", {g, x, sg, sgc}, [=] {
      cpu::nn_loops().grad_sums(f, g, x, kN, 0.5, static_cast<double*>(sg),
                                static_cast<double*>(sgc));
    });
  }
  {
    void *o = buffer(), *x = buffer(), *cf = buffer();
    add("batch_norm_apply", {o, x, cf}, [=] {
      cpu::nn_loops().batch_norm_apply(f, o, x, kN, static_cast<const double*>(cf));
    });
  }
  {
    void *o = buffer(), *g = buffer(), *x = buffer(), *cf = buffer();
    add("batch_norm_input_grad", {o, g, x, cf}, [=] {
      cpu::nn_loops().batch_norm_input_grad(f, o, g, x, kN, static_cast<const double*>(cf));
    });
  }
  {
    void *o = buffer(), *x = buffer(), *w = buffer(), *b = buffer();
    add("layer_norm_apply", {o, x, w, b},
        [=] { cpu::nn_loops().layer_norm_apply(f, o, x, w, b, kN, 0.0, 1.0); });
  }
  {
    void *o = buffer(), *gw = buffer(), *x = buffer(), *cf = buffer();
    add("layer_norm_input_grad", {o, gw, x, cf}, [=] {
      cpu::nn_loops().layer_norm_input_grad(f, o, gw, x, kN, static_cast<const double*>(cf));
    });
  }
  {
    void *aw = buffer(), *ab = buffer(), *g = buffer(), *x = buffer(), *mean = buffer(),
         *rstd = buffer();
    add("layer_norm_param_block", {aw, ab, g, x, mean, rstd}, [=] {
      cpu::nn_loops().layer_norm_param_block(f, static_cast<double*>(aw),
                                             static_cast<double*>(ab), g, x, mean, rstd, 2,
                                             kN / 2);
    });
  }
  {
    void *gw = buffer(), *g = buffer(), *w = buffer(), *x = buffer(), *s = buffer(),
         *sc = buffer();
    add("scaled_grad_sums", {gw, g, w, x, s, sc}, [=] {
      cpu::nn_loops().scaled_grad_sums(f, gw, g, w, x, kN, 0.0, static_cast<double*>(s),
                                       static_cast<double*>(sc));
    });
  }
  {
    void *op = buffer(), *p = buffer(), *g = buffer(), *m = buffer(), *v = buffer();
    *static_cast<k::AdamUpdate<float>*>(op) = k::AdamUpdate<float>{0.9f, 0.1f, 0.999f, 0.001f,
                                                                   1e-8f, 0.f, 1.f, false,
                                                                   false};
    add("adam_row", {op, p, g, m, v},
        [=] { cpu::nn_loops().adam_row(f, op, p, g, m, v, kN, 1.0, -0.001); });
  }
  // The libraries TSan does not instrument, through the operators: gemm (OpenBLAS, or
  // oneDNN's sgemm) and oneDNN's convolutions, whose callers announce what they read.
  {
    const Tensor a = ones({8, 16}), b = ones({16, 24});
    add("matmul", {a.data_ptr(), b.data_ptr()}, [=] { (void)streamgrad::matmul(a, b); });
  }
  {
    const Tensor x = ones({2, 3, 6, 6}), w = ones({4, 3, 3, 3}), g = ones({2, 4, 4, 4});
    add("conv2d", {x.data_ptr(), w.data_ptr()}, [=] { (void)streamgrad::conv2d(x, w); });
    add("conv2d_input_grad", {w.data_ptr(), g.data_ptr()},
        [=] { (void)streamgrad::conv2d_input_grad({2, 3, 6, 6}, w, g); });
    add("conv2d_weight_grad", {x.data_ptr(), g.data_ptr()},
        [=] { (void)streamgrad::conv2d_weight_grad(x, {4, 3, 3, 3}, g); });
  }
  // Every level the machine has hands out announced tables (loops_for), not only the
  // level in use.
  const CpuCapability levels[] = {CpuCapability::kDefault, CpuCapability::kAvx2,
                                  CpuCapability::kAvx512};
  for (CpuCapability level : levels) {
    if (static_cast<int>(level) > static_cast<int>(streamgrad::cpu_capability())) continue;
    void *o = buffer(), *x = buffer();
    add(std::string("unary@") + streamgrad::cpu_capability_name(level), {o, x}, [=] {
      cpu::loops_for(level).unary(k::Unary::kNeg, f, row2(&one, &one), o, x, 0, kN);
    });
  }
  return c;
}

// Thread A's write: one byte, through a volatile pointer so that it is made, and
// instrumented (this file is).
void plain_write(void* p) { *static_cast<volatile char*>(p) = 1; }

}  // namespace

int main(int argc, char** argv) {
  const std::vector<Case> all = cases();
  if (argc == 2 && std::strcmp(argv[1], "--list") == 0) {
    for (const Case& c : all) std::printf("%s %zu\n", c.name.c_str(), c.operands.size());
    return 0;
  }
  if (argc < 3 || argc > 4 || (argc == 4 && std::strcmp(argv[3], "joined") != 0)) {
    std::fprintf(stderr, "usage: loops_tsan_race --list | NAME K [joined]\n");
    return 2;
  }
  const std::string name = argv[1];
  const size_t k = std::strtoul(argv[2], nullptr, 10);
  for (const Case& c : all) {
    if (c.name != name) continue;
    if (k >= c.operands.size()) break;
    void* target = c.operands[k];
    if (argc == 4) {
      std::thread a(plain_write, target);
      a.join();
      std::thread b(c.call);
      b.join();
    } else {
      // Neither thread ends before both have made their access: a thread that had ended
      // could hand its ThreadSanitizer slot to the next one, whose access then looks like
      // the same thread's, unordered as the two are (1 run in 40 went unreported so).
      // Each waits on the other only after its own access, so nothing orders the two.
      std::atomic<int> done{0};
      const auto then_wait = [&done] {
        done.fetch_add(1, std::memory_order_acq_rel);
        while (done.load(std::memory_order_acquire) < 2) std::this_thread::yield();
      };
      std::thread a([&] {
        plain_write(target);
        then_wait();
      });
      std::thread b([&] {
        c.call();
        then_wait();
      });
      a.join();
      b.join();
    }
    std::printf("loops_tsan_race: %s operand %zu: no race reported\n", name.c_str(), k);
    return 0;
  }
  std::fprintf(stderr, "loops_tsan_race: no case '%s' with operand %s (see --list)\n",
               name.c_str(), argv[2]);
  return 2;
}
