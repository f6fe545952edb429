// Problem validation, naming and FLOP counting: the limits every stage and binary rely on.
#include "flashsteps_catch.hpp"

#include "flashsteps/problem.hpp"

using namespace flashsteps;
using Catch::Approx;
using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::StartsWith;

namespace {
Problem good() {
  Problem p;
  p.batch = 2;
  p.heads = 3;
  p.seq_q = 17;
  p.seq_kv = 129;
  p.head_dim = 64;
  return p;
}
}  // namespace

TEST_CASE("a valid problem passes validation") {
  CHECK(validate(good()).empty());
}

TEST_CASE("zero or negative sizes are refused, naming the size") {
  for (auto field :
       {&Problem::batch, &Problem::heads, &Problem::seq_q, &Problem::seq_kv, &Problem::head_dim}) {
    for (std::int64_t bad : {0, -1}) {
      Problem p = good();
      p.*field = bad;
      const std::string why = validate(p);
      INFO(why);
      CHECK_THAT(why, ContainsSubstring(">= 1"));
    }
  }
  Problem p = good();
  p.seq_q = 0;
  CHECK_THAT(validate(p), StartsWith("seq_q = 0"));
}

TEST_CASE("head_dim above the project limit is refused, naming the limit") {
  Problem p = good();
  p.head_dim = kMaxHeadDim + 1;
  CHECK_THAT(validate(p), ContainsSubstring("256"));
  p.head_dim = kMaxHeadDim;
  CHECK(validate(p).empty());
}

TEST_CASE("sizes whose element count overflows 64-bit offsets are refused") {
  Problem p = good();
  p.batch = std::int64_t{1} << 40;
  p.heads = std::int64_t{1} << 20;
  CHECK_THAT(validate(p), ContainsSubstring("overflows"));
  p = good();
  p.seq_q = kMaxSeqLen + 1;
  CHECK_THAT(validate(p), ContainsSubstring("32-bit row-index"));
  p = good();
  p.batch = std::int64_t{1} << 16;
  p.heads = std::int64_t{1} << 16;  // B*H = 2^32 blocks: beyond the grid
  CHECK_THAT(validate(p), ContainsSubstring("grid limit"));
}

TEST_CASE("a bad scale is refused and a scale of 0 means 1/sqrt(D)") {
  Problem p = good();
  p.scale = -1.0f;
  CHECK_FALSE(validate(p).empty());
  p.scale = 0.0f;
  CHECK(p.softmax_scale() == Approx(0.125f));
  p.scale = 0.5f;
  CHECK(p.softmax_scale() == 0.5f);
}

TEST_CASE("memory check names what is needed and what is free") {
  Problem p = good();
  const std::int64_t need = p.min_dram_bytes() + 1000;
  CHECK(check_fits_memory(p, 1000, need).empty());
  CHECK_THAT(check_fits_memory(p, 1000, need - 1), ContainsSubstring("free"));
}

TEST_CASE("FLOPs follow FlashAttention's count, halved when causal") {
  Problem p = good();
  CHECK(p.flops() == 4.0 * 2 * 3 * 17 * 129 * 64);
  p.causal = true;
  CHECK(p.flops() == 2.0 * 2 * 3 * 17 * 129 * 64);
  // Q, K, V, O in the dtype plus fp32 LSE
  CHECK(p.min_dram_bytes() == 2 * (2 * 6 * 17 * 64 + 2 * 6 * 129 * 64) + 4 * 6 * 17);
}

TEST_CASE("the causal mask is bottom-right aligned") {
  Problem p = good();  // Sq 17 < Skv 129: every row sees keys up to i + 112
  p.causal = true;
  CHECK(p.kv_end(0) == 113);
  CHECK(p.kv_end(16) == 129);
  std::swap(p.seq_q, p.seq_kv);  // Sq 129 > Skv 17: the first 112 rows see nothing
  CHECK(p.kv_end(0) == 0);
  CHECK(p.kv_end(111) == 0);
  CHECK(p.kv_end(112) == 1);
  CHECK(p.kv_end(128) == 17);
  p.causal = false;
  CHECK(p.kv_end(0) == 17);
}

TEST_CASE("benchmark names round-trip through the parser") {
  Problem p = good();
  p.dtype = DType::bf16;
  p.causal = true;
  CHECK(p.name() == "b2_h3_sq17_skv129_d64_bf16_causal");
  const auto back = parse_problem_name(p.name());
  REQUIRE(back);
  CHECK(back->name() == p.name());
  CHECK(back->causal);
  CHECK(back->dtype == DType::bf16);
  CHECK(parse_problem_name("b16_h16_sq1024_skv1024_d128_fp16")->seq_kv == 1024);
  for (const char* bad : {"", "b1_h1", "b1_h1_sq1_skv1_d64_fp32", "b1_h1_sq1_skv1_d64_fp16_x",
                          "bx_h1_sq1_skv1_d64_fp16", "b1_h1_sq1_skv1_d64z_fp16"}) {
    INFO(bad);
    CHECK_FALSE(parse_problem_name(bad));
  }
}

TEST_CASE("dtype names") {
  CHECK(parse_dtype("bf16") == DType::bf16);
  CHECK(parse_dtype("fp16") == DType::fp16);
  CHECK_FALSE(parse_dtype("fp32"));
  CHECK(to_string(DType::bf16) == "bf16");
}

TEST_CASE("the backward counts 2.5 times the forward's FLOPs and moves dO, dQ, dK, dV too") {
  Problem p;
  p.batch = 2;
  p.heads = 3;
  p.seq_q = 17;
  p.seq_kv = 129;
  p.causal = true;
  CHECK(p.flops(StageKind::backward) == 2.5 * p.flops());
  CHECK(p.min_dram_bytes(StageKind::backward) ==
        2 * (4 * 6 * 17 * 64 + 4 * 6 * 129 * 64) + 4 * 6 * 17);
  const std::int64_t need = p.min_dram_bytes(StageKind::backward) + 1000;
  CHECK(check_fits_memory(p, 1000, need, StageKind::backward).empty());
  CHECK_FALSE(check_fits_memory(p, 1000, need - 1, StageKind::backward).empty());
}
