// The CPU references and the pass rule: checked against formulas worked out independently here,
// on tiny shapes with exactly representable inputs, and against planted errors.
#include "flashsteps_catch.hpp"

#include <cmath>
#include <limits>

#include "flashsteps/reference.hpp"

using namespace flashsteps;
using Catch::Approx;
using Catch::Matchers::ContainsSubstring;

namespace {

Problem shape(std::int64_t sq, std::int64_t skv, std::int64_t d, bool causal,
              DType t = DType::fp16) {
  Problem p;
  p.seq_q = sq;
  p.seq_kv = skv;
  p.head_dim = d;
  p.causal = causal;
  p.dtype = t;
  return p;
}

HostInputs filled(const Problem& p, float q, float k, float v) {
  HostInputs in{p, {}, {}, {}, {}};
  in.q.assign(p.q_elems(), float_to_bits(q, p.dtype));
  in.k.assign(p.kv_elems(), float_to_bits(k, p.dtype));
  in.v.assign(p.kv_elems(), float_to_bits(v, p.dtype));
  return in;
}

void set(std::vector<std::uint16_t>& t, std::int64_t i, float x, DType d) {
  t[i] = float_to_bits(x, d);
}

}  // namespace

TEST_CASE("one query, two keys: the softmax-weighted average, by hand") {
  Problem p = shape(1, 2, 2, false);
  p.scale = 0.5f;
  HostInputs in = filled(p, 0, 0, 0);
  // q = (1, 2); k0 = (1, 0), k1 = (0.5, 1); v0 = (1, -1), v1 = (3, 2)
  set(in.q, 0, 1, p.dtype), set(in.q, 1, 2, p.dtype);
  set(in.k, 0, 1, p.dtype), set(in.k, 1, 0, p.dtype);
  set(in.k, 2, 0.5, p.dtype), set(in.k, 3, 1, p.dtype);
  set(in.v, 0, 1, p.dtype), set(in.v, 1, -1, p.dtype);
  set(in.v, 2, 3, p.dtype), set(in.v, 3, 2, p.dtype);
  const double s0 = 0.5 * (1 * 1 + 2 * 0), s1 = 0.5 * (1 * 0.5 + 2 * 1);
  const double e0 = std::exp(s0), e1 = std::exp(s1);
  const Reference r = reference_attention(in, {0}, RefPrecision::exact);
  CHECK(r.o[0] == Approx((e0 * 1 + e1 * 3) / (e0 + e1)).epsilon(1e-14));
  CHECK(r.o[1] == Approx((e0 * -1 + e1 * 2) / (e0 + e1)).epsilon(1e-14));
  CHECK(r.lse[0] == Approx(std::log(e0 + e1)).epsilon(1e-14));
}

TEST_CASE("rows of P sum to one: V = 1 gives O = 1 on every row that sees a key") {
  for (bool causal : {false, true}) {
    Problem p = shape(33, 20, 16, causal);
    p.heads = 3;
    HostInputs in = make_inputs(p, 11);
    in.v.assign(p.kv_elems(), float_to_bits(1.0f, p.dtype));
    const Reference r = reference_attention(in, {0, 2}, RefPrecision::exact);
    for (std::size_t h = 0; h < 2; ++h)
      for (std::int64_t i = 0; i < p.seq_q; ++i) {
        const double expect = p.kv_end(i) > 0 ? 1.0 : 0.0;
        for (std::int64_t d = 0; d < p.head_dim; ++d)
          CHECK(r.o[(h * p.seq_q + i) * p.head_dim + d] == Approx(expect).epsilon(1e-12));
      }
  }
}

TEST_CASE("causal alignment: Q = 0 averages V over exactly the visible keys") {
  // With Q = 0 every visible score is 0, so P is uniform over keys [0, end): with V[j] = j,
  // O = (end - 1) / 2 and LSE = log(end). Rows that see no key: O = 0, LSE = -inf.
  for (auto [sq, skv] : {std::pair{5, 9}, std::pair{9, 5}, std::pair{7, 7}}) {
    const Problem p = shape(sq, skv, 1, true);
    HostInputs in = filled(p, 0, 1, 0);
    for (std::int64_t j = 0; j < skv; ++j)
      set(in.v, j, static_cast<float>(j), p.dtype);
    for (RefPrecision prec : {RefPrecision::exact, RefPrecision::same_precision}) {
      const Reference r = reference_attention(in, {0}, prec);
      for (std::int64_t i = 0; i < sq; ++i) {
        const std::int64_t end =
            std::max<std::int64_t>(0, std::min<std::int64_t>(i + skv - sq + 1, skv));
        INFO("Sq " << sq << " Skv " << skv << " row " << i);
        CHECK(r.o[i] == Approx(end > 0 ? (end - 1) / 2.0 : 0.0).margin(1e-3));
        if (end == 0)
          CHECK((std::isinf(r.lse[i]) && r.lse[i] < 0));
        else
          CHECK(r.lse[i] == Approx(std::log(static_cast<double>(end))).epsilon(1e-6));
      }
    }
  }
}

TEST_CASE("the same-precision reference is close to, but not the same as, the exact one") {
  for (DType t : {DType::fp16, DType::bf16}) {
    Problem p = shape(64, 200, 64, false, t);
    const HostInputs in = make_inputs(p, 3);
    const Reference exact = reference_attention(in, {0}, RefPrecision::exact);
    const Reference same = reference_attention(in, {0}, RefPrecision::same_precision);
    double max_err = 0;
    for (std::size_t i = 0; i < exact.o.size(); ++i)
      max_err = std::max(max_err, std::abs(exact.o[i] - same.o[i]));
    CHECK(max_err > 0);
    CHECK(max_err < 4 * unit_roundoff(t));  // a few roundings of values of order one
  }
}

TEST_CASE("sample_heads spreads over B*H, first and last included") {
  Problem p = shape(4, 4, 8, false);
  p.batch = 4;
  p.heads = 8;
  const auto h = sample_heads(p, 5);
  REQUIRE(h.size() == 5);
  CHECK(h.front() == 0);
  CHECK(h.back() == 31);
  CHECK(sample_heads(p, 100).size() == 32);
}

namespace {

// A stand-in for a GPU result: the same-precision reference, stored as a stage would store it.
struct Fake {
  Problem p;
  HostInputs in;
  Reference exact, same;
  std::vector<std::uint16_t> o;
  std::vector<float> lse;
};

Fake fake(bool causal, std::int64_t sq, std::int64_t skv) {
  Fake f{shape(sq, skv, 32, causal), {}, {}, {}, {}, {}};
  f.p.heads = 2;
  f.in = make_inputs(f.p, 5);
  f.exact = reference_attention(f.in, {0, 1}, RefPrecision::exact);
  f.same = reference_attention(f.in, {0, 1}, RefPrecision::same_precision);
  for (double x : f.same.o)
    f.o.push_back(float_to_bits(static_cast<float>(x), f.p.dtype));
  for (double x : f.same.lse)
    f.lse.push_back(static_cast<float>(x));
  return f;
}

CheckResult check(const Fake& f) {
  return check_attention(f.p, f.exact, f.same, f.o, f.lse, default_tolerance(f.p, f.exact));
}

}  // namespace

TEST_CASE("the pass rule accepts the same-precision result") {
  const Fake f = fake(true, 70, 50);
  const CheckResult c = check(f);
  INFO(c.summary);
  CHECK(c.pass);
  CHECK(c.o_bound > c.o_max_err);
  CHECK_THAT(c.summary, ContainsSubstring("PASS"));
}

TEST_CASE("the pass rule catches a planted error, a NaN, and a wrong masked row") {
  SECTION("an error of a few bounds in one element") {
    Fake f = fake(false, 40, 40);
    const CheckResult ok = check(f);
    const float bad = bits_to_float(f.o[123], f.p.dtype) + 3 * static_cast<float>(ok.o_bound);
    f.o[123] = float_to_bits(bad, f.p.dtype);
    const CheckResult c = check(f);
    CHECK_FALSE(c.pass);
    CHECK(c.worst_row == 123 / 32);
    CHECK_THAT(c.summary, ContainsSubstring("FAIL") && ContainsSubstring("b1_h2_sq40_skv40_d32"));
  }
  SECTION("one NaN (an unwritten, poisoned element)") {
    Fake f = fake(false, 40, 40);
    f.o.back() = 0xFFFF;
    const CheckResult c = check(f);
    CHECK_FALSE(c.pass);
    CHECK(c.nan_count == 1);
  }
  SECTION("a finite LSE on a row that sees no key, and -inf on one that does") {
    Fake f = fake(true, 50, 20);  // rows 0..29 see no key
    REQUIRE(std::isinf(f.lse[0]));
    f.lse[0] = 0.0f;
    CHECK_FALSE(check(f).pass);
    f = fake(true, 50, 20);
    f.lse[40] = -std::numeric_limits<float>::infinity();
    CHECK(check(f).lse_mismatch == 1);
  }
  SECTION("an LSE off by more than its bound") {
    Fake f = fake(false, 40, 40);
    f.lse[5] += 1e-2f;
    CHECK_FALSE(check(f).pass);
  }
}

TEST_CASE("a failed check says where the error lives: heads, row blocks, D columns, LSE or O") {
  SECTION("a passing check has no triage") {
    CHECK(check(fake(false, 40, 40)).triage.empty());
  }
  SECTION("one poisoned element: its head, its 64-row block and 16-column group, LSE right") {
    Fake f = fake(false, 130, 60);  // D = 32, two heads, rows 0..129
    // head 1, row 70, d 20: flat index (1 * 130 + 70) * 32 + 20.
    f.o[(1 * 130 + 70) * 32 + 20] = 0xFFFF;
    const CheckResult c = check(f);
    REQUIRE_FALSE(c.pass);
    INFO(c.triage);
    CHECK_THAT(c.triage, ContainsSubstring("1 wrong O elements in heads {1}, query rows 64-127, "
                                           "D columns 16-31"));
    CHECK_THAT(c.triage, ContainsSubstring("LSE right, only O wrong"));
    CHECK_THAT(c.triage, ContainsSubstring("1 NaN (poison or computed), 0 inf"));
    CHECK_THAT(c.triage, ContainsSubstring("first wrong: head 1 row 70 d 20: nan (reference "));
    CHECK_THAT(c.summary, ContainsSubstring(c.triage));
  }
  SECTION("wrong rows in two blocks, the last one ragged") {
    Fake f = fake(false, 130, 60);
    for (std::int64_t row : {3, 129})
      f.o[row * 32 + 5] =
          float_to_bits(bits_to_float(f.o[row * 32 + 5], f.p.dtype) + 1.0f, f.p.dtype);
    const CheckResult c = check(f);
    INFO(c.triage);
    CHECK_THAT(c.triage, ContainsSubstring("2 wrong O elements in heads {0}, query rows 0-63, "
                                           "128-129, D columns 0-15"));
  }
  SECTION("an LSE error is told apart from an O error") {
    Fake f = fake(false, 40, 40);
    f.lse[40 + 7] += 1.0f;  // head 1, row 7
    const CheckResult c = check(f);
    INFO(c.triage);
    CHECK_THAT(c.triage, ContainsSubstring("0 wrong O elements in heads {1}, query rows 0-39"));
    CHECK_THAT(c.triage, ContainsSubstring("1 rows of LSE wrong"));
  }
}
