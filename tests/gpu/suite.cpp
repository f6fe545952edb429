// tests/gpu/suite.cpp — the GPU suite every stage runs (CONTRIBUTING.md, "The correctness rule"):
// ragged tails, Sq != Skv both ways, causal with fully masked rows, each supported head dim,
// both dtypes, a grid that fills the GPU, poisoned outputs, bitwise determinism, and refusals
// that name the limit. Each check draws fresh random inputs.
#include "flashsteps_catch.hpp"

#include <cstring>
#include <sstream>

#include "flashsteps/cuda_check.hpp"
#include "flashsteps/device_tensors.hpp"
#include "flashsteps/reference.hpp"
#include "suite.hpp"

using Catch::Matchers::ContainsSubstring;

namespace flashsteps::test {
namespace {

std::uint64_t fresh_seed() {
  static std::uint64_t seed = 0x5eed;
  return ++seed;
}

struct Outputs {
  std::vector<std::uint16_t> o;
  std::vector<float> lse;
};

// Poison, launch once on a stream, copy back.
Outputs run_once(const Problem& p, const HostInputs& in) {
  cudaStream_t stream;
  FS_CUDA_CHECK(cudaStreamCreate(&stream));
  DeviceTensors dt(p, stage().workspace_bytes(p));
  dt.upload(in);
  dt.poison(stream);
  stage().launch(p, dt.args(), stream);
  FS_CUDA_CHECK(cudaStreamSynchronize(stream));
  FS_CUDA_CHECK(cudaStreamDestroy(stream));
  return {dt.download_o(), dt.download_lse()};
}

// Runs `p` if the stage supports it and checks it against both references. Returns false when
// the stage refused the problem (after checking the refusal carries a reason).
bool check_problem(const Problem& p, std::int64_t max_heads = 4) {
  const Support sup = check_runnable(stage(), p, device());
  if (!sup) {
    INFO(p.name() << " refused: " << sup.reason);
    CHECK_FALSE(sup.reason.empty());
    return false;
  }
  const HostInputs in = make_inputs(p, fresh_seed());
  const Outputs out = run_once(p, in);
  const auto heads = sample_heads(p, max_heads);
  const Reference exact = reference_attention(in, heads, RefPrecision::exact);
  const Reference same = reference_attention(in, heads, RefPrecision::same_precision);
  const CheckResult c =
      check_attention(p, exact, same, out.o, out.lse, default_tolerance(p, exact));
  INFO(c.summary);
  CHECK(c.pass);
  return true;
}

Problem make(std::int64_t sq, std::int64_t skv, std::int64_t d, DType t, bool causal,
             std::int64_t b = 1, std::int64_t h = 2) {
  Problem p;
  p.batch = b;
  p.heads = h;
  p.seq_q = sq;
  p.seq_kv = skv;
  p.head_dim = d;
  p.dtype = t;
  p.causal = causal;
  return p;
}

constexpr DType kDtypes[] = {DType::fp16, DType::bf16};

}  // namespace

TEST_CASE("the stage supports the contract's minimum: D 64 and 128, fp16 and bf16, causal") {
  for (std::int64_t d : {64, 128})
    for (DType t : kDtypes)
      for (bool causal : {false, true}) {
        const Problem p = make(256, 256, d, t, causal);
        const Support s = check_runnable(stage(), p, device());
        INFO(p.name() << ": " << s.reason);
        CHECK(s.ok);
      }
}

TEST_CASE("ragged tails, Sq == Skv") {
  for (std::int64_t s :
       {std::int64_t{1}, std::int64_t{17}, std::int64_t{127}, std::int64_t{129}, kLongSeq})
    for (std::int64_t d : {64, 128})
      for (DType t : kDtypes)
        for (bool causal : {false, true})
          check_problem(make(s, s, d, t, causal));
}

TEST_CASE("Sq != Skv both ways; causal Sq > Skv has rows that see no key") {
  const std::pair<std::int64_t, std::int64_t> shapes[] = {
      {17, 129}, {129, 17}, {1, 1000}, {kLongSeq, 1}, {127, kLongSeq}, {kLongSeq, 127}};
  for (auto [sq, skv] : shapes)
    for (std::int64_t d : {64, 128})
      for (DType t : kDtypes)
        for (bool causal : {false, true})
          check_problem(make(sq, skv, d, t, causal));
}

TEST_CASE("every head dimension the stage supports is correct; the others are refused") {
  int supported = 0;
  for (std::int64_t d : {16, 32, 40, 64, 80, 96, 128, 160, 192, 256})
    for (DType t : kDtypes)
      supported += check_problem(make(129, 77, d, t, true)) ? 1 : 0;
  CHECK(supported >= 4);  // D 64 and 128 in both dtypes at least
  // Past the project limit every stage refuses, naming it.
  const Support s =
      check_runnable(stage(), make(64, 64, kMaxHeadDim + 8, DType::fp16, false), device());
  CHECK_FALSE(s.ok);
  CHECK_THAT(s.reason, ContainsSubstring(std::to_string(kMaxHeadDim)));
}

TEST_CASE("a problem larger than device memory is refused before launch, naming the memory") {
  // 1024 x 64 heads of 65536 x 128: 1 TiB per tensor, more than any GPU has.
  const Problem p = make(65536, 65536, 128, DType::fp16, false, 1024, 64);
  const Support s = check_runnable(stage(), p, device());
  INFO(s.reason);
  CHECK_FALSE(s.ok);
  CHECK_THAT(s.reason, ContainsSubstring("MiB") || ContainsSubstring("grid limit"));
}

TEST_CASE("a grid that fills the GPU: B*H at least twice the SM count") {
  const std::int64_t bh = 2 * device().sm_count;
  for (bool causal : {false, true})
    check_problem(make(kGridSeq, kGridSeq, 64, DType::fp16, causal, 2, (bh + 1) / 2), 8);
}

TEST_CASE("a non-default softmax scale") {
  Problem p = make(100, 300, 64, DType::bf16, true);
  p.scale = 0.3f;
  check_problem(p);
}

TEST_CASE("same inputs twice give bitwise the same output") {
  for (bool causal : {false, true}) {
    const Problem p = make(333, 517, 64, DType::fp16, causal, 2, 3);
    if (!check_runnable(stage(), p, device())) continue;
    const HostInputs in = make_inputs(p, fresh_seed());
    const Outputs a = run_once(p, in), b = run_once(p, in);
    CHECK(std::memcmp(a.o.data(), b.o.data(), a.o.size() * sizeof(a.o[0])) == 0);
    CHECK(std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * sizeof(a.lse[0])) == 0);
  }
}

TEST_CASE("the check catches an unwritten output element") {
  // Guards the suite itself: a poisoned element that a stage leaves unwritten must fail.
  const Problem p = make(64, 64, 64, DType::fp16, false);
  REQUIRE(check_runnable(stage(), p, device()).ok);
  const HostInputs in = make_inputs(p, fresh_seed());
  Outputs out = run_once(p, in);
  out.o[7] = 0xFFFF;  // what the poison leaves behind
  const auto heads = sample_heads(p, 2);
  const Reference exact = reference_attention(in, heads, RefPrecision::exact);
  const Reference same = reference_attention(in, heads, RefPrecision::same_precision);
  CHECK_FALSE(check_attention(p, exact, same, out.o, out.lse, default_tolerance(p, exact)).pass);
}

}  // namespace flashsteps::test
