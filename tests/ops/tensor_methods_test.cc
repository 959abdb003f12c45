// The operator methods of Tensor (engine/tensor.h, defined in ops/tensor_methods.cc): each
// gives the same result as its free function of ops/ops.h called with the same arguments
// in libtorch's order: values, shape, dtype, device, strides (a view stays a view of the
// same memory), history (grad_fn) and gradients, on cpu and sim:0.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

using F = std::function<Tensor(const TensorList&)>;

// Any dtype's values, as doubles (bool and int64 outputs of comparisons and argmax).
std::vector<double> any_values(const Tensor& t) {
  switch (t.dtype()) {
    case DType::kBool: {
      std::vector<double> out;
      for (bool b : t.to_vector<bool>()) out.push_back(b ? 1 : 0);
      return out;
    }
    case DType::kInt64: {
      std::vector<double> out;
      for (int64_t i : t.to_vector<int64_t>()) out.push_back(static_cast<double>(i));
      return out;
    }
    default:
      return to(t, DType::kFloat64).to_vector<double>();
  }
}

std::string grad_fn_name(const Tensor& t) { return t.grad_fn() ? t.grad_fn()->name() : "none"; }

bool aliases(const Tensor& t, const TensorList& in) {
  for (const Tensor& x : in) {
    if (t.storage().id() == x.storage().id()) return true;
  }
  return false;
}

// m (from the method) and f (from the free function) are the same result.
void check_same(const Tensor& m, const Tensor& f, const TensorList& in) {
  REQUIRE(m.defined());
  REQUIRE(f.defined());
  CHECK(m.describe() == f.describe());
  CHECK(m.strides() == f.strides());
  CHECK(m.storage_offset() == f.storage_offset());
  CHECK(aliases(m, in) == aliases(f, in));
  CHECK(any_values(m) == any_values(f));  // the same kernels: bitwise equal
  CHECK(grad_fn_name(m) == grad_fn_name(f));
  CHECK(m.requires_grad() == f.requires_grad());
}

// The gradients of sum(m * w) and sum(f * w) with respect to every input.
void check_same_gradients(const Tensor& m, const Tensor& f, const TensorList& in) {
  if (!m.requires_grad() || !f.requires_grad()) return;
  const Tensor w = to(weight_for(m, 7), m.dtype());
  const TensorList gm = grad({m}, in, {w}, false, false, /*allow_unused=*/true);
  const TensorList gf = grad({f}, in, {w}, false, false, /*allow_unused=*/true);
  REQUIRE(gm.size() == gf.size());
  bool any = false;
  for (size_t i = 0; i < gm.size(); ++i) {
    INFO("gradient of input " << i);
    REQUIRE(gm[i].defined() == gf[i].defined());
    if (!gm[i].defined()) continue;
    any = true;
    CHECK(gm[i].describe() == gf[i].describe());
    CHECK(any_values(gm[i]) == any_values(gf[i]));
  }
  CHECK(any);
}

struct Case {
  std::string name;
  F method;
  F free;
  TensorList inputs;
};

void run(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    INFO(c.name);
    const Tensor m = c.method(c.inputs);
    const Tensor f = c.free(c.inputs);
    check_same(m, f, c.inputs);
    check_same_gradients(m, f, c.inputs);
  }
}

TEST_CASE("element-wise and arithmetic methods match their free functions",
          "[ops][methods]") {
  const Device d = test_device();
  const Tensor x = random_input({2, 3}, d, 1, -2, 2, /*gap=*/0.05);
  const Tensor y = random_input({2, 3}, d, 2, -2, 2, 0.05);
  const Tensor pos = random_input({2, 3}, d, 3, 0.5, 3);
  const Tensor row = random_input({3}, d, 4, 0.5, 3);
  const Tensor w = random_input({3, 4}, d, 5);
  run({
      {"neg", [](auto& in) { return in[0].neg(); }, [](auto& in) { return neg(in[0]); }, {x}},
      {"exp", [](auto& in) { return in[0].exp(); }, [](auto& in) { return exp(in[0]); }, {x}},
      {"log", [](auto& in) { return in[0].log(); }, [](auto& in) { return log(in[0]); }, {pos}},
      {"sqrt", [](auto& in) { return in[0].sqrt(); }, [](auto& in) { return sqrt(in[0]); },
       {pos}},
      {"tanh", [](auto& in) { return in[0].tanh(); }, [](auto& in) { return tanh(in[0]); }, {x}},
      {"sigmoid", [](auto& in) { return in[0].sigmoid(); },
       [](auto& in) { return sigmoid(in[0]); }, {x}},
      {"relu", [](auto& in) { return in[0].relu(); }, [](auto& in) { return relu(in[0]); }, {x}},
      {"abs", [](auto& in) { return in[0].abs(); }, [](auto& in) { return abs(in[0]); }, {x}},
      {"pow", [](auto& in) { return in[0].pow(2.5); }, [](auto& in) { return pow(in[0], 2.5); },
       {pos}},
      {"add", [](auto& in) { return in[0].add(in[1]); },
       [](auto& in) { return add(in[0], in[1]); }, {x, y}},
      {"add alpha", [](auto& in) { return in[0].add(in[1], 2.5); },
       [](auto& in) { return add(in[0], in[1], 2.5); }, {x, row}},
      {"add scalar", [](auto& in) { return in[0].add(1.5); },
       [](auto& in) { return add(in[0], 1.5); }, {x}},
      {"sub alpha", [](auto& in) { return in[0].sub(in[1], 0.5); },
       [](auto& in) { return sub(in[0], in[1], 0.5); }, {x, y}},
      {"sub scalar", [](auto& in) { return in[0].sub(1.5); },
       [](auto& in) { return sub(in[0], 1.5); }, {x}},
      {"mul", [](auto& in) { return in[0].mul(in[1]); },
       [](auto& in) { return mul(in[0], in[1]); }, {x, row}},
      {"mul scalar", [](auto& in) { return in[0].mul(2.5); },
       [](auto& in) { return mul(in[0], 2.5); }, {x}},
      {"div", [](auto& in) { return in[0].div(in[1]); },
       [](auto& in) { return div(in[0], in[1]); }, {x, pos}},
      {"div scalar", [](auto& in) { return in[0].div(2.5); },
       [](auto& in) { return div(in[0], 2.5); }, {x}},
      {"matmul", [](auto& in) { return in[0].matmul(in[1]); },
       [](auto& in) { return matmul(in[0], in[1]); }, {x, w}},
  });
}

TEST_CASE("comparison and selection methods match their free functions", "[ops][methods]") {
  const Device d = test_device();
  const Tensor a = input({1, 2, 3, 4, 5, 6}, {2, 3}, d);
  const Tensor b = input({1, 0, 3, 5, 5, 0}, {2, 3}, d);
  const Tensor cond = gt(b, 0.5);
  const Tensor mask = from_vector<bool>({true, false, false}, {3}, TensorOptions()
                                                                       .dtype(DType::kBool)
                                                                       .device(d));
  const Tensor value = input({-7}, {}, d);
  const TensorOptions i64 = TensorOptions().dtype(DType::kInt64).device(d);
  const Tensor idx = from_vector<int64_t>({2, 0, 1, 1}, {2, 2}, i64);
  const Tensor rows = from_vector<int64_t>({1, 0, 1}, {3}, i64);
  const Tensor src = random_input({2, 2}, d, 6);
  run({
      {"eq", [](auto& in) { return in[0].eq(in[1]); }, [](auto& in) { return eq(in[0], in[1]); },
       {a, b}},
      {"eq scalar", [](auto& in) { return in[0].eq(3); }, [](auto& in) { return eq(in[0], 3); },
       {a}},
      {"ne", [](auto& in) { return in[0].ne(in[1]); }, [](auto& in) { return ne(in[0], in[1]); },
       {a, b}},
      {"ne scalar", [](auto& in) { return in[0].ne(3); }, [](auto& in) { return ne(in[0], 3); },
       {a}},
      {"lt", [](auto& in) { return in[0].lt(in[1]); }, [](auto& in) { return lt(in[0], in[1]); },
       {a, b}},
      {"lt scalar", [](auto& in) { return in[0].lt(3); }, [](auto& in) { return lt(in[0], 3); },
       {a}},
      {"le", [](auto& in) { return in[0].le(in[1]); }, [](auto& in) { return le(in[0], in[1]); },
       {a, b}},
      {"le scalar", [](auto& in) { return in[0].le(3); }, [](auto& in) { return le(in[0], 3); },
       {a}},
      {"gt", [](auto& in) { return in[0].gt(in[1]); }, [](auto& in) { return gt(in[0], in[1]); },
       {a, b}},
      {"gt scalar", [](auto& in) { return in[0].gt(3); }, [](auto& in) { return gt(in[0], 3); },
       {a}},
      {"ge", [](auto& in) { return in[0].ge(in[1]); }, [](auto& in) { return ge(in[0], in[1]); },
       {a, b}},
      {"ge scalar", [](auto& in) { return in[0].ge(3); }, [](auto& in) { return ge(in[0], 3); },
       {a}},
      {"where", [cond](auto& in) { return in[0].where(cond, in[1]); },
       [cond](auto& in) { return where(cond, in[0], in[1]); }, {a, b}},
      {"masked_fill", [mask](auto& in) { return in[0].masked_fill(mask, 2.5); },
       [mask](auto& in) { return masked_fill(in[0], mask, 2.5); }, {a}},
      {"masked_fill tensor", [mask](auto& in) { return in[0].masked_fill(mask, in[1]); },
       [mask](auto& in) { return masked_fill(in[0], mask, in[1]); }, {a, value}},
      {"gather", [idx](auto& in) { return in[0].gather(1, idx); },
       [idx](auto& in) { return gather(in[0], 1, idx); }, {a}},
      {"scatter_add", [idx](auto& in) { return in[0].scatter_add(1, idx, in[1]); },
       [idx](auto& in) { return scatter_add(in[0], 1, idx, in[1]); }, {a, src}},
      {"index_select", [rows](auto& in) { return in[0].index_select(0, rows); },
       [rows](auto& in) { return index_select(in[0], 0, rows); }, {a}},
  });
}

TEST_CASE("reduction methods match their free functions", "[ops][methods]") {
  const Device d = test_device();
  const Tensor x = random_input({2, 3, 4}, d, 7, -2, 2, 0.01);
  run({
      {"sum", [](auto& in) { return in[0].sum(); }, [](auto& in) { return sum(in[0]); }, {x}},
      {"sum dims keepdim", [](auto& in) { return in[0].sum({0, 2}, true); },
       [](auto& in) { return sum(in[0], {0, 2}, true); }, {x}},
      // One integer is one dim, as libtorch's IntArrayRef; {} is every dim, not dim 0.
      {"sum one dim", [](auto& in) { return in[0].sum(1); },
       [](auto& in) { return sum(in[0], {1}); }, {x}},
      {"sum {}", [](auto& in) { return in[0].sum({}); }, [](auto& in) { return sum(in[0], {}); },
       {x}},
      {"sum -1 keepdim", [](auto& in) { return in[0].sum(-1, true); },
       [](auto& in) { return sum(in[0], {-1}, true); }, {x}},
      {"mean", [](auto& in) { return in[0].mean(); }, [](auto& in) { return mean(in[0]); }, {x}},
      {"mean one dim", [](auto& in) { return in[0].mean(1); },
       [](auto& in) { return mean(in[0], {1}); }, {x}},
      {"mean dims keepdim", [](auto& in) { return in[0].mean({1, 2}, true); },
       [](auto& in) { return mean(in[0], {1, 2}, true); }, {x}},
      {"max values", [](auto& in) { return in[0].max(1).first; },
       [](auto& in) { return max(in[0], 1).first; }, {x}},
      {"max indices keepdim", [](auto& in) { return in[0].max(2, true).second; },
       [](auto& in) { return max(in[0], 2, true).second; }, {x}},
      {"min values keepdim", [](auto& in) { return in[0].min(0, true).first; },
       [](auto& in) { return min(in[0], 0, true).first; }, {x}},
      {"min indices", [](auto& in) { return in[0].min(1).second; },
       [](auto& in) { return min(in[0], 1).second; }, {x}},
      {"argmax", [](auto& in) { return in[0].argmax(2); },
       [](auto& in) { return argmax(in[0], 2); }, {x}},
      {"argmax keepdim", [](auto& in) { return in[0].argmax(1, true); },
       [](auto& in) { return argmax(in[0], 1, true); }, {x}},
      {"softmax", [](auto& in) { return in[0].softmax(1); },
       [](auto& in) { return softmax(in[0], 1); }, {x}},
      {"log_softmax", [](auto& in) { return in[0].log_softmax(-1); },
       [](auto& in) { return log_softmax(in[0], -1); }, {x}},
  });
  // Structured bindings take the pair as they take libtorch's tuple.
  auto [values, indices] = x.max(1);
  CHECK(values.sizes() == Shape{2, 4});
  CHECK(indices.dtype() == DType::kInt64);
}

TEST_CASE("view and shape methods match their free functions", "[ops][methods]") {
  const Device d = test_device();
  const Tensor x = random_input({2, 3}, d, 8);
  const Tensor x3 = random_input({2, 3, 4}, d, 9);
  const Tensor v = random_input({4}, d, 10);
  const Tensor ones_dim = random_input({2, 1, 3}, d, 11);
  run({
      {"view", [](auto& in) { return in[0].view({3, -1}); },
       [](auto& in) { return view(in[0], {3, -1}); }, {x}},
      {"view -1", [](auto& in) { return in[0].view(-1); },
       [](auto& in) { return view(in[0], {-1}); }, {x}},
      {"reshape", [](auto& in) { return in[0].reshape({6}); },
       [](auto& in) { return reshape(in[0], {6}); }, {x}},
      {"reshape -1 of a transpose (a copy)", [](auto& in) { return in[0].t().reshape(-1); },
       [](auto& in) { return reshape(transpose(in[0], 0, 1), {-1}); }, {x}},
      {"t", [](auto& in) { return in[0].t(); }, [](auto& in) { return transpose(in[0], 0, 1); },
       {x}},
      {"t of 1-D", [](auto& in) { return in[0].t(); },
       [](auto& in) { return transpose(in[0], 0, 0); }, {v}},
      {"transpose", [](auto& in) { return in[0].transpose(-1, 0); },
       [](auto& in) { return transpose(in[0], -1, 0); }, {x3}},
      {"permute", [](auto& in) { return in[0].permute({2, 0, 1}); },
       [](auto& in) { return permute(in[0], {2, 0, 1}); }, {x3}},
      {"unsqueeze", [](auto& in) { return in[0].unsqueeze(1); },
       [](auto& in) { return unsqueeze(in[0], 1); }, {x}},
      {"squeeze", [](auto& in) { return in[0].squeeze(); },
       [](auto& in) { return squeeze(in[0]); }, {ones_dim}},
      {"squeeze dim", [](auto& in) { return in[0].squeeze(1); },
       [](auto& in) { return squeeze(in[0], 1); }, {ones_dim}},
      {"narrow", [](auto& in) { return in[0].narrow(2, 1, 2); },
       [](auto& in) { return narrow(in[0], 2, 1, 2); }, {x3}},
      {"slice", [](auto& in) { return in[0].slice(2, 0, 4, 3); },
       [](auto& in) { return slice(in[0], 2, 0, 4, 3); }, {x3}},
      {"expand", [](auto& in) { return in[0].expand({2, 4}); },
       [](auto& in) { return expand(in[0], {2, 4}); }, {v}},
      {"flatten", [](auto& in) { return in[0].flatten(); },
       [](auto& in) { return flatten(in[0]); }, {x3}},
      {"flatten 1", [](auto& in) { return in[0].flatten(1); },
       [](auto& in) { return flatten(in[0], 1); }, {x3}},
      {"flatten 0 1", [](auto& in) { return in[0].flatten(0, 1); },
       [](auto& in) { return flatten(in[0], 0, 1); }, {x3}},
      {"contiguous", [](auto& in) { return in[0].t().contiguous(); },
       [](auto& in) { return contiguous(transpose(in[0], 0, 1)); }, {x}},
      {"clone", [](auto& in) { return in[0].clone(); }, [](auto& in) { return clone(in[0]); },
       {x}},
  });
  CHECK_THROWS_WITH(x3.t(), Catch::Contains("t()") && Catch::Contains("float64[2, 3, 4]"));
  CHECK_THROWS_WITH(Tensor().t(), Catch::Contains("t()"));
  CHECK_THROWS_WITH(x.narrow(1, 2, 2), Catch::Contains("narrow"));
}

TEST_CASE("to and matmul methods match their free functions across devices",
          "[ops][methods]") {
  const Device d = test_device();
  const Device other(d.type() == DeviceType::kCpu ? "sim:0" : "cpu");
  const Tensor x = random_input({2, 3}, d, 12);
  run({
      {"to dtype", [](auto& in) { return in[0].to(DType::kFloat32); },
       [](auto& in) { return to(in[0], DType::kFloat32); }, {x}},
      {"to device", [other](auto& in) { return in[0].to(other); },
       [other](auto& in) { return to(in[0], other); }, {x}},
      {"to device by name", [other](auto& in) { return in[0].to(other.str()); },
       [other](auto& in) { return to(in[0], other); }, {x}},
      {"to device and dtype", [other](auto& in) { return in[0].to(other, DType::kFloat32); },
       [other](auto& in) { return to(to(in[0], DType::kFloat32), other); }, {x}},
  });
  CHECK(x.to(d).is_same(x));  // as the free function: same device, same tensor
}

// In place: the method and the free function change two equal non-leaf tensors.
using InplaceFn = std::function<void(const Tensor& target, const TensorList& in)>;

void check_inplace(const std::string& name, const InplaceFn& method, const InplaceFn& free,
                   const TensorList& in) {
  INFO(name);
  const Tensor m = clone(in[0]), f = clone(in[0]);
  const uint32_t version = m.version();
  method(m, in);
  free(f, in);
  CHECK(m.version() > version);
  check_same(m, f, in);
  check_same_gradients(m, f, in);
}

TEST_CASE("in-place methods match their free functions", "[ops][methods][inplace]") {
  const Device d = test_device();
  const Tensor x = random_input({2, 3}, d, 13);
  const Tensor y = random_input({2, 3}, d, 14);
  const Tensor row = random_input({3}, d, 15);
  const Tensor value = input({-7}, {}, d);
  const Tensor mask = from_vector<bool>({false, true, true}, {3},
                                        TensorOptions().dtype(DType::kBool).device(d));
  check_inplace("add_", [](const Tensor& t, auto& in) { t.add_(in[1]); },
                [](Tensor t, auto& in) { add_(t, in[1]); }, {x, y});
  check_inplace("add_ alpha", [](const Tensor& t, auto& in) { t.add_(in[1], -1.5); },
                [](Tensor t, auto& in) { add_(t, in[1], -1.5); }, {x, row});
  check_inplace("mul_", [](const Tensor& t, auto& in) { t.mul_(in[1]); },
                [](Tensor t, auto& in) { mul_(t, in[1]); }, {x, y});
  check_inplace("mul_ scalar", [](const Tensor& t, auto&) { t.mul_(2.5); },
                [](Tensor t, auto&) { mul_(t, 2.5); }, {x});
  check_inplace("zero_", [](const Tensor& t, auto&) { t.zero_(); },
                [](Tensor t, auto&) { zero_(t); }, {x});
  check_inplace("fill_", [](const Tensor& t, auto&) { t.fill_(0.75); },
                [](Tensor t, auto&) { fill_(t, 0.75); }, {x});
  check_inplace("copy_", [](const Tensor& t, auto& in) { t.copy_(in[1]); },
                [](Tensor t, auto& in) { copy_(t, in[1]); }, {x, row});
  check_inplace("masked_fill_", [mask](const Tensor& t, auto&) { t.masked_fill_(mask, 3.5); },
                [mask](Tensor t, auto&) { masked_fill_(t, mask, 3.5); }, {x});
  check_inplace("masked_fill_ tensor",
                [mask](const Tensor& t, auto& in) { t.masked_fill_(mask, in[1]); },
                [mask](Tensor t, auto& in) { masked_fill_(t, mask, in[1]); }, {x, value});
  // As libtorch's: callable on a const handle, returning a reference to it.
  const Tensor c = clone(x);
  Tensor& r = c.mul_(2.0);
  CHECK(&r == &c);
  CHECK(c.add_(y).is_same(c));
  // Errors are the free function's, naming the op.
  CHECK_THROWS_WITH(x.zero_(), Catch::Contains("zero_"));
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad
