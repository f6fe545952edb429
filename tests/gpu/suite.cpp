// tests/gpu/suite.cpp — the GPU suite every stage runs (CONTRIBUTING.md, "The correctness rule"):
// ragged tails, Sq != Skv both ways, causal with fully masked rows, each supported head dim,
// both dtypes, a grid that fills the GPU, poisoned outputs, bitwise determinism, and refusals
// that name the limit. Each check draws fresh random inputs. The stage's kind picks what a check
// runs and compares: a forward stage's O and LSE against reference_attention(), a backward
// stage's dQ, dK and dV against reference_attention_backward(), its O and LSE made by the
// reference forward (make_backward_inputs()), never by a stage under test.
#include "flashsteps_catch.hpp"

#include <cstdlib>
#include <cstring>
#include <iterator>
#include <sstream>

#include "flashsteps/cuda_check.hpp"
#include "flashsteps/device_tensors.hpp"
#include "flashsteps/reference.hpp"
#include "suite.hpp"
#ifdef FLASHSTEPS_EMULATED_BUILD
#include "fsemu/scheduler.hpp"
#include "fsemu/seed.hpp"
#endif

using Catch::Matchers::ContainsSubstring;

namespace flashsteps::test {
namespace {

std::uint64_t fresh_seed() {
  static std::uint64_t seed = 0x5eed;
  return ++seed;
}

bool backward() {
  return stage().kind() == StageKind::backward;
}

// FLASHSTEPS_DETERMINISTIC=1 runs the whole suite with AttentionArgs::deterministic set: the
// launch option of a stage that has a deterministic mode (Stage::deterministic_mode()). A stage
// without one is not asked (the check below fails).
bool deterministic_asked() {
  const char* v = std::getenv("FLASHSTEPS_DETERMINISTIC");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

// Whether two launches must give the same bits: the stage always, or its mode asked.
bool reproducible(bool deterministic_launch) {
  return stage().deterministic() || (deterministic_launch && stage().deterministic_mode());
}

// The inputs of the stage's kind: Q, K, V (in.fwd), and for a backward stage O, LSE and dO.
BackwardInputs make_stage_inputs(const Problem& p, std::uint64_t seed) {
  if (backward()) return make_backward_inputs(p, seed);
  return {make_inputs(p, seed), {}, {}, {}};
}

// The outputs of the stage's kind (the others stay empty).
struct Outputs {
  std::vector<std::uint16_t> o;
  std::vector<float> lse;
  std::vector<std::uint16_t> dq, dk, dv;
};

// Poison, launch once on a stream, copy back.
Outputs run_once(const Problem& p, const BackwardInputs& in,
                 bool deterministic_launch = deterministic_asked()) {
  if (deterministic_launch && !stage().deterministic_mode())
    FAIL(std::string(stage().name()) + " has no deterministic mode to launch");
  cudaStream_t stream;
  FS_CUDA_CHECK(cudaStreamCreate(&stream));
  DeviceTensors dt(p, stage().workspace_bytes(p), stage().kind());
  if (backward())
    dt.upload(in);
  else
    dt.upload(in.fwd);
  dt.poison(stream);
  AttentionArgs args = dt.args();
  args.deterministic = deterministic_launch;
  stage().launch(p, args, stream);
  FS_CUDA_CHECK(cudaStreamSynchronize(stream));
  FS_CUDA_CHECK(cudaStreamDestroy(stream));
  if (backward()) return {{}, {}, dt.download_dq(), dt.download_dk(), dt.download_dv()};
  return {dt.download_o(), dt.download_lse(), {}, {}, {}};
}

struct Verdict {
  bool pass;
  std::string summary;
};

// The outputs against both references of the stage's kind, on `max_heads` sampled heads.
Verdict check_outputs(const Problem& p, const BackwardInputs& in, const Outputs& out,
                      std::int64_t max_heads) {
  const auto heads = sample_heads(p, max_heads);
  if (backward()) {
    const BackwardReference exact = reference_attention_backward(in, heads, RefPrecision::exact);
    const BackwardReference same =
        reference_attention_backward(in, heads, RefPrecision::same_precision);
    const BackwardCheckResult c = check_attention_backward(p, exact, same, out.dq, out.dk, out.dv);
    return {c.pass, c.summary};
  }
  const Reference exact = reference_attention(in.fwd, heads, RefPrecision::exact);
  const Reference same = reference_attention(in.fwd, heads, RefPrecision::same_precision);
  const CheckResult c =
      check_attention(p, exact, same, out.o, out.lse, default_tolerance(p, exact));
  return {c.pass, c.summary};
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
  const BackwardInputs in = make_stage_inputs(p, fresh_seed());
  const Verdict v = check_outputs(p, in, run_once(p, in), max_heads);
  INFO(v.summary);
  CHECK(v.pass);
  return true;
}

// Whether two runs' outputs are bitwise the same.
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
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

// The shape cases below cross each shape with D 64 and 128, both masks and both dtypes. On a GPU
// every one of those runs. On the emulator, where these two cases were two thirds of each suite's
// time, each (shape, D, mask) runs in one dtype, alternating with the shape, the head dim and the
// mask: every shape still meets both dtypes, both head dims and both masks, every pair of those
// factors is run, and each of a stage's kernel variants (dtype, D, mask) meets every other shape.
bool in_cross([[maybe_unused]] DType t, [[maybe_unused]] std::size_t shape,
              [[maybe_unused]] std::int64_t d, [[maybe_unused]] bool causal) {
#if defined(FLASHSTEPS_EMULATED_BUILD)
  return t == kDtypes[(shape + (d == 128 ? 1 : 0) + (causal ? 1 : 0)) % 2];
#else
  return true;
#endif
}

// A KV cache's feature the stage does not read (Stage::kv_cache()) is refused before launch,
// naming the stage and the limit: what every stage without it is tested for, in the case below
// that names the feature.
bool refused_feature(bool supported, const Problem& p, const char* limit) {
  if (supported) return false;
  const Support s = check_runnable(stage(), p, device());
  INFO(p.name() << ": " << s.reason);
  CHECK_FALSE(s.ok);
  CHECK_THAT(s.reason, ContainsSubstring(std::string(stage().name())));
  CHECK_THAT(s.reason, ContainsSubstring(limit));
  return true;
}

// Decode shapes: Sq from 1 to 16 query rows over a longer K/V.
Problem decode(std::int64_t sq, std::int64_t skv, std::int64_t d, DType t, bool causal,
               std::int64_t b, std::int64_t h, std::int64_t h_kv) {
  Problem p = make(sq, skv, d, t, causal, b, h);
  p.heads_kv = h_kv;
  return p;
}

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
  const std::int64_t lengths[] = {1, 17, 127, 129, kLongSeq};
  for (std::size_t i = 0; i < std::size(lengths); ++i)
    for (std::int64_t d : {64, 128})
      for (DType t : kDtypes)
        for (bool causal : {false, true})
          if (in_cross(t, i, d, causal)) check_problem(make(lengths[i], lengths[i], d, t, causal));
}

TEST_CASE("Sq != Skv both ways; causal Sq > Skv has rows that see no key") {
  const std::pair<std::int64_t, std::int64_t> shapes[] = {
      {17, 129}, {129, 17}, {1, 1000}, {kLongSeq, 1}, {127, kLongSeq}, {kLongSeq, 127}};
  for (std::size_t i = 0; i < std::size(shapes); ++i)
    for (std::int64_t d : {64, 128})
      for (DType t : kDtypes)
        for (bool causal : {false, true})
          if (in_cross(t, i, d, causal))
            check_problem(make(shapes[i].first, shapes[i].second, d, t, causal));
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

TEST_CASE("a backward stage sums its gradients in fp32: dK, dV over many rows, dQ over many keys") {
  if (!backward()) {
    SUCCEED("a forward stage has no gradient to sum");
    return;
  }
  // Long sums, each a one-head problem (suite.hpp, kAccumLong): dK_j and dV_j over Sq rows, then
  // dQ_i over Skv keys; non-causal, so every term is there.
  check_problem(make(kAccumLong, kAccumShort, 64, DType::bf16, false, 1, 1));
  check_problem(make(kAccumShort, kAccumLong, 64, DType::bf16, false, 1, 1));
}

TEST_CASE("GQA and MQA: groups of query heads share a K/V head (or the stage refuses them)") {
  if (refused_feature(stage().kv_cache().grouped, decode(1, 64, 64, DType::fp16, false, 1, 4, 2),
                      "heads_kv"))
    return;
  // Every Sq from 1 to 16 once, each with another mix: groups of 4 (GQA) or 8 (MQA), D 64 or 128,
  // fp16 or bf16, causal or not; K/V of 130 keys, a ragged last tile for both tiles of 64 and 128
  // keys. Then a prefill-sized Sq of two query blocks over the long K/V.
  for (std::int64_t sq = 1; sq <= 16; ++sq)
    check_problem(decode(sq, 130, sq % 4 < 2 ? 64 : 128, kDtypes[sq % 2], (sq / 2) % 2 == 1, 1, 8,
                         sq % 3 == 0 ? 1 : 2));
  check_problem(decode(65, kLongSeq, 128, DType::bf16, true, 1, 4, 2));
}

TEST_CASE(
    "a KV cache of ragged lengths: empty and one key and a partial tile and full (or refused)") {
  Problem p = decode(4, kLongSeq, 64, DType::fp16, false, 4, 2, 0);
  p.cache_seqlens = {0, 1, 77, static_cast<std::int32_t>(kLongSeq)};
  if (refused_feature(stage().kv_cache().cache_seqlens, p, "cache_seqlens")) return;
  for (std::int64_t sq : {1, 16})
    for (std::int64_t d : {64, 128})
      for (bool causal : {false, true}) {
        Problem q = decode(sq, kLongSeq, d, kDtypes[causal ? 1 : 0], causal, 4, 2,
                           stage().kv_cache().grouped ? 1 : 0);
        q.cache_seqlens = p.cache_seqlens;
        check_problem(q, 8);
      }
  // Longer than Sq rows: causal rows that see no key inside a sequence that has keys.
  p = decode(100, kLongSeq, 128, DType::bf16, true, 3, 2, 0);
  p.cache_seqlens = {33, 150, 99};
  check_problem(p, 6);
}

TEST_CASE("a paged KV cache through a shuffled block table (or refused)") {
  const KvCacheSupport k = stage().kv_cache();
  Problem p = decode(3, kLongSeq, 64, DType::fp16, false, 3, 4, k.grouped ? 2 : 0);
  p.page_size = 64 * k.page_multiple;
  if (refused_feature(k.paged, p, "page_size")) return;
  // A page size that is not a multiple of what the stage takes is refused, naming that multiple.
  if (k.page_multiple > 1) {
    Problem bad = p;
    bad.page_size = k.page_multiple + k.page_multiple / 2;
    const Support s = check_runnable(stage(), bad, device());
    INFO(s.reason);
    CHECK_FALSE(s.ok);
    CHECK_THAT(s.reason, ContainsSubstring("multiple of " + std::to_string(k.page_multiple)));
  }
  if (k.cache_seqlens) p.cache_seqlens = {0, 65, static_cast<std::int32_t>(kLongSeq)};
  // Pages of 1, 4 and 16 times the stage's multiple (16, 64 and 256 keys at a multiple of 16:
  // shorter than a key tile of 64 or 128, one tile, several tiles), one per case in turn; decode
  // rows (Sq = 1) without the mask, 16 causal rows with it.
  int i = 0;
  for (std::int64_t d : {64, 128})
    for (DType t : kDtypes)
      for (bool causal : {false, true}) {
        Problem q = p;
        q.head_dim = d, q.dtype = t, q.causal = causal, q.seq_q = causal ? 16 : 1;
        q.page_size = k.page_multiple * (std::int64_t{1} << (2 * (i++ % 3)));
        check_problem(q, 12);
      }
}

TEST_CASE("a non-default softmax scale") {
  Problem p = make(100, 300, 64, DType::bf16, true);
  p.scale = 0.3f;
  check_problem(p);
}

TEST_CASE("same inputs twice give bitwise the same output") {
  for (bool causal : {false, true}) {
    const Problem p = make(kRepeatSq, kRepeatSkv, 64, DType::fp16, causal, 2, kRepeatHeads);
    if (!check_runnable(stage(), p, device())) continue;
    const BackwardInputs in = make_stage_inputs(p, fresh_seed());
    const Outputs a = run_once(p, in), b = run_once(p, in);
    if (!reproducible(deterministic_asked())) {  // atomics in the hardware's order: each must pass
      for (const Outputs* out : {&a, &b}) {
        const Verdict v = check_outputs(p, in, *out, 4);
        INFO(v.summary);
        CHECK(v.pass);
      }
      continue;
    }
    CHECK(same_bits(a.o, b.o));
    CHECK(same_bits(a.lse, b.lse));
    CHECK(same_bits(a.dq, b.dq));
    CHECK(same_bits(a.dk, b.dk));
    CHECK(same_bits(a.dv, b.dv));
  }
}

#ifdef FLASHSTEPS_EMULATED_BUILD
// Under the emulator only: the same launch under several schedules (fsemu::set_schedule_seed
// draws which resident block runs next). Hidden ([.]): a stage with a deterministic mode runs them
// by name (its stage.cmake). Causal and not, Sq != Skv, ragged: 2 heads of 5 key tiles each.
constexpr std::uint64_t kScheduleSeeds[] = {1, 2, 3, 4, 5, 6};

std::vector<Outputs> run_under_seeds(const Problem& p, const BackwardInputs& in, bool det) {
  const std::uint64_t suite_seed = fsemu::schedule_seed();  // the suite's, for what follows
  std::vector<Outputs> runs;
  for (std::uint64_t seed : kScheduleSeeds) {
    fsemu::set_schedule_seed(seed);
    runs.push_back(run_once(p, in, det));
  }
  fsemu::set_schedule_seed(suite_seed);
  return runs;
}

Problem seeds_problem(bool causal) {
  return make(200, 300, causal ? 128 : 64, causal ? DType::bf16 : DType::fp16, causal, 1, 2);
}

TEST_CASE("emulated schedules: a deterministic launch gives the same bits under every seed",
          "[.][seeds]") {
  if (!stage().deterministic() && !stage().deterministic_mode()) {
    SUCCEED("the stage has no deterministic mode");
    return;
  }
  for (bool causal : {false, true}) {
    const Problem p = seeds_problem(causal);
    const BackwardInputs in = make_stage_inputs(p, fresh_seed());
    const std::vector<Outputs> runs = run_under_seeds(p, in, stage().deterministic_mode());
    const Verdict v = check_outputs(p, in, runs.front(), 2);
    INFO(v.summary);
    CHECK(v.pass);
    for (std::size_t s = 1; s < runs.size(); ++s) {
      INFO("causal " << causal << ", schedule seed " << kScheduleSeeds[s] << " against seed "
                     << kScheduleSeeds[0]);
      CHECK(same_bits(runs[s].o, runs[0].o));
      CHECK(same_bits(runs[s].dq, runs[0].dq));
      CHECK(same_bits(runs[s].dk, runs[0].dk));
      CHECK(same_bits(runs[s].dv, runs[0].dv));
    }
  }
}

TEST_CASE("emulated schedules: without the deterministic mode dQ differs across seeds",
          "[.][seeds]") {
  if (stage().deterministic()) {
    SUCCEED("the stage is deterministic always");
    return;
  }
  // The shapes of the case above, mode off: the test above could not fail if no schedule changed
  // the bits. Each run still passes the check.
  for (bool causal : {false, true}) {
    const Problem p = seeds_problem(causal);
    const BackwardInputs in = make_stage_inputs(p, fresh_seed());
    const std::vector<Outputs> runs = run_under_seeds(p, in, false);
    int differ = 0;
    for (std::size_t s = 0; s < runs.size(); ++s) {
      const Verdict v = check_outputs(p, in, runs[s], 2);
      INFO(v.summary);
      CHECK(v.pass);
      if (s > 0 && !same_bits(runs[s].dq, runs[0].dq)) ++differ;
    }
    INFO("causal " << causal << ": dQ differs from seed " << kScheduleSeeds[0] << "'s under "
                   << differ << " of " << runs.size() - 1 << " other seeds");
    CHECK(differ > 0);
  }
}
#endif

TEST_CASE("the check catches an unwritten output element") {
  // Guards the suite itself: a poisoned element that a stage leaves unwritten must fail.
  const Problem p = make(64, 64, 64, DType::fp16, false);
  REQUIRE(check_runnable(stage(), p, device()).ok);
  const BackwardInputs in = make_stage_inputs(p, fresh_seed());
  Outputs out = run_once(p, in);
  REQUIRE(check_outputs(p, in, out, 2).pass);
  // What the poison leaves behind, in the first output of the stage's kind, then in each of a
  // backward stage's gradients.
  for (std::vector<std::uint16_t>* x : {&out.o, &out.dq, &out.dk, &out.dv}) {
    if (x->empty()) continue;
    const std::uint16_t kept = (*x)[7];
    (*x)[7] = 0xFFFF;
    CHECK_FALSE(check_outputs(p, in, out, 2).pass);
    (*x)[7] = kept;
  }
}

}  // namespace flashsteps::test
