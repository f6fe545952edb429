// The host model of the tiled online softmax (stage 03's executable specification) against the
// exact reference: the recurrence is exact for every tiling, so in double arithmetic the two agree
// to rounding — for any Br and Bc (1, odd, larger than the sequence), ragged and causal shapes,
// and rows that see no key. A variant without the rescaling shows the comparison can fail.
#include "flashsteps_catch.hpp"

#include <cmath>
#include <stdexcept>

#include "flashsteps/mask.hpp"
#include "flashsteps/online_softmax_model.hpp"
#include "flashsteps/reference.hpp"

using namespace flashsteps;

namespace {

Problem shape(std::int64_t sq, std::int64_t skv, std::int64_t d, bool causal, DType t,
              std::int64_t heads = 1) {
  Problem p;
  p.heads = heads;
  p.seq_q = sq;
  p.seq_kv = skv;
  p.head_dim = d;
  p.causal = causal;
  p.dtype = t;
  return p;
}

// How far a result is from the reference: relative errors against max(1, |ref|), and the rows
// whose -inf-ness differs. A row that sees no key must have LSE = -inf and O = 0 exactly.
struct Diff {
  double o_rel = 0;
  double lse_rel = 0;
  std::int64_t lse_mismatch = 0;
  std::int64_t masked_rows = 0;     // rows with LSE = -inf in the reference
  std::int64_t masked_nonzero = 0;  // O elements of such rows that are not exactly 0
};

Diff compare(const Problem& p, const Reference& got, const Reference& ref) {
  Diff d;
  REQUIRE(got.o.size() == ref.o.size());
  REQUIRE(got.lse.size() == ref.lse.size());
  for (std::size_t row = 0; row < ref.lse.size(); ++row) {
    const bool ref_inf = std::isinf(ref.lse[row]) && ref.lse[row] < 0;
    const bool got_inf = std::isinf(got.lse[row]) && got.lse[row] < 0;
    if (ref_inf != got_inf || std::isnan(got.lse[row])) ++d.lse_mismatch;
    if (ref_inf) {
      ++d.masked_rows;
      for (std::int64_t e = 0; e < p.head_dim; ++e)
        if (got.o[row * p.head_dim + e] != 0.0) ++d.masked_nonzero;
      continue;
    }
    if (!ref_inf && !got_inf) {
      d.lse_rel = std::max(
          d.lse_rel, std::abs(got.lse[row] - ref.lse[row]) / std::max(1.0, std::abs(ref.lse[row])));
    }
    for (std::int64_t e = 0; e < p.head_dim; ++e) {
      const double r = ref.o[row * p.head_dim + e], g = got.o[row * p.head_dim + e];
      const double err = std::abs(g - r) / std::max(1.0, std::abs(r));
      d.o_rel = std::isnan(err) ? INFINITY : std::max(d.o_rel, err);
    }
  }
  return d;
}

// Double rounding over a few hundred terms, plus exp2 with a rounded log2(e): far below this.
constexpr double kTight = 1e-12;

void check_agrees(const Problem& p, const OnlineSoftmaxTiling& t, std::uint64_t seed) {
  const HostInputs in = make_inputs(p, seed);
  const auto heads = sample_heads(p, 3);
  const Reference ref = reference_attention(in, heads, RefPrecision::exact);
  const Reference got = online_softmax_model(in, heads, t);
  const Diff d = compare(p, got, ref);
  INFO(p.name() << " Br " << t.br << " Bc " << t.bc << ": O rel err " << d.o_rel << ", LSE rel err "
                << d.lse_rel << ", " << d.lse_mismatch << " LSE -inf mismatches, "
                << d.masked_nonzero << " nonzero O in " << d.masked_rows
                << " rows that see no key");
  CHECK(d.o_rel <= kTight);
  CHECK(d.lse_rel <= kTight);
  CHECK(d.lse_mismatch == 0);
  CHECK(d.masked_nonzero == 0);
}

}  // namespace

TEST_CASE("the model equals the exact reference for every tiling: Br, Bc in 1, odd, 2^k, > S") {
  const std::int64_t sizes[] = {1, 3, 16, 17, 64, 100, 1000};
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{1, 1}, {17, 17}, {127, 129}, {129, 127}};
  std::uint64_t seed = 100;
  for (auto [sq, skv] : shapes)
    for (bool causal : {false, true})
      for (std::int64_t br : sizes)
        for (std::int64_t bc : sizes)
          check_agrees(shape(sq, skv, 16, causal, DType::fp16), {br, bc}, ++seed);
}

TEST_CASE("the model equals the exact reference on ragged shapes, both dtypes, D 64 and 128") {
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{1, 1000}, {1000, 1},   {17, 129},
                                                          {129, 17}, {127, 1000}, {1000, 127}};
  std::uint64_t seed = 200;
  for (auto [sq, skv] : shapes)
    for (std::int64_t d : {64, 128})
      for (DType t : {DType::fp16, DType::bf16})
        for (bool causal : {false, true})
          check_agrees(shape(sq, skv, d, causal, t, 2), {64, 64}, ++seed);
  // The kernel's own tiling on the longest ragged square, and an awkward one.
  for (bool causal : {false, true}) {
    check_agrees(shape(1000, 1000, 64, causal, DType::bf16), {64, 64}, ++seed);
    check_agrees(shape(1000, 1000, 64, causal, DType::fp16), {48, 80}, ++seed);
  }
}

TEST_CASE("causal Sq > Skv: rows that see no key get O = 0 and LSE = -inf, never NaN") {
  // Rows 0 .. Sq-Skv-1 see no key; with Br = 16 whole query blocks see none (and walk no tile),
  // and one block straddles the boundary (some rows masked, some not).
  const Problem p = shape(100, 30, 32, true, DType::fp16);
  const HostInputs in = make_inputs(p, 7);
  for (std::int64_t bc : {1, 7, 30, 64}) {
    const Reference r = online_softmax_model(in, {0}, {16, bc});
    for (std::int64_t i = 0; i < p.seq_q; ++i) {
      INFO("Bc " << bc << " row " << i);
      if (i < p.seq_q - p.seq_kv) {
        CHECK((std::isinf(r.lse[i]) && r.lse[i] < 0));
        for (std::int64_t e = 0; e < p.head_dim; ++e)
          CHECK(r.o[i * p.head_dim + e] == 0.0);
      } else {
        CHECK(std::isfinite(r.lse[i]));
      }
    }
    check_agrees(p, {16, bc}, 8);
  }
}

TEST_CASE("causal tile skipping visits exactly the tiles that hold a visible key") {
  // Brute force: a (Q block, K/V tile) pair holds a visible key iff some row of the block sees
  // some column of the tile. The model must visit all of those (else O is wrong) and no other.
  const std::pair<std::int64_t, std::int64_t> shapes[] = {
      {256, 256}, {100, 300}, {300, 100}, {129, 17}, {17, 129}};
  for (auto [sq, skv] : shapes)
    for (bool causal : {false, true})
      for (auto [br, bc] : {std::pair<std::int64_t, std::int64_t>{64, 64}, {16, 48}, {33, 7}}) {
        const Problem p = shape(sq, skv, 8, causal, DType::fp16);
        std::int64_t expect_visited = 0, total = 0;
        for (std::int64_t row0 = 0; row0 < sq; row0 += br)
          for (std::int64_t kv0 = 0; kv0 < skv; kv0 += bc) {
            ++total;
            bool visible = false;
            for (std::int64_t i = row0; i < std::min(row0 + br, sq); ++i)
              visible = visible || causal_kv_end(i, sq, skv, causal) > kv0;
            expect_visited += visible ? 1 : 0;
          }
        OnlineSoftmaxStats st;
        online_softmax_model(make_inputs(p, 9), {0}, {br, bc}, &st);
        INFO(p.name() << " Br " << br << " Bc " << bc);
        CHECK(st.tiles_visited == expect_visited);
        CHECK(st.tiles_visited + st.tiles_skipped == total);
        if (!causal) CHECK(st.tiles_skipped == 0);
      }
  // Sq == Skv, Br == Bc: the lower triangle with its diagonal, Tr (Tr + 1) / 2 of Tr^2 tiles.
  OnlineSoftmaxStats st;
  online_softmax_model(make_inputs(shape(256, 256, 8, true, DType::fp16), 1), {0}, {64, 64}, &st);
  CHECK(st.tiles_visited == 10);
  CHECK(st.tiles_skipped == 6);
}

TEST_CASE("the comparison can fail: without the alpha rescaling the model is wrong") {
  for (DType t : {DType::fp16, DType::bf16})
    for (bool causal : {false, true}) {
      const Problem p = shape(64, 200, 32, causal, t);
      const HostInputs in = make_inputs(p, 11);
      const Reference ref = reference_attention(in, {0}, RefPrecision::exact);
      OnlineSoftmaxTiling broken{16, 16};
      broken.rescale = false;
      // Several tiles per row: the running maximum grows, and the missing correction shows.
      const Diff bad = compare(p, online_softmax_model(in, {0}, broken), ref);
      INFO(p.name() << ": O rel err without rescaling " << bad.o_rel);
      CHECK(bad.o_rel > 1e-3);
      CHECK(bad.lse_rel > 1e-3);
      // One tile holds the whole row: there is nothing to correct, and the variant is right.
      broken.bc = p.seq_kv;
      const Diff one_tile = compare(p, online_softmax_model(in, {0}, broken), ref);
      CHECK(one_tile.o_rel <= kTight);
      CHECK(one_tile.lse_rel <= kTight);
    }
}

TEST_CASE("the model keeps the heads apart and refuses an empty tile") {
  Problem p = shape(40, 70, 16, true, DType::bf16);
  p.batch = 2;
  p.heads = 3;
  const HostInputs in = make_inputs(p, 13);
  const std::vector<std::int64_t> heads = {5, 0, 3};  // any order, any subset
  const Reference ref = reference_attention(in, heads, RefPrecision::exact);
  const Reference got = online_softmax_model(in, heads, {8, 24});
  CHECK(got.heads == heads);
  const Diff d = compare(p, got, ref);
  CHECK(d.o_rel <= kTight);
  CHECK(d.lse_rel <= kTight);
  CHECK_THROWS_AS(online_softmax_model(in, heads, {0, 64}), std::invalid_argument);
  CHECK_THROWS_AS(online_softmax_model(in, heads, {64, 0}), std::invalid_argument);
}
