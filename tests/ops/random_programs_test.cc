// Random programs over in-place operations on bases and views (Note [Views and in-place
// operations]): each program's value and gradients must equal those of the same program
// rewritten without in-place operations, and pass gradcheck (central differences), on
// cpu and on sim with its ops on a side stream. So that a view whose history goes stale,
// or an in-place op on a view recorded wrongly, cannot come back unnoticed.
#include <random>

#include "gradcheck/gradcheck.h"
#include "engine/grad_mode.h"
#include "tests/ops/finite_difference.h"

namespace streamgrad {
namespace testing {
namespace {

// A view step: narrow(dim, start, length) or transpose(0, 1).
struct ViewStep {
  bool transpose = false;
  int64_t dim = 0, start = 0, length = 0;
};

enum class Kind { kInput, kUnary, kBinary, kView, kAddInplace, kMulScalarInplace,
                  kMulInplace, kFillInplace, kCopyInplace, kMaskedFillInplace };

struct Instr {
  Kind kind;
  int target = 0;   // register read (and, in place, written)
  int operand = 0;  // second register
  int unary = 0;    // 0 tanh, 1 exp, 2 scale
  double scalar = 1;
  ViewStep view;
};

struct Program {
  std::vector<Instr> code;
  int num_inputs = 2;
};

// Where a register's values live: a root and the view steps from it.
struct Reg {
  int root = 0;
  std::vector<ViewStep> chain;
  Shape shape;
};

Shape shape_after(const Shape& s, const ViewStep& v) {
  if (v.transpose) return {s[1], s[0]};
  Shape out = s;
  out[v.dim] = v.length;
  return out;
}

Tensor apply_view(const Tensor& t, const ViewStep& v) {
  return v.transpose ? transpose(t, 0, 1) : narrow(t, v.dim, v.start, v.length);
}

// Draws a program on 2-D registers; in-place ops never target an input (a leaf) or read
// their own root as the operand.
Program draw(std::mt19937_64& rng) {
  Program p;
  std::vector<Reg> regs;
  auto pick = [&](size_t n) { return static_cast<int>(std::uniform_int_distribution<size_t>(0, n - 1)(rng)); };
  for (int i = 0; i < p.num_inputs; ++i) {
    p.code.push_back({Kind::kInput, i});
    regs.push_back({static_cast<int>(regs.size()), {}, {3, 4}});
  }
  // Every input is first copied into a root that may be written.
  for (int i = 0; i < p.num_inputs; ++i) {
    Instr in{Kind::kUnary, i};
    in.unary = 2;
    in.scalar = 1.5;
    p.code.push_back(in);
    regs.push_back({static_cast<int>(regs.size()), {}, {3, 4}});
  }
  // Roots some node saved for backward (tanh, exp, mul of two registers, mul_'s operand):
  // writing them in place is refused by the version check, and would tie the saving node
  // and the tensor in a cycle that outlives the program, so they are not written.
  std::vector<bool> saved(64, false);
  const int steps = 6 + pick(6);
  for (int s = 0; s < steps; ++s) {
    const int r = p.num_inputs + pick(regs.size() - p.num_inputs);
    const Reg& reg = regs[r];
    Instr in{Kind::kView, r};
    const int what = pick(10);
    if (what < 3) {  // a view
      if (pick(3) == 0) {
        in.view.transpose = true;
      } else {
        in.view.dim = pick(2);
        const int64_t n = reg.shape[in.view.dim];
        if (n < 2) continue;
        in.view.start = pick(static_cast<size_t>(n));
        in.view.length = 1 + pick(static_cast<size_t>(n - in.view.start));
      }
      p.code.push_back(in);
      Reg out = reg;
      out.chain.push_back(in.view);
      out.shape = shape_after(reg.shape, in.view);
      regs.push_back(out);
      continue;
    }
    if (what < 5) {  // out of place: a new root
      in.kind = pick(2) == 0 ? Kind::kUnary : Kind::kBinary;
      in.unary = pick(3);
      in.scalar = 0.5 + pick(4) * 0.5;
      if (in.kind == Kind::kBinary) {
        std::vector<int> same;
        for (size_t j = 0; j < regs.size(); ++j) {
          if (regs[j].shape == reg.shape) same.push_back(static_cast<int>(j));
        }
        in.operand = same[pick(same.size())];
      }
      const bool saves = in.kind == Kind::kBinary ? in.unary != 0 : in.unary != 2;
      if (saves) {
        saved[reg.root] = true;
        if (in.kind == Kind::kBinary) saved[regs[in.operand].root] = true;
        saved[regs.size()] = true;
      }
      p.code.push_back(in);
      regs.push_back({static_cast<int>(regs.size()), {}, reg.shape});
      continue;
    }
    if (saved[reg.root]) continue;
    // In place on r, with an operand of the same shape from another root (or a constant).
    std::vector<int> others;
    for (size_t j = 0; j < regs.size(); ++j) {
      if (regs[j].shape == reg.shape && regs[j].root != reg.root) others.push_back(static_cast<int>(j));
    }
    const Kind kinds[] = {Kind::kAddInplace, Kind::kMulScalarInplace, Kind::kMulInplace,
                          Kind::kFillInplace, Kind::kCopyInplace, Kind::kMaskedFillInplace};
    in.kind = kinds[pick(6)];
    in.operand = others.empty() ? -1 : others[pick(others.size())];
    in.scalar = -1.5 + pick(7) * 0.5;
    if (in.kind == Kind::kMulInplace && in.operand >= 0) saved[regs[in.operand].root] = true;
    p.code.push_back(in);
  }
  return p;
}

// Runs `p` on `inputs`: with real in-place ops and views, or out of place (each write
// rebuilds the register's root with cat and re-reads every view from it). Returns a
// scalar mixing every register.
Tensor run(const Program& p, const TensorList& inputs, bool inplace) {
  std::vector<Tensor> roots;    // out of place: each root's current value, by register
  std::vector<Reg> regs;
  std::vector<Tensor> live;     // in place: the registers themselves
  auto read = [&](int r) -> Tensor {
    if (inplace) return live[r];
    Tensor t = roots[regs[r].root];
    for (const ViewStep& v : regs[r].chain) t = apply_view(t, v);
    return t;
  };
  // Out of place: root value with the register's part replaced by x.
  std::function<Tensor(const Tensor&, const std::vector<ViewStep>&, size_t, const Tensor&)> put =
      [&](const Tensor& t, const std::vector<ViewStep>& chain, size_t at, const Tensor& x) -> Tensor {
    if (at == chain.size()) return x;
    const ViewStep& v = chain[at];
    const Tensor inner = put(apply_view(t, v), chain, at + 1, x);
    if (v.transpose) return transpose(inner, 0, 1);
    const int64_t n = t.size(v.dim);
    std::vector<Tensor> parts;
    if (v.start > 0) parts.push_back(narrow(t, v.dim, 0, v.start));
    parts.push_back(inner);
    if (v.start + v.length < n) parts.push_back(narrow(t, v.dim, v.start + v.length, n - v.start - v.length));
    return cat(parts, v.dim);
  };
  auto write = [&](int r, const Tensor& x) {
    roots[regs[r].root] = put(roots[regs[r].root], regs[r].chain, 0, x);
  };
  auto operand = [&](const Instr& in, const Tensor& like) {
    if (in.operand >= 0) return read(in.operand);
    return mul(ones_like(like), in.scalar);
  };
  // Roots are indexed by the register that created them.
  auto add_reg = [&](const Tensor& t, int root, std::vector<ViewStep> chain) {
    const bool new_root = root == static_cast<int>(regs.size());
    regs.push_back({root, std::move(chain), t.sizes()});
    live.push_back(t);
    roots.resize(regs.size());
    if (new_root) roots[root] = t;
  };
  for (const Instr& in : p.code) {
    const int next = static_cast<int>(regs.size());
    switch (in.kind) {
      case Kind::kInput:
        add_reg(inputs[in.target], next, {});
        break;
      case Kind::kUnary: {
        const Tensor a = read(in.target);
        add_reg(in.unary == 0 ? tanh(a) : in.unary == 1 ? exp(mul(a, 0.3)) : mul(a, in.scalar),
                next, {});
        break;
      }
      case Kind::kBinary:
        add_reg(in.unary == 0 ? add(read(in.target), read(in.operand))
                              : mul(read(in.target), read(in.operand)),
                next, {});
        break;
      case Kind::kView: {
        std::vector<ViewStep> chain = regs[in.target].chain;
        chain.push_back(in.view);
        add_reg(apply_view(read(in.target), in.view), regs[in.target].root, std::move(chain));
        break;
      }
      default: {
        Tensor t = read(in.target);
        const Tensor b = operand(in, t);
        const Tensor mask = gt(b, 0.0);
        if (inplace) {
          switch (in.kind) {
            case Kind::kAddInplace: add_(t, b, in.scalar); break;
            case Kind::kMulScalarInplace: mul_(t, in.scalar); break;
            case Kind::kMulInplace: mul_(t, b); break;
            case Kind::kFillInplace: fill_(t, in.scalar); break;
            case Kind::kCopyInplace: copy_(t, b); break;
            default: masked_fill_(t, mask, in.scalar); break;
          }
        } else {
          Tensor x;
          switch (in.kind) {
            case Kind::kAddInplace: x = add(t, mul(b, in.scalar)); break;
            case Kind::kMulScalarInplace: x = mul(t, in.scalar); break;
            case Kind::kMulInplace: x = mul(t, b); break;
            case Kind::kFillInplace: x = mul(t, 0.0); x = add(x, in.scalar); break;
            case Kind::kCopyInplace: x = add(mul(t, 0.0), b); break;
            default: x = where(mask, mul(ones_like(t), in.scalar), t); break;
          }
          write(in.target, x);
        }
      }
    }
  }
  Tensor loss = zeros({}, f64(inputs[0].device()));
  for (size_t r = 0; r < regs.size(); ++r) {
    const Tensor t = read(static_cast<int>(r));
    loss = add(loss, mul(sum(mul(t, t)), 1.0 / (1.0 + static_cast<double>(r))));
  }
  return loss;
}

bool is_version_error(const Error& e) {
  return std::string(e.what()).find("modified by an in-place operation") != std::string::npos;
}

TEST_CASE("random programs with in-place ops on bases and views", "[ops][views][random]") {
  const Device d = test_device();
  // Devices with streams (sim, cuda) run fewer programs, each on a side stream; cpu runs
  // the most (its launches are the cheapest).
  const bool streams = d.type() != DeviceType::kCpu;
  const int count = streams ? 60 : 200;
  int checked = 0, refused = 0;
  for (int seed = 0; seed < count; ++seed) {
    std::mt19937_64 rng(seed);
    const Program p = draw(rng);
    INFO("program seed " << seed << " on " << d.str());
    // On sim and cuda the whole program, its inputs included, runs on a side stream.
    std::optional<StreamGuard> side;
    if (streams) side.emplace(Stream::create(d));
    const TensorList in = {random_input({3, 4}, d, 100 + seed), random_input({3, 4}, d, 900 + seed)};
    try {
      const Tensor a = run(p, in, true);
      const Tensor b = run(p, in, false);
      CHECK(values(a)[0] == Approx(values(b)[0]).epsilon(1e-12));
      const TensorList ga = grad({a}, in, {}, false, false, true);
      const TensorList gb = grad({b}, in, {}, false, false, true);
      for (size_t i = 0; i < in.size(); ++i) {
        REQUIRE(ga[i].defined() == gb[i].defined());
        if (!ga[i].defined()) continue;
        const std::vector<double> va = values(ga[i]), vb = values(gb[i]);
        for (size_t k = 0; k < va.size(); ++k) CHECK(va[k] == Approx(vb[k]).epsilon(1e-10).margin(1e-12));
      }
      const GradcheckFn f = [&p](const TensorList& x) { return TensorList{run(p, x, true)}; };
      CHECK(gradcheck(f, in).passed);
      ++checked;
    } catch (const Error& e) {
      // A saved tensor overwritten before backward: refused as by the reference.
      if (!is_version_error(e)) throw;
      ++refused;
    }
  }
  INFO(checked << " programs checked, " << refused << " refused by the version check");
  CHECK(refused == 0);  // draw() writes no saved root
}

}  // namespace
}  // namespace testing
}  // namespace streamgrad
