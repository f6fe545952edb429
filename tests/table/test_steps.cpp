// tests/table/test_steps.cpp — a stage's step size (fs_table/table.hpp, steps) and whether its
// kernels are still the ones a run measured (status: kernel_identity, stage_status). Inputs are
// written here; every expected value is worked out by hand from them.

#include <fstream>
#include <sstream>

#include "flashsteps_catch.hpp"
#include "fs_table/table.hpp"
#include "temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using namespace flashsteps::table;
using Catch::Matchers::ContainsSubstring;
using State = KernelIdentity::State;

std::vector<std::string> lines_of(const std::string& text) {
  std::istringstream in(text);
  return code_lines(in);
}

// A run that timed `stage` at commit abc123, with a manifest of `source`'s kernels.
RunData measured_run(const TempDir& dir, const std::string& stage, const std::string& manifest) {
  RunData run;
  run.dir = dir.path / "run";
  run.ptx_dir = dir.path / "ptx";
  run.provenance = {{"git_commit", "abc123"}};
  Measurement m;
  m.backend = stage;
  run.measurements.push_back(m);
  dir.write("run/" + std::string(kPtxManifest), manifest);
  return run;
}

const std::string kHeader = "# nvcc\trelease 13.0, V13.0.88\tsm_90a\n";
const std::string kSrc = "stages/04_x/kernels.cu";
std::string line(const std::string& src, const std::string& mangled, const std::string& hash,
                 const std::string& readable) {
  return src + "\t" + mangled + "\t" + hash + "\t" + readable + "\n";
}

}  // namespace

TEST_CASE("steps: code lines drop comments and blank lines, not code that looks like them",
          "[steps]") {
  const auto lines = lines_of(
      "// a header comment\n"
      "\n"
      "int a = 1;  // trailing\n"
      "  /* a block\n"
      "     comment */ int b = 2;\n"
      "const char* s = \"// not a comment\";\n"
      "char c = '/'; /* x */ int d;\n"
      "   \t\n");
  REQUIRE(lines.size() == 4);
  CHECK(lines[0] == "int a = 1;");
  CHECK(lines[1] == "int b = 2;");
  CHECK(lines[2] == "const char* s = \"// not a comment\";");
  CHECK(lines[3] == "char c = '/';  int d;");
}

TEST_CASE("steps: added, removed and the share of the child that is new, by line LCS", "[steps]") {
  // Common subsequence a c d (3 lines): the child adds x and y, the parent loses b.
  const StepSize s = step_size({"a", "b", "c", "d"}, {"a", "x", "c", "d", "y"});
  CHECK(s.parent_lines == 4);
  CHECK(s.child_lines == 5);
  CHECK(s.added == 2);
  CHECK(s.removed == 1);
  CHECK(s.percent_new() == 40.0);
  // Moving a line is one removed and one added.
  const StepSize moved = step_size({"a", "b", "c"}, {"b", "c", "a"});
  CHECK(moved.added == 1);
  CHECK(moved.removed == 1);
}

TEST_CASE("steps: a step above the limit must say why, and only such a step may", "[steps]") {
  StepSize s;
  s.stage = "06c";
  s.parent = "06b";
  s.child_lines = 100;
  s.added = 41;
  CHECK_THAT(step_problem(s), ContainsSubstring("split the step"));
  s.large_step = "because";
  CHECK(step_problem(s).empty());
  CHECK_THAT(render(step_text(s), Format::console),
             ContainsSubstring("Above the 40% a step aims for: because."));
  s.added = 40;
  CHECK_THAT(step_problem(s), ContainsSubstring("drop the declaration"));
  s.large_step.clear();
  CHECK(step_problem(s).empty());
  CHECK_THAT(render(step_text(s), Format::console),
             ContainsSubstring("against 06b: 40 code lines added, 0 removed; 40% of 100 code "
                               "lines new"));
}

TEST_CASE("status: a stage's kernels against the hashes of the run that measured them",
          "[status]") {
  TempDir dir;
  const std::string manifest = kHeader + line(kSrc, "_Zk1", "h1", "k1<float>") +
                               line(kSrc, "_Zk2", "h2", "k2<float>") +
                               line(kSrc, ".module", "hm", "(outside)");
  RunData run = measured_run(dir, "04_x", manifest);

  SECTION("the same hashes: identical") {
    dir.write("ptx/04_x.tsv", manifest);
    const KernelIdentity id = kernel_identity(run, "04_x");
    CHECK(id.state == State::identical);
    CHECK_THAT(render(stage_status(run, "04_x"), Format::console),
               ContainsSubstring("measured at abc123; kernels PTX-identical"));
  }
  SECTION("one kernel changed, one new, one gone: each is named") {
    dir.write("ptx/04_x.tsv", kHeader + line(kSrc, "_Zk1", "h1", "k1<float>") +
                                  line(kSrc, "_Zk2", "CHANGED", "k2<float>") +
                                  line(kSrc, "_Zk3", "h3", "k3<float>") +
                                  line(kSrc, ".module", "hm", "(outside)"));
    const KernelIdentity id = kernel_identity(run, "04_x");
    CHECK(id.state == State::changed);
    CHECK(id.changed == std::vector<std::string>{"k2<float>", "k3<float> (new)"});
    run.measurements.front().backend = "04_x";
    dir.write("ptx/04_x.tsv", kHeader + line(kSrc, ".module", "hm", "(outside)"));
    CHECK(kernel_identity(run, "04_x").changed ==
          std::vector<std::string>{"k1<float> (gone)", "k2<float> (gone)"});
    CHECK_THAT(render(stage_status(run, "04_x"), Format::console),
               ContainsSubstring("kernels changed since: k1<float> (gone), k2<float> (gone)"));
  }
  SECTION("the PTX around the kernels changed") {
    dir.write("ptx/04_x.tsv", kHeader + line(kSrc, "_Zk1", "h1", "k1<float>") +
                                  line(kSrc, "_Zk2", "h2", "k2<float>") +
                                  line(kSrc, ".module", "OTHER", "(outside)"));
    CHECK(kernel_identity(run, "04_x").changed == std::vector<std::string>{"(outside)"});
  }
  SECTION("another nvcc: not compared, and said so") {
    dir.write("ptx/04_x.tsv",
              "# nvcc\trelease 12.9, V12.9.41\tsm_90a\n" + line(kSrc, "_Zk1", "h1", "k1<float>"));
    const KernelIdentity id = kernel_identity(run, "04_x");
    CHECK(id.state == State::unknown);
    CHECK_THAT(id.reason, ContainsSubstring("release 12.9"));
  }
  SECTION("the run's hashes made again by this build's nvcc (ptx/measured.tsv) are used") {
    const std::string other = "# nvcc\trelease 12.9, V12.9.41\tsm_90a";
    dir.write("ptx/measured.tsv", other + "\tabc123\n" + line(kSrc, "_Zk1", "h1'", "k1<float>"));
    dir.write("ptx/04_x.tsv", other + "\n" + line(kSrc, "_Zk1", "h1'", "k1<float>"));
    CHECK(kernel_identity(run, "04_x").state == State::identical);
    // ...but only when they are of the run's commit.
    dir.write("ptx/measured.tsv", other + "\tdef456\n" + line(kSrc, "_Zk1", "h1'", "k1<float>"));
    CHECK(kernel_identity(run, "04_x").state == State::unknown);
  }
  SECTION("no hashes from this build: not compared") {
    CHECK(kernel_identity(run, "04_x").state == State::unknown);
  }
  SECTION("a stage the run did not time: not measured, and no number") {
    const KernelIdentity id = kernel_identity(run, "05_y");
    CHECK(id.state == State::not_measured);
    CHECK_THAT(render(stage_status(run, "05_y"), Format::console),
               ContainsSubstring("not yet measured on a GPU"));
    CHECK_THAT(status_fragment(run, "05_y"), ContainsSubstring("not measurements"));
  }
  SECTION("a renamed stage is compared under the folder it had (MEASURED_AS)") {
    run.measurements.front().backend = "04_new";
    run.measured_as["04_new"] = "04_x";
    const std::string src = "stages/04_new/kernels.cu";
    dir.write("ptx/04_new.tsv", kHeader + line(src, "_Zk1", "h1", "k1<float>") +
                                    line(src, "_Zk2", "h2", "k2<float>") +
                                    line(src, ".module", "hm", "(outside)"));
    CHECK(kernel_identity(run, "04_new").state == State::identical);
    CHECK_THAT(render(stage_status(run, "04_new"), Format::console),
               ContainsSubstring("measured at abc123 as 04_x; kernels PTX-identical"));
  }
}
