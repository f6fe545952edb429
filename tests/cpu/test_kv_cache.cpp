// The KV cache's contract (problem.hpp: heads_kv, cache_seqlens, page_size): validation, names,
// byte counts, and the one CPU reference against tensors rearranged here by other means (K/V heads
// repeated per group, pages scattered by a table shuffled here, caches cut to their lengths). The
// runner's flags are tested in test_cli.cpp, the shared refusal in test_stage.cpp.
#include "flashsteps_catch.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "flashsteps/reference.hpp"

using namespace flashsteps;
using Catch::Matchers::ContainsSubstring;

namespace {

Problem cache_problem(std::int64_t heads, std::int64_t heads_kv, bool causal) {
  Problem p;
  p.batch = 3;
  p.heads = heads;
  p.heads_kv = heads_kv;
  p.seq_q = 5;
  p.seq_kv = 37;
  p.head_dim = 16;
  p.causal = causal;
  return p;
}

std::vector<std::int64_t> all_heads(const Problem& p) {
  std::vector<std::int64_t> h(static_cast<std::size_t>(p.batch_heads()));
  std::iota(h.begin(), h.end(), 0);
  return h;
}

// Both references of every head, O and LSE side by side.
std::vector<double> refs(const HostInputs& in) {
  std::vector<double> out;
  for (RefPrecision prec : {RefPrecision::exact, RefPrecision::same_precision}) {
    const Reference r = reference_attention(in, all_heads(in.problem), prec);
    out.insert(out.end(), r.o.begin(), r.o.end());
    out.insert(out.end(), r.lse.begin(), r.lse.end());
  }
  return out;
}

// Bitwise equality of two results (-inf equals -inf; no NaN is expected in either).
bool same(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

}  // namespace

TEST_CASE("kv cache: H must be a multiple of H_kv, lengths one per sequence in [0, Skv]") {
  Problem p = cache_problem(32, 8, false);
  CHECK(validate(p).empty());
  for (std::int64_t bad : {5, 64, -1}) {
    p.heads_kv = bad;
    INFO(bad);
    CHECK_THAT(validate(p),
               ContainsSubstring("is not a multiple of heads_kv = " + std::to_string(bad)));
  }
  p = cache_problem(32, 0, false);
  p.cache_seqlens = {0, 37, 1};
  CHECK(validate(p).empty());
  p.cache_seqlens = {0, 38, 1};
  CHECK_THAT(validate(p), ContainsSubstring("cache_seqlens[1] = 38 is outside [0, seq_kv = 37]"));
  p.cache_seqlens = {-1, 0, 0};
  CHECK_THAT(validate(p), ContainsSubstring("cache_seqlens[0] = -1"));
  p.cache_seqlens = {3, 3};
  CHECK_THAT(validate(p), ContainsSubstring("2 lengths for batch = 3"));
  p.cache_seqlens.clear();
  p.page_size = -16;
  CHECK_THAT(validate(p), ContainsSubstring("page_size = -16 is outside [1, "));
}

TEST_CASE("kv cache: names stay as they were without a cache, and round-trip with one") {
  Problem p = cache_problem(6, 0, true);
  const std::string plain = "b3_h6_sq5_skv37_d16_fp16_causal";
  CHECK(p.name() == plain);
  p.heads_kv = 6;  // H_kv = H is MHA: the same name
  CHECK(p.name() == plain);
  p.heads_kv = 2;
  p.page_size = 8;
  p.cache_seqlens = {0, 37, 9};
  CHECK(p.name() == plain + "_hkv2_page8_lens0-37-9");
  const auto back = parse_problem_name(p.name());
  REQUIRE(back);
  CHECK(back->name() == p.name());
  CHECK(back->cache_seqlens == p.cache_seqlens);
  CHECK(back->kv_heads() == 2);
  CHECK(back->page_size == 8);
  CHECK_FALSE(parse_problem_name(plain + "_lens0-x"));
  CHECK_FALSE(parse_problem_name(plain + "_page8_hkv2"));  // name()'s order only
}

TEST_CASE("kv cache: K/V sizes and the bytes that must move follow H_kv, lengths and pages") {
  Problem p = cache_problem(8, 2, false);
  CHECK(p.kv_elems() == 3 * 2 * 37 * 16);
  const std::int64_t q_o_lse = 2 * 2 * (3 * 8 * 5 * 16) + 4 * (3 * 8 * 5);
  CHECK(p.min_dram_bytes() == q_o_lse + 2 * 2 * (3 * 2 * 37 * 16));
  p.cache_seqlens = {0, 10, 37};
  CHECK(p.min_dram_bytes() == q_o_lse + 2 * 2 * (47 * 2 * 16));
  p.page_size = 16;  // 3 pages per sequence, 9 in the pool
  CHECK(p.pages_per_seq() == 3);
  CHECK(p.kv_elems() == 9 * 2 * 16 * 16);
  CHECK(p.device_bytes() == q_o_lse + 2 * 2 * (9 * 2 * 16 * 16) + 4 * 3 + 4 * 9);
}

TEST_CASE("kv cache: GQA and MQA equal MHA on K/V heads repeated per group") {
  for (std::int64_t hkv : {2, 1})
    for (bool causal : {false, true}) {
      const Problem g = cache_problem(6, hkv, causal);
      const HostInputs gi = make_inputs(g, 41);
      // MHA's K/V: each K/V head written out group times in a row (PyTorch's repeat_interleave
      // along the heads), a loop of its own rather than the reference's h / group.
      Problem m = g;
      m.heads_kv = 0;
      HostInputs mi{m, gi.q, {}, {}, {}};
      const std::int64_t rows = g.seq_kv * g.head_dim;
      for (auto [src, dst] : {std::pair{&gi.k, &mi.k}, std::pair{&gi.v, &mi.v}})
        for (std::int64_t kvh = 0; kvh < g.batch * hkv; ++kvh)
          for (std::int64_t r = 0; r < g.heads / hkv; ++r)
            dst->insert(dst->end(), src->begin() + kvh * rows, src->begin() + (kvh + 1) * rows);
      REQUIRE(mi.k.size() == static_cast<std::size_t>(m.kv_elems()));
      INFO("H_kv " << hkv << (causal ? " causal" : ""));
      CHECK(same(refs(gi), refs(mi)));
    }
}

TEST_CASE("kv cache: a paged cache through a shuffled table equals the contiguous one") {
  Problem c = cache_problem(4, 2, true);
  c.cache_seqlens = {37, 0, 20};
  const HostInputs ci = make_inputs(c, 7);
  const std::vector<double> want = refs(ci);
  for (std::int64_t page : {1, 8, 16, 64}) {
    Problem pp = c;
    pp.page_size = page;
    // The pool, scattered here through a table shuffled here: key j of sequence b goes to row
    // j % page of page table[b][j / page]; rows no key lands on hold 1.0, which would show.
    std::vector<std::int32_t> table(static_cast<std::size_t>(pp.num_pages()));
    std::iota(table.begin(), table.end(), 0);
    std::mt19937 rng(static_cast<unsigned>(page));
    std::shuffle(table.begin(), table.end(), rng);
    HostInputs pi{pp, ci.q, {}, {}, table};
    const std::int64_t D = c.head_dim, hkv = 2, per_seq = pp.pages_per_seq();
    for (auto [src, dst] : {std::pair{&ci.k, &pi.k}, std::pair{&ci.v, &pi.v}}) {
      dst->assign(static_cast<std::size_t>(pp.kv_elems()), float_to_bits(1.0f, c.dtype));
      for (std::int64_t b = 0; b < c.batch; ++b)
        for (std::int64_t h = 0; h < hkv; ++h)
          for (std::int64_t j = 0; j < c.seq_kv; ++j)
            for (std::int64_t d = 0; d < D; ++d)
              (*dst)[((table[b * per_seq + j / page] * hkv + h) * page + j % page) * D + d] =
                  (*src)[((b * hkv + h) * c.seq_kv + j) * D + d];
    }
    INFO("page size " << page);
    CHECK(same(refs(pi), want));
    // make_inputs() scatters its own draw the same way: the same problem, paged or not.
    CHECK(same(refs(make_inputs(pp, 7)), want));
  }
}

TEST_CASE("kv cache: a sequence of L keys is the cache cut to L, causal aligned to L") {
  Problem c = cache_problem(2, 1, false);
  c.cache_seqlens = {37, 1, 9};
  for (bool causal : {false, true}) {
    c.causal = causal;
    const HostInputs ci = make_inputs(c, 3);  // rows past each length hold NaN
    const Reference r = reference_attention(ci, all_heads(c), RefPrecision::exact);
    for (std::int64_t b = 0; b < c.batch; ++b) {
      // Sequence b alone, Skv = L_b: its own Q rows, its first L_b keys.
      const std::int64_t L = c.cache_seqlens[b], D = c.head_dim;
      Problem one = c;
      one.batch = 1;
      one.heads_kv = 0;
      one.cache_seqlens.clear();
      one.seq_kv = L;
      HostInputs oi{one, {}, {}, {}, {}};
      const std::int64_t qn = c.heads * c.seq_q * D;
      oi.q.assign(ci.q.begin() + b * qn, ci.q.begin() + (b + 1) * qn);
      for (auto [src, dst] : {std::pair{&ci.k, &oi.k}, std::pair{&ci.v, &oi.v}})
        for (std::int64_t h = 0; h < c.heads; ++h)  // H_kv = 1: both heads read K/V head b
          dst->insert(dst->end(), src->begin() + b * c.seq_kv * D,
                      src->begin() + (b * c.seq_kv + L) * D);
      const Reference ro = reference_attention(oi, all_heads(one), RefPrecision::exact);
      const auto off_o = r.o.begin() + b * qn, off_l = r.lse.begin() + b * c.heads * c.seq_q;
      INFO("sequence " << b << " L " << L << (causal ? " causal" : ""));
      CHECK(std::equal(ro.o.begin(), ro.o.end(), off_o));
      CHECK(std::equal(ro.lse.begin(), ro.lse.end(), off_l));
    }
  }
  // Causal, Sq = 5 over L = 1: rows 0-3 see no key, row 4 sees key 0 alone (O = V_0).
  const Reference r = reference_attention(make_inputs(c, 3), all_heads(c), RefPrecision::exact);
  const std::int64_t b1 = 1 * c.heads * c.seq_q;  // sequence 1, head 0
  for (std::int64_t i = 0; i < 4; ++i)
    CHECK(std::isinf(r.lse[b1 + i]));
  CHECK(std::isfinite(r.lse[b1 + 4]));
}

TEST_CASE("kv cache: a sequence of length 0 gives O = 0 and LSE = -inf, in both references") {
  Problem p = cache_problem(2, 0, false);
  p.cache_seqlens = {4, 0, 37};
  const HostInputs in = make_inputs(p, 5);
  for (RefPrecision prec : {RefPrecision::exact, RefPrecision::same_precision}) {
    const Reference r = reference_attention(in, all_heads(p), prec);
    for (std::int64_t h = 0; h < p.batch_heads(); ++h)
      for (std::int64_t i = 0; i < p.seq_q; ++i) {
        const std::int64_t row = h * p.seq_q + i;
        const bool empty = h / p.heads == 1;
        CHECK(std::isinf(r.lse[row]) == empty);
        if (empty) {
          CHECK(r.lse[row] < 0);
          for (std::int64_t d = 0; d < p.head_dim; ++d)
            CHECK(r.o[row * p.head_dim + d] == 0.0);
        }
      }
  }
}
