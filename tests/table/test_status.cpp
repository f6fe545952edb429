// tests/table/test_status.cpp — README's status table (fs_table/table.hpp, status): the test and
// sanitizer logs of a run (tests/table/fixtures/run_logs*) and the README block it rewrites.
#include "flashsteps_catch.hpp"
#include "fs_table/table.hpp"

#include "build_stages.hpp"

namespace {

using namespace flashsteps::table;
using Catch::Matchers::ContainsSubstring;
using State = SuiteResult;

const std::filesystem::path kFixtures = FS_TABLE_FIXTURES;

RunData logs(const char* folder) {
  RunData run;
  run.stages = build_stages();
  run.dir = kFixtures / folder;
  return run;
}

}  // namespace

TEST_CASE("status: each stage's GPU suite from the test binaries' log", "[status]") {
  const RunData run = logs("run_logs");
  CHECK(suite_result(run, "03_online_softmax") == State::passed);
  CHECK(suite_result(run, "05_warp_specialized") == State::failed);
  CHECK(suite_result(run, "07_hopper") == State::skipped);
  CHECK(suite_result(run, "06_registers") == State::not_run);
  CHECK(suite_result(logs("no_such_run"), "03_online_softmax") == State::not_run);
}

TEST_CASE("status: sanitizer runs and failures per stage", "[status]") {
  const RunData run = logs("run_logs");
  const auto s = sanitizer_result(run, "03_online_softmax");
  REQUIRE(s);
  CHECK(s->runs == 3);
  CHECK(s->failures == 1);
  CHECK_FALSE(sanitizer_result(run, "05_warp_specialized"));
}

TEST_CASE("status: the table marks failures plainly", "[status]") {
  const std::string md = render(status_table(logs("run_logs")), Format::markdown);
  CHECK_THAT(md, ContainsSubstring("| `03_online_softmax` | passed | 1 of 3 runs FAILED |"));
  CHECK_THAT(md, ContainsSubstring("| `05_warp_specialized` | FAILED | not run |"));
  CHECK_THAT(md, ContainsSubstring("| `07_hopper` | skipped | not run |"));
}

TEST_CASE("status: the README block is replaced between its markers, and only there", "[status]") {
  const std::string readme = "# title\n\nbefore\n" + std::string(kStatusBegin) + "\nold table\n" +
                             std::string(kStatusEnd) + "\nafter\n";
  const std::string out = replace_status_block(readme, "new table\n");
  CHECK(out == "# title\n\nbefore\n" + std::string(kStatusBegin) + "\nnew table\n" +
                   std::string(kStatusEnd) + "\nafter\n");
  CHECK(replace_status_block(out, "new table\n") == out);
  CHECK_THROWS_WITH(replace_status_block("# no markers\n", "x\n"),
                    ContainsSubstring("has no status block"));
  CHECK_THROWS_WITH(replace_status_block(
                        std::string(kStatusEnd) + "\n" + std::string(kStatusBegin) + "\n", "x\n"),
                    ContainsSubstring("has no status block"));
}

TEST_CASE("status: without a run the block says so and names the command", "[status]") {
  const std::string block = status_block(load_run(kFixtures / "no_such_run", build_stages()));
  CHECK_THAT(block, ContainsSubstring("No GPU run is committed yet"));
  CHECK_THAT(block, ContainsSubstring("bench/gpu-check.sh"));
}

TEST_CASE("status: a folder with logs but no timings still gets its table", "[status]") {
  const std::string block = status_block(load_run(kFixtures / "run_logs", build_stages()));
  CHECK_THAT(block, ContainsSubstring("no timings"));
  CHECK_THAT(block, ContainsSubstring("| `03_online_softmax` | passed | 1 of 3 runs FAILED |"));
}
