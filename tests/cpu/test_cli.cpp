// The runner's flag parsing (CLI11): defaults, every flag, and refusals with exit code 2.
#include "flashsteps_catch.hpp"

#include <sstream>
#include <vector>

#include "flashsteps/runner.hpp"

using namespace flashsteps;
using Catch::Matchers::ContainsSubstring;

namespace {

struct Parsed {
  std::optional<int> code;
  RunnerOptions opt;
  std::string out, err;
};

Parsed parse(std::vector<const char*> args) {
  args.insert(args.begin(), "stage99");
  Parsed r;
  std::ostringstream out, err;
  r.code = parse_runner_cli(static_cast<int>(args.size()), args.data(), "99_test", "Test stage",
                            &r.opt, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

}  // namespace

TEST_CASE("a typical command line sets what it names, and Skv defaults to Sq") {
  const Parsed r = parse({"--batch", "4", "--heads", "16", "--seq", "2048", "--dim", "64",
                          "--causal", "--dtype", "bf16", "--iters", "7", "--seed", "9"});
  REQUIRE_FALSE(r.code);
  const Problem& p = r.opt.problem;
  CHECK(p.batch == 4);
  CHECK(p.heads == 16);
  CHECK(p.seq_q == 2048);
  CHECK(p.seq_kv == 2048);  // defaults to --seq
  CHECK(p.head_dim == 64);
  CHECK(p.causal);
  CHECK(p.dtype == DType::bf16);
  CHECK(r.opt.iters == 7);
  CHECK(r.opt.seed == 9);
}

TEST_CASE("no shape flags: several heads and ragged last tiles, not a one-token problem") {
  const Parsed r = parse({});
  REQUIRE_FALSE(r.code);
  const Problem& p = r.opt.problem;
  CHECK(p.batch * p.heads >= 4);
  for (std::int64_t len : {p.seq_q, p.seq_kv}) {
    CHECK(len > 128);      // more than one tile of every stage (64 or 128 rows) ...
    CHECK(len % 64 != 0);  // ... and a ragged last one
  }
  CHECK(r.opt.check_heads >= p.batch * p.heads);  // every head checked
}

TEST_CASE("the seq-kv flag sets Skv on its own") {
  const Parsed r = parse({"--seq", "100", "--seq-kv", "37"});
  REQUIRE_FALSE(r.code);
  CHECK(r.opt.problem.seq_q == 100);
  CHECK(r.opt.problem.seq_kv == 37);
  CHECK_FALSE(r.opt.problem.causal);
  CHECK(r.opt.problem.dtype == DType::fp16);
}

TEST_CASE("help prints usage and exits 0") {
  const Parsed r = parse({"--help"});
  REQUIRE(r.code);
  CHECK(*r.code == kExitOk);
  CHECK_THAT(r.out, ContainsSubstring("--seq-kv") && ContainsSubstring("Exit codes"));
}

TEST_CASE("bad flags and bad values exit 2 with a message") {
  for (auto args : std::vector<std::vector<const char*>>{
           {"--bogus"}, {"--dtype", "fp32"}, {"--seq", "abc"}, {"--iters", "0"}, {"--batch"}}) {
    const Parsed r = parse(args);
    INFO(args.front());
    REQUIRE(r.code);
    CHECK(*r.code == kExitUsage);
    CHECK_THAT(r.err, ContainsSubstring("--help"));
  }
}

TEST_CASE("invalid problems exit 2, naming the limit") {
  Parsed r = parse({"--seq", "0"});
  REQUIRE(r.code);
  CHECK(*r.code == kExitUsage);
  CHECK(r.err.rfind("99_test: cannot run: seq_q = 0", 0) == 0);  // every refusal's shape
  CHECK_THAT(r.err, ContainsSubstring("seq_q = 0"));
  r = parse({"--dim", "300"});
  REQUIRE(r.code);
  CHECK(*r.code == kExitUsage);
  CHECK_THAT(r.err, ContainsSubstring("256"));
  r = parse({"--heads", "-3"});
  REQUIRE(r.code);
  CHECK_THAT(r.err, ContainsSubstring("heads = -3"));
}

TEST_CASE("kv cache: the runner takes --heads-kv, --cache-lens and --page-size, refusing with 2") {
  Parsed r = parse({"-b", "3", "--heads", "8", "--heads-kv", "2", "--seq", "4", "--seq-kv", "40",
                    "--cache-lens", "40,0,7", "--page-size", "16"});
  REQUIRE_FALSE(r.code);
  CHECK(r.opt.problem.kv_heads() == 2);
  CHECK(r.opt.problem.cache_seqlens == std::vector<std::int32_t>{40, 0, 7});
  CHECK(r.opt.problem.page_size == 16);
  r = parse({"-b", "4", "--seq-kv", "50", "--cache-lens", "seeded:9"});
  REQUIRE_FALSE(r.code);
  CHECK(r.opt.problem.cache_seqlens == draw_cache_seqlens(4, 50, 9));
  CHECK(r.opt.problem.cache_seqlens.size() == 4);
  for (std::int32_t len : r.opt.problem.cache_seqlens)
    CHECK((len >= 0 && len <= 50));
  const std::pair<std::vector<const char*>, const char*> bad[] = {
      {{"--heads", "8", "--heads-kv", "3"}, "heads = 8 is not a multiple of heads_kv = 3"},
      {{"-b", "2", "--cache-lens", "1,2,3"}, "3 lengths for batch = 2"},
      {{"-b", "2", "--seq", "10", "--cache-lens", "1,11"}, "cache_seqlens[1] = 11"},
      {{"-b", "2", "--cache-lens", "1,x"}, "'x' is not an integer"},
      {{"-b", "2", "--cache-lens", "1,"}, "'' is not an integer"},
      {{"--cache-lens", "seeded:"}, "seeded:<n> takes"},
      {{"--page-size", "-4"}, "page_size = -4"},
      {{"--heads-kv", "two"}, "--help"}};
  for (const auto& [args, why] : bad) {
    r = parse(args);
    INFO(why);
    REQUIRE(r.code);
    CHECK(*r.code == kExitUsage);
    CHECK_THAT(r.err, ContainsSubstring(why));
  }
}
