// The backward reference and the gradients' pass rule: the exact gradients against central
// differences of the exact forward (worked out here, independently of the backward's code), the
// inputs a backward stage reads, and the rule against planted errors.
#include "flashsteps_catch.hpp"

#include <cmath>
#include <limits>

#include "flashsteps/reference.hpp"

using namespace flashsteps;
using Catch::Matchers::ContainsSubstring;

namespace {

Problem shape(std::int64_t sq, std::int64_t skv, std::int64_t d, bool causal,
              DType t = DType::fp16) {
  Problem p;
  p.heads = 2;
  p.seq_q = sq;
  p.seq_kv = skv;
  p.head_dim = d;
  p.causal = causal;
  p.dtype = t;
  return p;
}

// L = Σ dO ∘ O over head `h`, O from the exact forward: the loss whose gradient dO is.
double loss(const HostInputs& in, const std::vector<std::uint16_t>& dout, std::int64_t h) {
  const Problem& p = in.problem;
  const Reference r = reference_attention(in, {h}, RefPrecision::exact);
  double l = 0;
  for (std::int64_t e = 0; e < p.seq_q * p.head_dim; ++e)
    l += bits_to_float(dout[h * p.seq_q * p.head_dim + e], p.dtype) * r.o[e];
  return l;
}

// dL/dX[e] by central differences with Richardson's extrapolation (error O(step^4)), X one of the
// inputs of `in`; for inputs on the grid of multiples of 2^-10 with |x| < 2, the steps 2^-8 and
// 2^-9 are exact in fp16, so X ± step is what the forward reads.
double central_difference(HostInputs in, std::vector<std::uint16_t> HostInputs::*x, std::int64_t e,
                          const std::vector<std::uint16_t>& dout, std::int64_t h) {
  const float x0 = bits_to_float((in.*x)[e], in.problem.dtype);
  auto diff = [&](double step) {
    (in.*x)[e] = float_to_bits(x0 + static_cast<float>(step), in.problem.dtype);
    const double up = loss(in, dout, h);
    (in.*x)[e] = float_to_bits(x0 - static_cast<float>(step), in.problem.dtype);
    const double down = loss(in, dout, h);
    return (up - down) / (2 * step);
  };
  return (4 * diff(0x1p-9) - diff(0x1p-8)) / 3;
}

// The full-tensor view of one reference head's gradient: rows [head*rows, (head+1)*rows).
struct Fake {
  Problem p;
  BackwardReference exact, same;
  std::vector<std::uint16_t> dq, dk, dv;
};

std::vector<std::uint16_t> to_bits(const std::vector<double>& x, DType t) {
  std::vector<std::uint16_t> out(x.size());
  for (std::size_t e = 0; e < x.size(); ++e)
    out[e] = float_to_bits(static_cast<float>(x[e]), t);
  return out;
}

// Every head checked (so the GPU tensors are the reference's own layout), the "GPU" result the
// same-precision reference's.
Fake fake(bool causal, std::int64_t sq, std::int64_t skv, DType t = DType::bf16) {
  Fake f;
  f.p = shape(sq, skv, 32, causal, t);
  const BackwardInputs in = make_backward_inputs(f.p, 21);
  f.exact = reference_attention_backward(in, {0, 1}, RefPrecision::exact);
  f.same = reference_attention_backward(in, {0, 1}, RefPrecision::same_precision);
  f.dq = to_bits(f.same.dq, t);
  f.dk = to_bits(f.same.dk, t);
  f.dv = to_bits(f.same.dv, t);
  return f;
}

BackwardCheckResult check(const Fake& f) {
  return check_attention_backward(f.p, f.exact, f.same, f.dq, f.dk, f.dv);
}

}  // namespace

TEST_CASE("the exact gradients are the central differences of the exact forward") {
  for (bool causal : {false, true}) {
    // Sq > Skv: with the causal mask rows 0 and 1 see no key.
    for (auto [sq, skv] : {std::pair<std::int64_t, std::int64_t>{5, 3}, {3, 6}}) {
      const Problem p = shape(sq, skv, 4, causal);
      BackwardInputs in = make_backward_inputs(p, 7);
      // Q, K, V on the grid of multiples of 2^-10 (the exact backward reads Q, K, V and dO only),
      // so that every X ± step below is exactly representable.
      for (auto* t : {&in.fwd.q, &in.fwd.k, &in.fwd.v})
        for (std::uint16_t& x : *t)
          x = float_to_bits(std::round(bits_to_float(x, p.dtype) * 1024.0f) / 1024.0f, p.dtype);
      const std::int64_t h = 1;
      const BackwardReference r = reference_attention_backward(in, {h}, RefPrecision::exact);
      const std::int64_t D = p.head_dim;
      struct Input {
        const char* name;
        std::vector<std::uint16_t> HostInputs::*x;
        const std::vector<double>* grad;
        std::int64_t rows;
      };
      for (const Input& t :
           {Input{"dQ", &HostInputs::q, &r.dq, sq}, Input{"dK", &HostInputs::k, &r.dk, skv},
            Input{"dV", &HostInputs::v, &r.dv, skv}}) {
        for (std::int64_t e = 0; e < t.rows * D; ++e) {
          const double fd = central_difference(in.fwd, t.x, h * t.rows * D + e, in.dout, h);
          INFO(t.name << " " << p.name() << " element " << e << ": " << (*t.grad)[e] << " against "
                      << fd);
          CHECK(std::abs((*t.grad)[e] - fd) <= 1e-4 * std::max(1.0, std::abs(fd)));
        }
      }
    }
  }
}

TEST_CASE("a backward stage's inputs: O and LSE from the exact forward, dO of zero mean") {
  const Problem p = shape(6, 4, 8, true);  // rows 0 and 1 see no key
  const BackwardInputs in = make_backward_inputs(p, 3);
  const Reference fwd = reference_attention(in.fwd, {0, 1}, RefPrecision::exact);
  for (std::size_t e = 0; e < in.o.size(); ++e)
    CHECK(in.o[e] == float_to_bits(static_cast<float>(fwd.o[e]), p.dtype));
  for (std::size_t r = 0; r < in.lse.size(); ++r)
    CHECK(in.lse[r] == static_cast<float>(fwd.lse[r]));
  CHECK(std::isinf(in.lse[0]));
  CHECK(std::isfinite(in.lse[2]));
  double sum = 0;
  for (std::uint16_t x : in.dout)
    sum += bits_to_float(x, p.dtype);
  CHECK(std::abs(sum / static_cast<double>(in.dout.size())) < 0.25);
  const BackwardReference r = reference_attention_backward(in, {0}, RefPrecision::exact);
  for (std::int64_t d = 0; d < 2 * p.head_dim; ++d)
    CHECK(r.dq[d] == 0.0);  // rows 0 and 1: no key, no gradient
}

TEST_CASE("the same-precision gradients are close to, but not the same as, the exact ones") {
  for (DType t : {DType::fp16, DType::bf16}) {
    const Fake f = fake(true, 40, 60, t);
    double diff = 0, scale = 0;
    for (std::size_t e = 0; e < f.exact.dk.size(); ++e) {
      diff = std::max(diff, std::abs(f.exact.dk[e] - f.same.dk[e]));
      scale = std::max(scale, std::abs(f.exact.dk[e]));
    }
    CHECK(diff > 0);
    CHECK(diff < 0.05 * scale);
  }
}

TEST_CASE("the gradients' pass rule accepts the same-precision result") {
  const BackwardCheckResult c = check(fake(true, 50, 30));
  INFO(c.summary);
  CHECK(c.pass);
  CHECK(c.triage.empty());
  CHECK_THAT(c.summary, ContainsSubstring("dQ max err") && ContainsSubstring("PASS"));
}

TEST_CASE("the gradients' pass rule catches a planted error and a NaN, naming the gradient") {
  SECTION("dK off by a few bounds in one element") {
    Fake f = fake(false, 40, 40);
    const BackwardCheckResult ok = check(f);
    f.dk[77] =
        float_to_bits(bits_to_float(f.dk[77], f.p.dtype) + 4 * float(ok.dk.bound), f.p.dtype);
    const BackwardCheckResult c = check(f);
    CHECK_FALSE(c.pass);
    CHECK(c.dq.pass);
    CHECK_FALSE(c.dk.pass);
    CHECK(c.dv.pass);
    CHECK_THAT(c.summary, ContainsSubstring("dK max err") && ContainsSubstring("FAIL"));
    CHECK_THAT(c.triage, ContainsSubstring("first wrong dK: head 0 row 2 d 13"));
  }
  SECTION("one NaN in dV (an unwritten, poisoned element)") {
    Fake f = fake(false, 40, 40);
    f.dv.back() = 0xFFFF;
    const BackwardCheckResult c = check(f);
    CHECK_FALSE(c.pass);
    CHECK(c.dv.nonfinite == 1);
  }
  SECTION("a gradient in a row that sees no key, whose dQ is 0") {
    Fake f = fake(true, 50, 20);  // rows 0..29 see no key
    REQUIRE(f.exact.dq[5] == 0.0);
    f.dq[5] = float_to_bits(4 * static_cast<float>(check(f).dq.bound), f.p.dtype);
    CHECK_FALSE(check(f).dq.pass);
  }
}
