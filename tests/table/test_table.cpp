// tests/table/test_table.cpp — CPU tests of fs_table (bench/table): reading a run, the table
// arithmetic and markers, the Markdown Doxygen gets, the book's placeholders, and Nsight
// Compute parsing and diffs. Inputs are the hand-made files under tests/table/fixtures/ (see
// its README); the expected values below are worked out by hand from them.
//
//   ctest -R '^table$'   or   test_table [tag]     (tags: [run] [compare] [markdown] [book]
//                                                   [ncu] [format]; [gnuplot] needs gnuplot)
#define FLASHSTEPS_CATCH_SESSION
#include "flashsteps_catch.hpp"

#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>

#include "fs_table/table.hpp"
#include "temp_dir.hpp"

#include "build_stages.hpp"

namespace fs = std::filesystem;
using namespace flashsteps;
using namespace flashsteps::table;
using Catch::Approx;
using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;

namespace {

const fs::path kFixtures = FS_TABLE_FIXTURES;
const fs::path kBench = FS_TABLE_BENCH_DIR;

// The fixture run's shapes (tests/table/fixtures/README.md).
constexpr const char* kA = "b32_h32_sq512_skv512_d64_fp16";            // 2^36 FLOPs
constexpr const char* kB = "b16_h32_sq1024_skv1024_d64_fp16";          // 2^37 FLOPs
constexpr const char* kC = "b16_h16_sq1024_skv1024_d128_fp16_causal";  // 2^36 FLOPs
constexpr const char* kD = "b1_h8_sq512_skv512_d64_fp16";              // 2^29 FLOPs

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Problem shape(const char* name) {
  const auto p = parse_problem_name(name);
  REQUIRE(p);
  return *p;
}

std::string text(const Text& t) {
  return render(t, Format::console);
}

// The cell of a table in the row whose first cell reads `row` and the column headed `column`.
std::string cell(const Table& t, const std::string& row, const std::string& column) {
  std::size_t c = 0;
  while (c < t.header.size() && text(t.header[c]) != column)
    ++c;
  REQUIRE(c < t.header.size());
  for (const auto& r : t.rows) {
    if (text(r[0]) == row) return text(r[c]);
  }
  FAIL("no row " << row);
  return {};
}

// The note a marker such as "n/a (2)" refers to.
std::string note_of(const Table& t, const std::string& marker) {
  std::smatch m;
  REQUIRE(std::regex_match(marker, m, std::regex(R"(n/a \((\d+)\))")));
  const std::size_t k = std::stoul(m[1]);
  REQUIRE(k >= 1);
  REQUIRE(k <= t.notes.size());
  return text(t.notes[k - 1]);
}

const RunData& full_run() {
  static const RunData run = load_run(kFixtures / "run_full", build_stages());
  return run;
}

}  // namespace

TEST_CASE("benchmark names round-trip through the run and the table", "[run]") {
  const RunData& run = full_run();
  REQUIRE_FALSE(run.empty());
  // 4 + 4 + 4 + 9 entries; the aggregate (_median) entry of 03 is not a measurement.
  CHECK(run.measurements.size() == 21);
  CHECK(run.warnings.empty());
  for (const Measurement& m : run.measurements) {
    // The shape parsed from the name prints back as the same name.
    const auto again = parse_problem_name(m.problem.name());
    REQUIRE(again);
    CHECK(again->name() == m.problem.name());
  }
  // Google Benchmark's "/iterations:30/manual_time" suffix is not part of the shape.
  const Measurement* m = run.find("03_online_softmax", shape(kB));
  REQUIRE(m);
  CHECK(m->median_ms == 2.0);
  CHECK(m->flops_per_second() == Approx(137438953472.0 / 2e-3));
  CHECK(run.find("03_online_softmax", shape(kA))->median_ms == 1.0);  // not the aggregate's 99
  // The overview cell is the median and FLOPs(name) / median: 2^37 / 2 ms = 68.7 TFLOP/s.
  const auto groups = shape_groups(run, DType::fp16);
  REQUIRE(groups.size() == 3);
  CHECK(groups[0].shapes.size() == 2);  // the S sweep first
  CHECK(text(groups[0].caption()) == "D = 64, non-causal, fp16: H = 32, B·S = 16384 tokens");
  const Table t = overview_table(run, groups[0]);
  CHECK(cell(t, "03_online_softmax", "S=1024") == "2.00 / 68.7");
  CHECK(cell(t, "sdpa_flash", "S=512") == "0.500 / 137");
  // The labels name the kernels sdpa_bench.py saw run.
  CHECK(run.find("sdpa_flash", shape(kA))->label == "kernels: pytorch_flash::flash_fwd_kernel");
}

TEST_CASE("entries whose names are not shapes are skipped with a warning", "[run]") {
  TempDir d;
  d.write("bench_x.json", R"({"benchmarks": [
      {"name": "03_online_softmax/not_a_shape", "median_ms": 1.0},
      {"name": "03_online_softmax/b1_h8_sq512_skv512_d64_fp16", "median_ms": 1.0},
      {"name": "03_online_softmax/b1_h8_sq512_skv512_d64_fp16", "median_ms": 5.0},
      {"name": "03_online_softmax/b1_h8_sq64_skv64_d64_fp16"}]})");
  const RunData run = load_run(d.path, build_stages());
  REQUIRE(run.measurements.size() == 2);
  CHECK(run.find("03_online_softmax", shape(kD))->median_ms == 1.0);  // the first of two
  CHECK_FALSE(run.find("03_online_softmax", shape("b1_h8_sq64_skv64_d64_fp16"))->ok());
  REQUIRE(run.warnings.size() == 3);
  CHECK_THAT(run.warnings[0], ContainsSubstring("not_a_shape"));
  CHECK_THAT(run.warnings[1], ContainsSubstring("appears again"));
  CHECK_THAT(run.warnings[2], ContainsSubstring("no positive median_ms"));
}

TEST_CASE("the stage list: the build's tree, parents and unreadable lists", "[stages]") {
  // The build's list (stages.json): the tree the stage manifests declare.
  const StageList& built = build_stages();
  REQUIRE_FALSE(built.stages.empty());
  CHECK(built.stages.front().name == "00_scalar");
  CHECK(built.parent_of("00_scalar").empty());
  CHECK(built.parent_of("03_online_softmax") == "02_wmma");
  CHECK(built.parent_of("05_warp_specialized") == "04_cp_async");
  // Every stage but the first of its kind builds on one of its kind listed before it; the
  // backward line starts at 09a_bwd_scalar.
  const std::vector<std::string> names = built.names();
  for (std::size_t i = 1; i < names.size(); ++i) {
    const StageList::Stage& s = built.stages[i];
    INFO(s.name);
    if (s.parent.empty()) {
      CHECK((s.name == "09a_bwd_scalar" && s.kind == StageKind::backward));
      continue;
    }
    const auto before_end = names.begin() + static_cast<std::ptrdiff_t>(i);
    const auto parent = std::find(names.begin(), before_end, s.parent);
    REQUIRE(parent != before_end);
    CHECK(built.stages[static_cast<std::size_t>(parent - names.begin())].kind == s.kind);
  }
  CHECK(built.parent_of("06a_mma_sync") == "04_cp_async");
  CHECK(built.parent_of("06b_registers") == "06a_mma_sync");
  CHECK(built.parent_of("06c_swizzle") == "06b_registers");
  CHECK(built.parent_of("sdpa_flash").empty());
  CHECK(built.baselines == std::vector<std::string>{"baseline_cublas"});

  const StageList l = parse_stage_list(R"({"stages": [
      {"name": "a", "parent": null}, {"name": "b", "parent": "a", "ancestors": ["a"]},
      {"name": "c", "parent": "a", "ancestors": ["a"]}],
      "baselines": [{"name": "base"}]})",
                                       "l.json");
  CHECK(l.names() == std::vector<std::string>{"a", "b", "c"});
  CHECK(l.parent_of("c") == "a");
  CHECK(l.ancestors_of("c") == std::vector<std::string>{"a"});
  CHECK(l.baselines == std::vector<std::string>{"base"});
  CHECK_THROWS_WITH(parse_stage_list("{", "l.json"), ContainsSubstring("l.json"));
  CHECK_THROWS_WITH(parse_stage_list(R"({"stagez": []})", "l.json"),
                    ContainsSubstring("l.json") && ContainsSubstring("stages"));
  CHECK_THROWS_WITH(load_stage_list(kFixtures / "no_such_list.json"),
                    ContainsSubstring("cannot read"));
}

TEST_CASE("a renamed stage's measurements and files are read under its MEASURED_AS name",
          "[stages][run]") {
  const StageList tree = parse_stage_list(R"({"stages": [
      {"name": "02_wmma", "parent": null, "dir": "stages/02_wmma"},
      {"name": "03x_renamed", "parent": "02_wmma", "ancestors": ["02_wmma"],
       "dir": "stages/03x_renamed", "measured_as": "03_online_softmax", "large_step": "why"}]})",
                                          "tree.json");
  CHECK(tree.stages[1].measured_as == "03_online_softmax");
  CHECK(tree.stages[1].dir == "stages/03x_renamed");
  CHECK(tree.stages[1].large_step == "why");
  const RunData run = load_run(kFixtures / "run_full", tree);
  CHECK(run.has_backend("03x_renamed"));
  CHECK_FALSE(run.has_backend("03_online_softmax"));
  CHECK(run.file_name("03x_renamed") == "03_online_softmax");
  CHECK(run.file_name("02_wmma") == "02_wmma");
  // Its timing table and its profile come from the old name's entries and
  // ncu_03_online_softmax.csv.
  CHECK_THAT(render(stage_table(run, "03x_renamed", DType::fp16), Format::markdown),
             ContainsSubstring("`03x_renamed`"));
  const Measured m = measure(run, "03x_renamed", "ncu:launch__registers_per_thread");
  REQUIRE(m.value);
  CHECK(*m.value == 128);
}

TEST_CASE("a stage is compared with its parent, not with the stage listed before it",
          "[stages][compare]") {
  // 09_branch is listed after 03_online_softmax but builds on 02_wmma.
  const StageList tree = parse_stage_list(R"({"stages": [
      {"name": "02_wmma", "parent": null},
      {"name": "03_online_softmax", "parent": "02_wmma", "ancestors": ["02_wmma"]},
      {"name": "09_branch", "parent": "02_wmma", "ancestors": ["02_wmma"]}]})",
                                          "tree.json");
  const RunData run = load_run(kFixtures / "run_full", tree);
  const Table s = stage_table(run, "09_branch", DType::fp16);
  // Its table compares with 02_wmma (it has no time of its own, hence "-"), never with 03.
  CHECK(cell(s, "D=64 S=512 (B=32, H=32)", "vs 02_wmma") == "-");
  for (const Text& h : s.header)
    CHECK(text(h) != "vs 03_online_softmax");
  const Table t = shape_table(run, shape(kA));
  CHECK(cell(t, "03_online_softmax", "vs parent stage") == "4.00x");
  // The rows follow the list: the stages, then the baselines the list names (none here), then
  // the SDPA backends and the other backends of the run.
  CHECK(run.backends().front() == "02_wmma");
  CHECK(run.backends()[2] == "09_branch");
  CHECK(run.backends()[3] == "sdpa_flash");
}

TEST_CASE(
    "a stage whose parent the run did not measure is compared with the nearest measured "
    "ancestor, and says so",
    "[stages][compare]") {
  // 03_online_softmax builds on 03a_unmeasured, which builds on 02_wmma; the run has no time for
  // 03a_unmeasured.
  const StageList tree = parse_stage_list(R"({"stages": [
      {"name": "02_wmma", "parent": null},
      {"name": "03a_unmeasured", "parent": "02_wmma", "ancestors": ["02_wmma"]},
      {"name": "03_online_softmax", "parent": "03a_unmeasured",
       "ancestors": ["03a_unmeasured", "02_wmma"]}]})",
                                          "tree.json");
  const RunData run = load_run(kFixtures / "run_full", tree);
  const RunData::ComparedParent cp = run.compared_parent("03_online_softmax");
  CHECK(cp.stage == "02_wmma");
  CHECK(cp.skipped == std::vector<std::string>{"03a_unmeasured"});
  CHECK(run.compared_parent("02_wmma").stage.empty());
  const RunData::ComparedParent direct = run.compared_parent("03a_unmeasured");
  CHECK(direct.stage == "02_wmma");
  CHECK(direct.skipped.empty());

  // The ratio is 02_wmma's (the same 4.00x as with 02_wmma as the parent), marked with a note
  // naming both stages.
  const Table t = shape_table(run, shape(kA));
  const std::string ratio = cell(t, "03_online_softmax", "vs parent stage");
  REQUIRE(ratio.starts_with("4.00x ("));
  const std::size_t note = std::stoul(ratio.substr(7)) - 1;  // "4.00x (k)": note k
  REQUIRE(note < t.notes.size());
  CHECK_THAT(text(t.notes[note]), ContainsSubstring("against 02_wmma") &&
                                      ContainsSubstring("nearest ancestor") &&
                                      ContainsSubstring("03a_unmeasured"));
  const Table s = stage_table(run, "03_online_softmax", DType::fp16);
  CHECK(cell(s, "D=64 S=512 (B=32, H=32)", "vs 02_wmma (1)") == "4.00x");
  REQUIRE_FALSE(s.notes.empty());
  CHECK_THAT(text(s.notes[0]), ContainsSubstring("03a_unmeasured"));
}

TEST_CASE("speedup, ratios and % of peak", "[compare]") {
  CHECK(speedup(4.0, 1.0) == 4.0);
  CHECK(speedup(0.5, 1.0) == 0.5);
  CHECK(percent_of_peak(2.5e14, 5e14) == 50.0);

  const RunData& run = full_run();
  const Table t = shape_table(run, shape(kA));
  CHECK(cell(t, "03_online_softmax", "median ms") == "1.00");
  CHECK(cell(t, "03_online_softmax", "p10-p90 ms") == "0.950-1.10");
  CHECK(cell(t, "03_online_softmax", "TFLOP/s") == "68.7");           // 2^36 / 1 ms
  CHECK(cell(t, "03_online_softmax", "% of peak") == "13.7%");        // of 500 TFLOP/s
  CHECK(cell(t, "03_online_softmax", "vs parent stage") == "4.00x");  // 4 ms / 1 ms
  CHECK(cell(t, "03_online_softmax", "vs sdpa_flash") == "0.500x");   // 0.5 ms / 1 ms
  CHECK(cell(t, "02_wmma", "vs sdpa_flash") == "0.125x");
  CHECK(cell(t, "baseline_cublas", "vs parent stage") == "-");  // baselines have none
  CHECK(cell(t, "sdpa_flash", "% of peak") == "27.5%");

  const Table s = stage_table(run, "03_online_softmax", DType::fp16);
  CHECK(cell(s, "D=64 S=512 (B=32, H=32)", "vs 02_wmma") == "4.00x");
  CHECK(cell(s, "D=64 S=512 (B=32, H=32)", "vs baseline_cublas") == "2.00x");
  CHECK(cell(s, "D=64 S=512 (B=1, H=8)", "vs baseline_cublas") == "0.800x");  // 0.2 / 0.25
  CHECK(cell(s, "D=64 S=512 (B=1, H=8)", "vs sdpa_flash") == "0.200x");
  // The fixture has no cuDNN backend: its column is there, each cell marked with the reason.
  CHECK(note_of(s, cell(s, "D=64 S=512 (B=32, H=32)", "vs sdpa_cudnn")) ==
        "no results for this backend in this run");
  // 00_scalar has no parent stage: no such column at all (shape, time, rate, % of peak, and
  // the ratios to sdpa_flash, sdpa_cudnn and cuBLAS).
  const Table first = stage_table(run, "00_scalar", DType::fp16);
  CHECK(first.header.size() == 7);
}

TEST_CASE("a time whose p10-p90 spread exceeds 15% of its median is marked noisy", "[compare]") {
  const RunData& run = full_run();
  // The fixture's sdpa_flash at kB: median 1.0 ms, p10 0.7, p90 1.1 (40%); every other time
  // spreads by 15% at most (exactly 15% is not noisy).
  const Measurement* flash = run.find("sdpa_flash", shape(kB));
  REQUIRE(flash);
  CHECK(flash->noisy());
  CHECK_FALSE(run.find("03_online_softmax", shape(kB))->noisy());  // 0.95-1.10 of 1.0 ms: 15%
  Measurement m = *flash;
  m.p10_ms = 0.86;  // 24% of the median
  m.p90_ms = 1.10;
  CHECK(m.noisy());
  m.p10_ms = 0.96;  // 14%
  CHECK_FALSE(m.noisy());
  m.p10_ms.reset();  // no spread recorded: nothing to say
  CHECK_FALSE(m.noisy());

  // The shape table marks the noisy time and every ratio that divides by it, and explains it.
  const Table t = shape_table(run, shape(kB));
  CHECK(cell(t, "sdpa_flash", "median ms") == "1.00 (noisy)");
  CHECK(cell(t, "03_online_softmax", "median ms") == "2.00");
  CHECK(cell(t, "03_online_softmax", "vs sdpa_flash") == "0.500x (noisy)");
  CHECK(cell(t, "03_online_softmax", "vs parent stage") == "4.00x");
  REQUIRE_FALSE(t.notes.empty());
  CHECK_THAT(text(t.notes.back()), StartsWith("noisy: ") && ContainsSubstring("15.0%"));
  // So do the stage's table (its ratio to the noisy reference) and the overview.
  const Table s = stage_table(run, "03_online_softmax", DType::fp16);
  CHECK(cell(s, "D=64 S=1024 (B=16, H=32)", "vs sdpa_flash") == "0.500x (noisy)");
  CHECK(cell(s, "D=64 S=512 (B=32, H=32)", "vs sdpa_flash") == "0.500x");
  const Table o = overview_table(run, shape_groups(run, DType::fp16)[0]);
  CHECK(cell(o, "sdpa_flash", "S=1024") == "1.00 / 137 (noisy)");
  CHECK(cell(o, "sdpa_flash", "S=512") == "0.500 / 137");
  // A table without a noisy time has no such note.
  for (const Text& n : shape_table(run, shape(kA)).notes)
    CHECK_THAT(text(n), !StartsWith("noisy"));
}

TEST_CASE("a missing SDPA backend is a marked cell with its reason", "[compare]") {
  const RunData& run = full_run();
  const auto groups = shape_groups(run, DType::fp16);
  const Table o = overview_table(run, groups[0]);
  CHECK(note_of(o, cell(o, "sdpa_cudnn", "S=512")) == "no results for this backend in this run");
  // A backend present at other shapes: not measured here.
  CHECK(note_of(o, cell(o, "sdpa_efficient", "S=1024")) == "not measured at this shape");

  const Table t = shape_table(run, shape(kA));
  CHECK(note_of(t, cell(t, "03_online_softmax", "vs sdpa_cudnn")) ==
        "sdpa_cudnn has no time at this shape");
  // Detail tables list only the backends the run holds; the overview marks the others.
  for (const auto& r : t.rows)
    CHECK(text(r[0]) != "sdpa_cudnn");
}

TEST_CASE("a failed stage shows its error and breaks only what depends on it", "[compare]") {
  const RunData& run = full_run();
  const std::string error =
      "failed: CUDA error an illegal memory access was encountered (700) at launcher.cu:88";
  const Table t = shape_table(run, shape(kC));
  CHECK(note_of(t, cell(t, "03_online_softmax", "median ms")) == error);
  CHECK(cell(t, "03_online_softmax", "TFLOP/s") == "-");
  CHECK(cell(t, "02_wmma", "median ms") == "6.00");  // the other rows keep their numbers

  const Table s = stage_table(run, "03_online_softmax", DType::fp16);
  CHECK(note_of(s, cell(s, "D=128 causal S=1024 (B=16, H=16)", "median ms")) == error);
  CHECK(cell(s, "D=128 causal S=1024 (B=16, H=16)", "vs 02_wmma") == "-");
  // Its child's chapter shows the failure in its parent's column.
  const Table next = stage_table(run, "04_cp_async", DType::fp16);
  CHECK(note_of(next, cell(next, "D=128 causal S=1024 (B=16, H=16)", "vs 03_online_softmax")) ==
        error);
  // An out-of-memory SDPA backend reads the same way.
  const Table b = shape_table(run, shape(kB));
  CHECK_THAT(note_of(b, cell(b, "sdpa_math", "median ms")), StartsWith("out of memory"));
}

TEST_CASE("a run without peaks.json marks % of peak and keeps the rest", "[compare]") {
  const RunData run = load_run(kFixtures / "run_no_peaks", build_stages());
  REQUIRE_FALSE(run.empty());
  const Table t = shape_table(run, shape(kA));
  CHECK(note_of(t, cell(t, "03_online_softmax", "% of peak")) ==
        "no measured peaks (peaks.json) in this run");
  CHECK(cell(t, "03_online_softmax", "TFLOP/s") == "68.7");  // from the shape, not the counter
  // A failed peak gives its error.
  const PeakLookup bf16 = lookup_gemm_peak(full_run(), DType::bf16);
  CHECK_FALSE(bf16.flops_per_second);
  CHECK(text(bf16.reason) == "peak_gemm/bf16 failed: cuBLAS error CUBLAS_STATUS_NOT_SUPPORTED");
  CHECK(*lookup_gemm_peak(full_run(), DType::fp16).flops_per_second == 5e14);
}

TEST_CASE("an empty or missing run folder is reported, not thrown", "[run]") {
  const RunData missing = load_run(kFixtures / "no_such_run", build_stages());
  CHECK(missing.empty());
  CHECK_THAT(missing.missing_reason, ContainsSubstring("does not exist"));

  TempDir empty;
  const RunData none = load_run(empty.path, build_stages());
  CHECK(none.empty());
  CHECK_THAT(none.missing_reason, ContainsSubstring("no benchmark results"));

  // book/data: CURRENT names the run.
  const RunData current = load_run(kFixtures / "data_root", build_stages());
  REQUIRE_FALSE(current.empty());
  CHECK(current.label == "gpu-x/run-1");
  CHECK(current.measurements.size() == 1);

  TempDir dangling;
  dangling.write("CURRENT", "gpu-y/run-9\n");
  const RunData bad = load_run(dangling.path, build_stages());
  CHECK(bad.empty());
  CHECK_THAT(bad.missing_reason, ContainsSubstring("names gpu-y/run-9"));

  // A broken file is an error naming the file.
  CHECK_THROWS_WITH(load_run(kFixtures / "run_malformed", build_stages()),
                    ContainsSubstring("bench_02_wmma.json"));
}

TEST_CASE("Markdown tables have the shape Doxygen accepts", "[markdown]") {
  const RunData& run = full_run();
  const std::string md =
      render(overview_table(run, shape_groups(run, DType::fp16)[0]), Format::markdown);
  std::istringstream in(md);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);)
    lines.push_back(l);
  REQUIRE(lines.size() > 4);
  CHECK(std::regex_match(lines[0], std::regex(R"(<b>.+</b>)")));  // caption paragraph
  CHECK(lines[1].empty());                                        // a blank line before the table
  const std::size_t columns = 3;                                  // backend, S=512, S=1024
  CHECK(std::regex_match(lines[3], std::regex(R"(\|:---\|(---:\|){2})")));
  std::size_t row = 2;
  for (; row < lines.size() && !lines[row].empty(); ++row) {
    // Every row has one cell per column: count the pipes outside code spans.
    std::size_t pipes = 0;
    bool in_code = false;
    for (std::size_t i = 0; i < lines[row].size(); ++i) {
      const char c = lines[row][i];
      if (c == '`') in_code = !in_code;
      if (c == '|' && !in_code && (i == 0 || lines[row][i - 1] != '\\')) ++pipes;
    }
    CHECK(pipes == columns + 1);
  }
  // Header, separator, one row per known forward backend: the build's forward stages and
  // baselines, and SDPA's forward (the backward line has tables of its own).
  const std::size_t forward_stages = static_cast<std::size_t>(
      std::count_if(run.stages.stages.begin(), run.stages.stages.end(),
                    [](const StageList::Stage& s) { return s.kind == StageKind::forward; }));
  CHECK(forward_stages < run.stages.stages.size());  // the tree has backward stages too
  const std::size_t backends =
      forward_stages + run.stages.baselines.size() + std::size(kSdpaBackends);
  CHECK(row - 2 == 2 + backends);
  REQUIRE(row + 1 < lines.size());
  CHECK(lines[row + 1] == "- (1) no results for this backend in this run");

  // Text from files stays literal: escaped as plain text, verbatim in code spans.
  CHECK(render(plain("50% of a_b <x> | @y #z"), Format::markdown) ==
        "50\\% of a\\_b \\<x\\> \\| \\@y \\#z");
  CHECK(render(code("a|b `c` %d 5%"), Format::markdown) == "`a/b 'c' %%d 5%`");
  // Nothing in the whole report is raw HTML or a Doxygen command, but the captions' <b> (bold
  // that Doxygen renders even when it opens with a code span).
  const std::string report = comparison_report(run, DType::fp16, Format::markdown);
  const std::string outside_code = std::regex_replace(
      std::regex_replace(report, std::regex("`[^`\n]*`"), ""), std::regex("</?b>"), "");
  CHECK_FALSE(std::regex_search(outside_code, std::regex(R"((^|[^\\])[<>@])")));
}

TEST_CASE("Nsight Compute CSV: base units, several kernels", "[ncu]") {
  const NcuProfile p = load_ncu_csv(kFixtures / "run_full" / "ncu_02_wmma.csv");
  REQUIRE(p.launches.size() == 4);  // a warm-up launch of scores_wmma, then the pass
  const auto pass = profiled_pass(p);
  REQUIRE(pass.size() == 3);
  CHECK(pass[0].id == "1");  // the later launch of scores_wmma
  CHECK(short_kernel_names(pass) ==
        std::vector<std::string>{"scores_wmma", "softmax_rows", "pv_wmma"});
  // Names as ncu prints the stages' kernels: namespaces, an anonymous one, and two launches of one
  // template, which keep their arguments so the columns differ.
  std::vector<KernelLaunch> named(4);
  named[0].name = "void scalar::<unnamed>::scores_kernel<__half, 0>(const T1 *, scalar::Shape)";
  named[1].name = "void row_softmax_kernel<float, 0>(const float *, T1 *, RowSoftmaxShape)";
  named[2].name = "void a::<unnamed>::pv<__half, 0>(const float *)";
  named[3].name = "void a::<unnamed>::pv<__half, 1>(const float *)";
  CHECK(short_kernel_names(named) == std::vector<std::string>{"scores_kernel", "row_softmax_kernel",
                                                              "a::pv<__half, 0>",
                                                              "a::pv<__half, 1>"});
  auto value = [&](const char* m) { return *stage_value(pass, m).value; };
  // 300 us + 100 us + 100 us
  CHECK(value("gpu__time_duration.sum") == Approx(500e3));
  CHECK(stage_value(pass, "gpu__time_duration.sum").unit == "ns");
  // 200 MB + 400 MB + 200 MB
  CHECK(value("dram__bytes_read.sum") == Approx(800e6));
  // Rates are weighted by duration: (60*300 + 90*100 + 30*100) / 500
  CHECK(value("dram__throughput.avg.pct_of_peak_sustained_elapsed") == Approx(60.0));
  CHECK(value("smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio") ==
        Approx(3.2));
  CHECK(value("launch__registers_per_thread") == 64);  // the largest
  CHECK(value("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum") == 1.5e6);
  CHECK_FALSE(stage_value(pass, "dram__bytes_write.sum").value);

  std::istringstream garbage("hello\nworld\n");
  CHECK_THROWS_WITH(parse_ncu_csv(garbage, "g.csv"),
                    ContainsSubstring("no Nsight Compute CSV header"));
  std::istringstream short_row(
      "\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n\"0\",\"k\"\n");
  CHECK_THROWS_WITH(parse_ncu_csv(short_row, "s.csv"),
                    ContainsSubstring("s.csv:2: expected 5 fields"));
  std::istringstream odd(
      "\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n"
      "\"0\",\"k\",\"a__c.sum\",\"\",\"n/a\"\n");
  const NcuProfile o = parse_ncu_csv(odd, "o.csv");
  CHECK_FALSE(o.launches[0].metrics.at("a__c.sum").value);
}

TEST_CASE("ncu diff: percentages change in points, counters relatively", "[ncu]") {
  const auto metrics = load_metric_set(kBench / "ncu-metrics.txt");
  const Table t = ncu_diff_table(load_ncu_csv(kFixtures / "run_full" / "ncu_02_wmma.csv"),
                                 load_ncu_csv(kFixtures / "run_full" / "ncu_03_online_softmax.csv"),
                                 metrics, "02_wmma", "03_online_softmax");
  CHECK(t.rows.size() == metrics.size());
  CHECK(cell(t, "Kernel duration", "02_wmma") == "500 us");
  CHECK(cell(t, "Kernel duration", "03_online_softmax") == "250 us");
  CHECK(cell(t, "Kernel duration", "change") == "-50.0%");
  CHECK(cell(t, "DRAM bytes read", "change") == "-87.5%");
  CHECK(cell(t, "DRAM throughput (% of peak)", "change") == "-15.0 pt");
  CHECK(cell(t, "Tensor pipe: mma.sync/WMMA, and wgmma on Hopper (% of peak)", "change") ==
        "+35.0 pt");
  CHECK(cell(t, "Registers per thread", "change") == "+64");
  CHECK(cell(t, "Shared-memory bank conflicts, loads", "change") == "-83.3%");
  CHECK(cell(t, "DRAM bytes written", "change") == "-");
  CHECK(note_of(t, cell(t, "DRAM bytes written", "02_wmma")) == "not in the profile");
  CHECK(note_of(t, cell(t, "wgmma instructions (Hopper only)", "02_wmma")) ==
        "optional metric, not available on the profiled GPU");

  CHECK(format_change({1.0, "%"}, {1.0, "%"}) == "=");
  CHECK(format_change({0.0, "byte"}, {5.0, "byte"}) == "from 0");
  CHECK(format_change({std::nullopt, "byte"}, {5.0, "byte"}) == "-");
}

TEST_CASE("the metric set file lists the project's fixed metrics", "[ncu]") {
  const auto metrics = load_metric_set(kBench / "ncu-metrics.txt");
  std::vector<std::string> names;
  for (const MetricSpec& m : metrics) {
    names.push_back(m.name);
    CHECK_FALSE(m.label.empty());
    // Optional: the Hopper pipe, and the executed-instruction counts (issue 22, item 5).
    CHECK(m.optional == (m.name.find("gmma") != std::string::npos ||
                         m.name.find("inst_executed_op_") != std::string::npos ||
                         m.name == "sm__inst_executed_pipe_tensor_op_hmma.sum"));
  }
  std::vector<std::string> expected = {
      "gpu__time_duration.sum",
      "dram__throughput.avg.pct_of_peak_sustained_elapsed",
      "dram__bytes_read.sum",
      "dram__bytes_write.sum",
      "l1tex__t_bytes.sum",
      "lts__t_bytes.sum",
      "sm__throughput.avg.pct_of_peak_sustained_elapsed",
      "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
      "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
      "sm__inst_executed_pipe_tensor_op_gmma.sum",
      "sm__warps_active.avg.pct_of_peak_sustained_active",
      "launch__registers_per_thread",
      "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
      "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
      "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
      "sm__inst_executed_pipe_tensor_op_hmma.sum",
      "smsp__inst_executed_op_ldsm.sum",
      "smsp__inst_executed_op_ldgsts.sum",
      "sm__sass_inst_executed_op_shared_ld.sum",
      "sm__sass_inst_executed_op_shared_st.sum",
      "sm__sass_inst_executed_op_global_ld.sum",
      "sm__sass_inst_executed_op_global_st.sum"};
  for (const char* r : {"long_scoreboard", "short_scoreboard", "barrier", "mio_throttle",
                        "math_pipe_throttle", "wait", "not_selected", "lg_throttle"}) {
    expected.push_back(std::string("smsp__average_warps_issue_stalled_") + r +
                       "_per_issue_active.ratio");
  }
  std::sort(names.begin(), names.end());
  std::sort(expected.begin(), expected.end());
  CHECK(names == expected);

  auto parse = [](const std::string& s) {
    std::istringstream in(s);
    return parse_metric_set(in, "m.txt");
  };
  CHECK(parse("# c\n\na__b.sum optional  # label\n")[0].optional);
  CHECK_THROWS_WITH(parse("a__b.sum\n"), ContainsSubstring("m.txt:1"));             // no label
  CHECK_THROWS_WITH(parse("a__b.sum maybe # l\n"), ContainsSubstring("expected"));  // bad word
}

TEST_CASE("numbers print with three significant digits", "[format]") {
  CHECK(fmt_sig(0.00412) == "0.00412");
  CHECK(fmt_sig(41.23) == "41.2");
  CHECK(fmt_sig(9.996) == "10.0");
  CHECK(fmt_sig(1234.6) == "1235");
  CHECK(fmt_sig(0) == "0");
  CHECK(fmt_ratio(1.0) == "1.00x");
  CHECK(fmt_percent(13.74) == "13.7%");
  CHECK(fmt_bytes(8e8) == "800 MB");
  CHECK(fmt_ns(5e5) == "500 us");
  CHECK(fmt_ns(2.5e6) == "2.50 ms");
}

namespace {

// An SVG file as gnuplot's svg terminal writes it, with text no smaller than the book's 11 px.
bool is_svg(const fs::path& p) {
  const std::string s = read(p);
  if (s.rfind("<?xml", 0) != 0 || s.find("<svg") == std::string::npos) return false;
  static const std::regex size(R"re(font-size="([0-9.]+)")re");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), size); it != std::sregex_iterator(); ++it)
    if (std::stod((*it)[1]) < 11.0) return false;
  return true;
}

}  // namespace

TEST_CASE("the book gets every fragment, as placeholders, without a run", "[book][gnuplot]") {
  TempDir out;
  const BookResult r = write_book(kFixtures / "no_such_run", out.path, build_stages());
  CHECK_THAT(r.missing_reason, ContainsSubstring("does not exist"));
  const auto& written = r.written;
  std::vector<std::string> expected = {
      "table_all.md",    "provenance.md",           "emu_compare.md",     "plot_stages.dat",
      "plot_stages.svg", "plot_seqlen.dat",         "plot_seqlen.svg",    "stage_table.md",
      "stage_pages.md",  "stage_pages_backward.md", "contents_stages.md", "reading_map.md"};
  for (const std::string& s : build_stages().names()) {
    for (const char* kind :
         {"table_", "ncu_", "ncu_diff_", "verdict_", "emu_", "step_", "status_"}) {
      expected.push_back(kind + std::string(s) + ".md");
    }
  }
  // Part II's list holds the stages without a PART; each other part has its own list.
  std::string last_in_part_2;
  for (const StageList::Stage& s : build_stages().stages) {
    const std::string pages = "stage_pages_" + s.part + ".md";
    if (s.part.empty()) {
      last_in_part_2 = s.anchor;
    } else if (std::find(expected.begin(), expected.end(), pages) == expected.end()) {
      expected.push_back(pages);
    }
  }
  CHECK(written.size() == expected.size());
  for (const std::string& f : expected) {
    INFO(f);
    REQUIRE(fs::exists(out.path / f));
    if (f.ends_with(".svg")) {
      CHECK(is_svg(out.path / f));
    } else if (f.ends_with(".dat")) {
      CHECK_THAT(read(out.path / f), StartsWith("# No measurement committed yet") &&
                                         ContainsSubstring("bench/gpu-check.sh"));
    } else if (f.starts_with("step_")) {  // from the sources: there with or without a run
      CHECK_THAT(read(out.path / f), StartsWith("Step size"));
    } else if (f.starts_with("status_")) {
      CHECK_THAT(read(out.path / f), ContainsSubstring("not yet measured on a GPU"));
    } else if (f == "stage_pages.md") {  // the tree's order, one \subpage per chapter
      CHECK_THAT(read(out.path / f), StartsWith("1. \\subpage stage00\n2. \\subpage stage01\n") &&
                                         ContainsSubstring(". \\subpage stage06b\n") &&
                                         EndsWith(". \\subpage " + last_in_part_2 + "\n"));
    } else if (f == "contents_stages.md") {  // every chapter of the tree, under its part
      const std::string text = read(out.path / f);
      CHECK_THAT(text, StartsWith("<b>\\ref part2</b>\n\n- \\ref stage00\n") &&
                           ContainsSubstring("<b>\\ref part_backward</b>"));
      for (const StageList::Stage& s : build_stages().stages) {
        INFO(s.name);
        CHECK_THAT(text, ContainsSubstring("- \\ref " + s.anchor + "\n"));
      }
    } else if (f ==
               "reading_map.md") {  // a row per stage of the tree; without a run, none measured
      const std::string text = read(out.path / f);
      CHECK_THAT(text, ContainsSubstring(std::to_string(build_stages().stages.size()) +
                                         " predicted only"));
      for (const StageList::Stage& s : build_stages().stages) {
        INFO(s.name);
        CHECK_THAT(text, ContainsSubstring("| \\ref " + s.anchor + " \"" + s.number + "\" "));
      }
    } else if (f.starts_with("stage_pages_")) {  // another part's: its own numbering from 1
      CHECK_THAT(read(out.path / f), StartsWith("1. \\subpage stage"));
    } else if (f == "stage_table.md") {
      CHECK_THAT(read(out.path / f),
                 ContainsSubstring("| `06c_swizzle` | `06b_registers` | \\ref stage06c | the XOR "
                                   "swizzle in place of padded shared-memory rows") &&
                     ContainsSubstring("| not yet measured on a GPU"));
    } else if (f != "ncu_diff_00_scalar.md" && f != "ncu_diff_09a_bwd_scalar.md") {  // roots
      CHECK_THAT(read(out.path / f), ContainsSubstring("No measurement committed yet") &&
                                         ContainsSubstring("`bench/gpu-check.sh`"));
    }
  }
  CHECK_THAT(read(out.path / "ncu_diff_00_scalar.md"), ContainsSubstring("is the first stage"));
  CHECK_THAT(read(out.path / "ncu_diff_09a_bwd_scalar.md"),
             ContainsSubstring("is the first stage of its line"));
}

TEST_CASE("without a run, the book still judges what the build can: its ptxas reports",
          "[book][gnuplot][ptxas]") {
  // A planted report for every stage whose predictions the build judges: one kernel whose name
  // holds every kernel selection of those lines, with 300 registers (above any count a header can
  // predict: 255 is the most a thread gets) and 16 bytes of spills. Every ptxas line must then
  // read as a miss, in a fragment written with no run at all.
  TempDir reports, out;
  const fs::path root = kBench.parent_path();
  std::map<std::string, int> ptxas_lines;
  for (const StageList::Stage& s : build_stages().stages) {
    std::string name = "void planted_kernel<";
    for (const Prediction& p : load_predictions(root / s.dir / "predictions.csv")) {
      if (!judged_by_build(p.measure)) continue;
      const bool ratio = p.measure.starts_with("ptxas_ratio:");
      ptxas_lines[s.name] += ratio ? 0 : 1;
      std::size_t at = 0;  // the selection: what follows the arch
      for (int colons = ratio ? 4 : 3; colons > 0; --colons)
        at = p.measure.find(':', at) + 1;
      name += p.measure.substr(at) + "|";
    }
    reports.write(s.name + ".ptxas.txt",
                  "ptxas info    : Compiling entry function '" + name +
                      ">()' for 'sm_80'\n"
                      "ptxas info    : Function properties for " +
                      name +
                      ">()\n"
                      "    0 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
                      "ptxas info    : Used 300 registers, used 1 barriers\n");
  }
  REQUIRE_FALSE(ptxas_lines.empty());
  const BookResult r =
      write_book(kFixtures / "no_such_run", out.path, build_stages(), {}, reports.path);
  REQUIRE_FALSE(r.missing_reason.empty());
  for (const auto& [stage, n] : ptxas_lines) {
    INFO(stage);
    const std::string v = read(out.path / ("verdict_" + stage + ".md"));
    CHECK_THAT(v, ContainsSubstring("No measurement committed yet") &&
                      ContainsSubstring("against the ptxas report of the build"));
    int misses = 0;
    for (std::size_t at = 0; (at = v.find("| above the range", at)) != std::string::npos; ++at)
      ++misses;
    CHECK(misses >= n);
    CHECK(v.find("this build has no") == std::string::npos);
  }
}

TEST_CASE("the book from a run", "[book][gnuplot]") {
  TempDir out;
  write_book(kFixtures / "run_full", out.path, build_stages());
  CHECK_THAT(
      read(out.path / "table_03_online_softmax.md"),
      ContainsSubstring("<b>`03_online_softmax`, D = 64, non-causal, fp16: H = 32, B·S = 16384 "
                        "tokens</b>\n\n| S (B) |") &&
          ContainsSubstring("| S=512 (32) | 1.00 | 68.7 | 13.7\\% | 4.00x |") &&
          ContainsSubstring("<b>`03_online_softmax`, D = 64, non-causal, fp16: H = 8, B·S = 512 "
                            "tokens</b>\n\n| S (B) |") &&
          ContainsSubstring("| S=512 (1) |"));
  CHECK_THAT(read(out.path / "table_all.md"),
             ContainsSubstring("<b>`b32_h32_sq512_skv512_d64_fp16`</b>"));
  CHECK_THAT(read(out.path / "ncu_02_wmma.md"), ContainsSubstring("`scores_wmma`") &&
                                                    ContainsSubstring("| 500 us |") &&
                                                    ContainsSubstring("--batch 32 --heads 32"));
  CHECK_THAT(read(out.path / "ncu_diff_03_online_softmax.md"),
             ContainsSubstring("| -50.0\\% |") && ContainsSubstring("| +35.0 pt |") &&
                 ContainsSubstring("`02_wmma` launches 3 kernels per forward pass"));
  CHECK_THAT(read(out.path / "ncu_diff_02_wmma.md"), ContainsSubstring("no `ncu_01_tiled.csv`"));
  CHECK_THAT(read(out.path / "ncu_05_warp_specialized.md"),
             ContainsSubstring("no Nsight Compute profile of `05_warp_specialized`"));
  CHECK_THAT(read(out.path / "provenance.md"),
             ContainsSubstring("| `peak_gemm/fp16` | 500 TFLOP/s |") &&
                 ContainsSubstring("Fixture GPU, 1000 MHz"));
  // The plot data: TFLOP/s with four digits, '-' where a backend has no time.
  CHECK_THAT(read(out.path / "plot_stages.dat"),
             ContainsSubstring("backend \"S=512\" \"S=1024\"\n") &&
                 ContainsSubstring("\n03_online_softmax 68.72 68.72\n") &&
                 ContainsSubstring("\nsdpa_efficient 85.90 -\n"));
  CHECK_THAT(
      read(out.path / "plot_seqlen.dat"),
      ContainsSubstring("Sq baseline_cublas sdpa_flash sdpa_efficient sdpa_math\n512 34.36"));
  CHECK(is_svg(out.path / "plot_stages.svg"));
  CHECK(is_svg(out.path / "plot_seqlen.svg"));
}

int main(int argc, char** argv) {
  return flashsteps::test::run_catch_session(argc, argv);
}

TEST_CASE("README's stage table is the tree's, between its markers", "[stages][status]") {
  const std::string md = render(stage_tree_table(build_stages()), Format::markdown);
  // From stages/06a_mma_sync/stage.cmake and bench/baselines/cublas/stage.cmake.
  CHECK_THAT(md, ContainsSubstring("| 06a | `stages/06a_mma_sync` | 04 | `mma.sync` and "
                                   "`ldmatrix` in place of WMMA"));
  CHECK_THAT(md, ContainsSubstring("| — | `bench/baselines/cublas` | — | what a practitioner"));
  const std::string readme =
      "# x\n" + std::string(kStagesBegin) + "\nSTALE ROW\n" + std::string(kStagesEnd) + "\n";
  const std::string out = replace_stages_block(readme, build_stages());
  CHECK_THAT(out, ContainsSubstring(md) && !ContainsSubstring("STALE ROW"));
  CHECK(replace_stages_block(out, build_stages()) == out);
  CHECK_THROWS_WITH(replace_stages_block("# no markers\n", build_stages()),
                    ContainsSubstring("has no stage table"));
}

TEST_CASE("decode shapes: a table of their own, in TB/s and % of the copy peak", "[compare]") {
  // A run with one canonical shape and two decode shapes (Sq 1, GQA), timed by a stage and by
  // SDPA, and the copy peak. The rates are worked out here from the sizes, not by the tool.
  RunData run;
  auto add = [&](const std::string& backend, const Problem& p, double ms) {
    Measurement m;
    m.backend = backend;
    m.problem = p;
    m.median_ms = ms;
    run.measurements.push_back(m);
  };
  Problem canonical;
  canonical.batch = 16, canonical.heads = 16, canonical.seq_q = canonical.seq_kv = 1024;
  canonical.head_dim = 128;
  Problem decode;
  decode.batch = 8, decode.heads = 32, decode.heads_kv = 8, decode.seq_q = 1;
  decode.seq_kv = 8192, decode.head_dim = 128;
  Problem mqa = decode;
  mqa.heads = 8, mqa.heads_kv = 1;
  add("10a_kv_cache", canonical, 1.0);
  add("10a_kv_cache", decode, 0.25);
  add("sdpa_flash", decode, 0.5);
  run.has_peaks_file = true;
  run.peaks["peak_copy/d2d"].per_second = 3.0e12;

  // Every decode shape leaves the FLOP/s groups; the canonical one stays.
  CHECK(decode_shape(decode));
  CHECK(decode_shape(mqa));
  CHECK_FALSE(decode_shape(canonical));
  const auto groups = shape_groups(run, DType::fp16);
  REQUIRE(groups.size() == 1);
  CHECK(groups[0].shapes.size() == 1);

  const Table t = decode_table(run, DType::fp16);
  REQUIRE(t.rows.size() == 1);  // the decode shape; the MQA one was not timed
  // shape, then the backends in RunData::backends()' order: SDPA's (this run names no stage
  // tree), then the others.
  REQUIRE(t.header.size() == 3);
  CHECK(render(t.header[1], Format::console) == "sdpa_flash");
  CHECK(render(t.header[2], Format::console) == "10a_kv_cache");
  // Bytes: K and V 2 * 8 * 8 * 8192 * 128 * 2 = 268,435,456; Q and O 2 * 8 * 32 * 128 * 2 =
  // 131,072; the LSE 8 * 32 * 4 = 1,024. In 0.25 ms: 1.07428 TB/s, 35.8% of 3 TB/s; in 0.5 ms,
  // half.
  CHECK(render(t.rows[0][0], Format::console) == "B=8 H=32/8 Sq=1 Skv=8192 D=128");
  CHECK(render(t.rows[0][2], Format::console) == "1.07 (35.8%)");
  CHECK(render(t.rows[0][1], Format::console) == "0.537 (17.9%)");
  const std::string report = comparison_report(run, DType::fp16, Format::console);
  CHECK(report.find("Decode, fp16: TB/s") != std::string::npos);
  CHECK(report.find("b8_h32_sq1_skv8192") == std::string::npos);  // no FLOP/s table of it

  // Without a copy peak: the rates alone, and the caption says why.
  run.peaks.clear();
  const Table bare = decode_table(run, DType::fp16);
  CHECK(render(bare.rows[0][2], Format::console) == "1.07");
  CHECK(render(bare.caption, Format::console).find("no copy peak") != std::string::npos);
  CHECK(decode_table(run, DType::bf16).rows.empty());

  // The same shape with its cache in pages of 16 keys: a row of its own after the contiguous
  // one, said so, at the same bytes (the table's 4 bytes per page are not counted).
  Problem paged = decode;
  paged.page_size = 16;
  add("10d_paged_kv", paged, 0.5);
  const Table pages = decode_table(run, DType::fp16);
  REQUIRE(pages.rows.size() == 2);
  REQUIRE(pages.header.size() == 4);
  CHECK(render(pages.header[3], Format::console) == "10d_paged_kv");
  CHECK(render(pages.rows[0][0], Format::console) == "B=8 H=32/8 Sq=1 Skv=8192 D=128");
  CHECK(render(pages.rows[1][0], Format::console) == "B=8 H=32/8 Sq=1 Skv=8192 D=128 pages of 16");
  CHECK(render(pages.rows[1][3], Format::console) == "0.537");
  CHECK(render(pages.rows[1][1], Format::console).find("n/a") == 0);  // SDPA: not timed
}

TEST_CASE("the backward line has tables of its own, against SDPA's backward", "[compare]") {
  // A forward stage and a backward stage timed at one shape, with SDPA's forward and backward.
  RunData run;
  run.stages = build_stages();
  Problem p;
  p.batch = 16, p.heads = 16, p.seq_q = p.seq_kv = 1024, p.head_dim = 128;
  auto add = [&](const std::string& backend, double ms) {
    Measurement m;
    m.backend = backend;
    m.problem = p;
    m.median_ms = ms;
    m.kind = run.kind_of(backend);
    run.measurements.push_back(m);
  };
  add("06c_swizzle", 1.0);
  add("sdpa_flash", 0.5);
  add("09c_bwd_mma", 4.0);
  add("sdpa_bwd_flash", 2.0);
  REQUIRE(run.kind_of("09c_bwd_mma") == StageKind::backward);
  const auto rows = [](const Table& t) {
    std::vector<std::string> out;
    for (const auto& r : t.rows)
      out.push_back(render(r[0], Format::console));
    return out;
  };
  auto has = [](const std::vector<std::string>& v, const char* s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  const auto groups = shape_groups(run, DType::fp16);
  REQUIRE(groups.size() == 1);
  // The forward tables: no backward row ("n/a" rows of stages that time something else).
  const auto fwd = rows(overview_table(run, groups[0]));
  CHECK(has(fwd, "06c_swizzle"));
  CHECK(has(fwd, "sdpa_flash"));
  CHECK_FALSE(has(fwd, "09c_bwd_mma"));
  CHECK_FALSE(has(fwd, "sdpa_bwd_flash"));
  CHECK_FALSE(has(rows(shape_table(run, p)), "09c_bwd_mma"));
  // The backward tables: the backward stages, then SDPA's backward backends in SDPA's order.
  const Table bwd = overview_table(run, groups[0], StageKind::backward);
  const auto b = rows(bwd);
  CHECK_FALSE(has(b, "06c_swizzle"));
  CHECK_FALSE(has(b, "sdpa_flash"));
  REQUIRE(has(b, "09c_bwd_mma"));
  const auto at = [&](const char* s) { return std::find(b.begin(), b.end(), s) - b.begin(); };
  CHECK(at("09a_bwd_scalar") < at("09c_bwd_mma"));
  CHECK(at("09c_bwd_mma") < at("sdpa_bwd_flash"));
  CHECK(at("sdpa_bwd_flash") < at("sdpa_bwd_cudnn"));
  CHECK(render(bwd.caption, Format::console).rfind("Backward, ", 0) == 0);
  // Its shape table compares 09c with SDPA's flash backward: 2 ms / 4 ms = 0.500x.
  const Table st = shape_table(run, p, StageKind::backward);
  CHECK(render(st.header[6], Format::console) == "vs sdpa_bwd_flash");
  bool found = false;
  for (const auto& r : st.rows) {
    if (render(r[0], Format::console) != "09c_bwd_mma") continue;
    found = true;
    CHECK(render(r[6], Format::console) == "0.500x");
  }
  CHECK(found);
  const std::string report = comparison_report(run, DType::fp16, Format::console);
  CHECK(report.find("Backward, D = 128") != std::string::npos);
  // A run without backward entries prints no backward table.
  run.measurements.erase(run.measurements.begin() + 2, run.measurements.end());
  CHECK(comparison_report(run, DType::fp16, Format::console).find("Backward,") ==
        std::string::npos);
}
