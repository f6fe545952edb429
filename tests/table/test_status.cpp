// tests/table/test_status.cpp — README's status table (fs_table/table.hpp, status): the test and
// sanitizer logs of a run (tests/table/fixtures/run_logs*) and the README block it rewrites.
#include "flashsteps_catch.hpp"
#include "fs_table/table.hpp"

#include "build_stages.hpp"
#include "temp_dir.hpp"

#include <fstream>

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
  CHECK(suite_result(run, "07d_overlap") == State::skipped);
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
  CHECK_THAT(md, ContainsSubstring("| `07d_overlap` | skipped | not run |"));
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

TEST_CASE("status: a stage slower than its parent gets a note naming the section that says why",
          "[status]") {
  namespace fs = std::filesystem;
  // 04 takes 2 ms where its parent 03 takes 1 ms at the status shape; 05 (parent 04) 1.5 ms.
  RunData run = logs("run_logs");
  run.label = "synthetic";
  const flashsteps::Problem shape = *flashsteps::parse_problem_name(kStatusShape);
  for (const auto& [backend, ms] :
       {std::pair{"03_online_softmax", 1.0}, std::pair{"04_cp_async", 2.0},
        std::pair{"05_warp_specialized", 1.5}}) {
    Measurement m;
    m.backend = backend;
    m.problem = shape;
    m.median_ms = ms;
    run.measurements.push_back(m);
  }
  const fs::path chapters = fs::temp_directory_path() / "fs_table_status_chapters";
  fs::remove_all(chapters);
  fs::create_directories(chapters);
  auto write = [&](const char* heading) {
    std::ofstream(chapters / "stage_04_cp_async.md") << "# Stage 04 {#stage04}\n\ntext\n\n"
                                                     << heading << "\n\nmore\n";
  };

  write("## Why stage 04 is Slower at D = 128 {#stage04_why}");
  const std::string block = status_block(run, chapters);
  CHECK_THAT(block, ContainsSubstring("- `04_cp_async` is slower here than the stage it builds "
                                      "on, `03_online_softmax` (0.500x its speed)"));
  CHECK_THAT(block, ContainsSubstring("Why stage 04 is Slower at D = 128") &&
                        ContainsSubstring("(book/chapters/stage_04_cp_async.md)") &&
                        ContainsSubstring("section `stage04_why`"));
  // 05 is faster than its parent (04), though slower than 03: no note.
  CHECK_THAT(block, !ContainsSubstring("- `05_warp_specialized`"));
  // Without the chapters (fs_table status without --readme) the note still stands.
  CHECK_THAT(status_block(run), ContainsSubstring("its chapter says why."));

  // A chapter that does not explain the step backwards: README cannot be generated.
  write("## What limits it now {#stage04_limits}");
  CHECK_THROWS_WITH(status_block(run, chapters),
                    ContainsSubstring("04_cp_async is slower than its parent 03_online_softmax") &&
                        ContainsSubstring("has no section whose heading says why"));
  fs::remove_all(chapters);
}

TEST_CASE("status: a sanitizer log is carried from an older run only with PTX-identical kernels",
          "[status]") {
  namespace fs = std::filesystem;
  TempDir dir;
  const std::string header = "# nvcc\trelease 13.0, V13.0.88\tsm_90a\n";
  const std::string src = "stages/03_online_softmax/kernels.cu\t_Zk\t";
  for (const char* r : {"gpu/2000-01-01_old", "gpu/2000-02-01_new"}) {
    fs::create_directories(dir.path / r);
    fs::copy(kFixtures / "run_full", dir.path / r, fs::copy_options::recursive);
    dir.write(std::string(r) + "/" + std::string(kPtxManifest), header + src + "h1\tk<half>\n");
  }
  dir.write("gpu/2000-01-01_old/sanitizers_03_online_softmax.log",
            "=== 03 memcheck\n=== exit 0\n=== 03 racecheck\n=== exit 0\n");
  RunData run = load_run(dir.path / "gpu/2000-02-01_new", build_stages());
  run.ptx_dir = dir.path / "ptx";
  const auto cell = [&] { return render(status_table(run), Format::markdown); };

  dir.write("ptx/03_online_softmax.tsv", header + src + "h1\tk<half>\n");
  const auto carried = carried_sanitizer_result(run, "03_online_softmax");
  REQUIRE(carried);
  CHECK(carried->result.runs == 2);
  CHECK(carried->label == "gpu/2000-01-01_old");
  CHECK_THAT(cell(), ContainsSubstring("| `03_online_softmax` | not run | 2 runs, 0 errors (run "
                                       "`gpu/2000-01-01_old`, PTX-identical) |"));

  // This build's kernel differs from the old run's: nothing is carried.
  dir.write("ptx/03_online_softmax.tsv", header + src + "h2\tk<half>\n");
  CHECK_FALSE(carried_sanitizer_result(run, "03_online_softmax"));
  CHECK_THAT(cell(), ContainsSubstring("| `03_online_softmax` | not run | not run |"));

  // Another architecture's run never stands in, identical hashes or not.
  dir.write("ptx/03_online_softmax.tsv", header + src + "h1\tk<half>\n");
  dir.write("gpu/2000-01-01_old/provenance.json", "{\"gpu_compute_capability\": \"8.9\"}");
  CHECK_FALSE(carried_sanitizer_result(run, "03_online_softmax"));
}

TEST_CASE(
    "the reading map: each stage's part, GPU, state on the run and faults, and the parts' roots",
    "[status][book]") {
  // A tree of its own: a root measured by the fixture run, a child in another part that needs
  // sm_90a (also measured there), and a backward root no run has timed.
  const StageList tree = parse_stage_list(R"({"stages": [
    {"name": "02_wmma", "parent": null, "dir": "stages/02_wmma", "number": "02", "title": "A",
     "anchor": "stage02", "faults": ["f1", "f2"], "ancestors": []},
    {"name": "03_online_softmax", "parent": "02_wmma", "dir": "stages/03_online_softmax",
     "number": "03", "title": "B", "anchor": "stage03", "archs": ["90a"], "faults": ["f3"],
     "part": "extra", "ancestors": ["02_wmma"]},
    {"name": "09a_bwd", "parent": null, "dir": "stages/09a_bwd", "number": "09a", "title": "C",
     "anchor": "stage09a", "kind": "backward", "part": "bwd", "ancestors": []}],
    "baselines": []})",
                                          "test");
  TempDir chapters;
  chapters.write("part_2.md", "# Part II: the stages {#part2}\n");
  chapters.write("part_extra.md", "# Part III: more {#part_extra}\n");  // no part_bwd.md
  const RunData run = load_run(kFixtures / "run_full", tree);
  const std::string md = book_reading_map(run, chapters.path);
  INFO(md);
  // The fixture run has no PTX hashes: its stages are measured, their kernels not compared.
  CHECK_THAT(md,
             ContainsSubstring("| \\ref part2 \"Part II\" | \\ref stage02 \"02\" A | — | sm_80+ | "
                               "measured; kernels not compared | suite, 2 faults |\n"));
  CHECK_THAT(md,
             ContainsSubstring("| \\ref part_extra \"Part III\" | \\ref stage03 \"03\" B | 02 | "
                               "**sm_90a** | measured; kernels not compared | suite, 1 fault |\n"));
  CHECK_THAT(md,
             ContainsSubstring("| \\ref part_bwd \"bwd\" | \\ref stage09a \"09a\" C | — | sm_80+ | "
                               "predicted only | suite, 0 faults |\n"));
  CHECK_THAT(md, ContainsSubstring("): 2 measured, their kernels not compared with this build's, 1 "
                                   "predicted only. 1 needs sm_90a"));
  CHECK_THAT(md, ContainsSubstring("- \\ref part2 \"Part II\" (02) starts a line of the tree: 02 "
                                   "builds on no stage (the forward line).\n"));
  CHECK_THAT(
      md, ContainsSubstring("- \\ref part_extra \"Part III\" (03) starts from 02, in Part II.\n"));
  CHECK_THAT(md, ContainsSubstring("- \\ref part_bwd \"bwd\" (09a) starts a line of the tree: 09a "
                                   "builds on no stage (the backward line).\n"));
  // Without a run every stage is predicted only.
  const std::string none =
      book_reading_map(load_run(kFixtures / "no_such_run", tree), chapters.path);
  CHECK_THAT(none, ContainsSubstring("(none yet): 3 predicted only. 1 needs sm_90a"));

  // With PTX hashes on both sides: 02's kernel is the one the run measured, 03's has changed.
  namespace fs = std::filesystem;
  TempDir runs;
  fs::create_directories(runs.path / "r");
  fs::copy(kFixtures / "run_full", runs.path / "r", fs::copy_options::recursive);
  const std::string header = "# nvcc\trelease 13.0, V13.0.88\tsm_90a\n";
  const std::string k02 = "stages/02_wmma/kernels.cu\t_Za\th1\ta<half>\n";
  const std::string k03 = "stages/03_online_softmax/kernels.cu\t_Zb\t";
  runs.write("r/" + std::string(kPtxManifest), header + k02 + k03 + "h2\tb<half>\n");
  runs.write("ptx/02_wmma.tsv", header + k02);
  runs.write("ptx/03_online_softmax.tsv", header + k03 + "h3\tb<half>\n");
  RunData hashed = load_run(runs.path / "r", tree);
  hashed.ptx_dir = runs.path / "ptx";
  const std::string md2 = book_reading_map(hashed, chapters.path);
  INFO(md2);
  CHECK_THAT(md2, ContainsSubstring("| sm_80+ | **measured** | suite, 2 faults |\n"));
  CHECK_THAT(md2, ContainsSubstring("| measured; 1 kernel changed since | suite, 1 fault |\n"));
  CHECK_THAT(md2, ContainsSubstring("): 1 measured with the very kernels they have now, 1 measured "
                                    "with kernels changed since, 1 predicted only."));
}

TEST_CASE("the reading map counts a stage's planted faults from the build's tree",
          "[status][book]") {
  // The build's stages.json against the stage's own faults.cmake, read here.
  for (const StageList::Stage& s : build_stages().stages) {
    std::ifstream in(std::filesystem::path(FS_TABLE_BENCH_DIR) / ".." / s.dir / "faults.cmake");
    std::size_t n = 0;  // the calls: lines that start with it (the header's comment names it too)
    for (std::string line; std::getline(in, line);)
      n += line.starts_with("flashsteps_fault(") ? 1 : 0;
    INFO(s.name);
    CHECK(s.faults == n);
  }
}
