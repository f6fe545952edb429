// tests/table/test_emulated.cpp — the emulator's counts against a profile (fs_table/table.hpp,
// emulated counts) and as a verdict's evidence, on tests/table/fixtures/run_emu (README.md there).
#include <sstream>

#include "flashsteps_catch.hpp"
#include "fs_table/table.hpp"

#include "build_stages.hpp"
#include "temp_dir.hpp"

namespace {

using namespace flashsteps::table;
using Catch::Approx;
using Catch::Matchers::ContainsSubstring;

const std::filesystem::path kRun = std::filesystem::path(FS_TABLE_FIXTURES) / "run_emu";

std::vector<EmuBand> bands(const std::string& text) {
  std::istringstream in(text);
  return parse_emu_bands(in, "bands.txt");
}

std::vector<std::string> cells(const Table& t, std::size_t r) {
  std::vector<std::string> out;
  for (const Text& c : t.rows[r])
    out.push_back(render(c, Format::console));
  return out;
}

}  // namespace

TEST_CASE("emu-bands.txt: the most specific band applies; a malformed line is refused",
          "[emulated]") {
  const auto b = bands(
      "# comment\n"
      "* * m 0.9 1.1  # any stage\n"
      "03_online_softmax * m 0.5 2  # the stage\n"
      "03_online_softmax k m 1 1  # the kernel\n");
  REQUIRE(b.size() == 3);
  CHECK(find_emu_band(b, "03_online_softmax", "k", "m")->reason == "the kernel");
  CHECK(find_emu_band(b, "03_online_softmax", "other", "m")->reason == "the stage");
  CHECK(find_emu_band(b, "04_cp_async", "k", "m")->reason == "any stage");
  CHECK(find_emu_band(b, "04_cp_async", "k", "other") == nullptr);
  CHECK_THROWS_WITH(bands("* * m 2 1  # low above high\n"), ContainsSubstring("bands.txt:1"));
  CHECK_THROWS_WITH(bands("* * m 1 2\n"), ContainsSubstring("reason"));
}

TEST_CASE("emulated against measured: ratio per metric, and what leaves its band", "[emulated]") {
  const auto b = bands(
      "* * l1tex__data_pipe_lsu_wavefronts_mem_shared.sum 0.95 1.05  # within\n"
      "* * lts__t_bytes.sum 0.5 1.4  # too narrow for 1.5\n");
  const EmuComparison c = emu_comparison(kRun, kRun / kEmulatedDir, build_stages().names(), b);
  // Stage 03 only (07 has no profile): three metrics, the kernels matched by base name.
  REQUIRE(c.table.rows.size() == 3);
  CHECK(cells(c.table, 0) ==
        std::vector<std::string>{"03_online_softmax", "fused_attention_kernel",
                                 "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", "1000", "1020",
                                 "1.020", "0.95 .. 1.05", "within (within)"});
  CHECK(cells(c.table, 1)[5] == "both 0");
  CHECK(cells(c.table, 1)[7] == "no band");
  CHECK(cells(c.table, 2)[5] == "1.500");
  CHECK(cells(c.table, 2)[7] == "OUTSIDE (too narrow for 1.5)");
  REQUIRE(c.failures.size() == 2);
  CHECK_THAT(c.failures[0], ContainsSubstring("no band"));
  CHECK_THAT(c.failures[1], ContainsSubstring("ratio 1.500 outside 0.5 .. 1.4"));
}

TEST_CASE("an emulated count is evidence for a counting prediction, marked as such",
          "[emulated][verdict]") {
  const RunData run = load_run(kRun, build_stages());
  // emu: reads the emulated count even where a profile has the metric.
  const Measured e =
      measure(run, "03_online_softmax", "emu:l1tex__data_pipe_lsu_wavefronts_mem_shared.sum");
  REQUIRE(e.value);
  CHECK(*e.value == 1020);
  CHECK(e.emulated);
  // ncu: takes the profile where there is one...
  const Measured m =
      measure(run, "03_online_softmax", "ncu:l1tex__data_pipe_lsu_wavefronts_mem_shared.sum");
  REQUIRE(m.value);
  CHECK(*m.value == 1000);
  CHECK_FALSE(m.emulated);
  // ...and the emulated count where the stage has no profile, marked in the verdict table.
  Prediction p;
  p.measure = "ncu:l1tex__data_pipe_lsu_wavefronts_mem_shared.sum";
  p.low = 400;
  p.high = 600;
  p.claim = "about 500 wavefronts";
  const Table t = verdict_table(run, "07_hopper", {p});
  REQUIRE(t.rows.size() == 1);
  REQUIRE(cells(t, 0).size() == 4);  // claim (note), predicted range, measured, verdict
  CHECK(cells(t, 0)[2] == "500 (emulated count)");
  CHECK(cells(t, 0)[3] == "as predicted (emulated count)");
  // Neither a profile nor an emulation: the profile's absence is the reason.
  const Measured none = measure(run, "06_registers", "ncu:lts__t_bytes.sum");
  CHECK_FALSE(none.value);
  CHECK_THAT(none.reason, ContainsSubstring("ncu_06_registers.csv"));
}

TEST_CASE("a stage with emulated counts and no profile is listed as emulated only, with its shape",
          "[emulated]") {
  const auto b = bands("* * l1tex__data_pipe_lsu_wavefronts_mem_shared.sum 0.95 1.05  # within\n");
  const EmuComparison c =
      emu_comparison(kRun, kRun / kEmulatedDir, {"03_online_softmax", "07_hopper"}, b);
  // No row of 07's: nothing measured to compare with, so no ratio and no band.
  for (std::size_t r = 0; r < c.table.rows.size(); ++r)
    CHECK(cells(c.table, r)[0] == "03_online_softmax");
  REQUIRE(c.emulated_only.size() == 1);
  CHECK(c.emulated_only[0].first == "07_hopper");
  CHECK_THAT(c.emulated_only[0].second,
             ContainsSubstring("at the shape of ncu_03_online_softmax's profile"));
  const std::string text = render(emulated_only_text(c), Format::console);
  CHECK_THAT(text, ContainsSubstring("Emulated only"));
  CHECK_THAT(text, ContainsSubstring("07_hopper (not profiled by the run: at the shape of"));
  // A stage with neither file is not listed; with a profile it is compared, not listed.
  CHECK(emulated_only_text(emu_comparison(kRun, kRun / kEmulatedDir, {"03_online_softmax"}, b))
            .empty());
}

TEST_CASE("ncu_ratio with one side only emulated compares emulated with emulated",
          "[emulated][verdict]") {
  const RunData run = load_run(kRun, build_stages());
  // 07 has only its emulation (500 wavefronts); 03 has a profile (1000) and an emulation (1020):
  // the ratio takes 03's emulated count, not its measurement, and says the ratio is emulated.
  const Measured r =
      measure(run, "07_hopper",
              "ncu_ratio:03_online_softmax:l1tex__data_pipe_lsu_wavefronts_mem_shared.sum");
  REQUIRE(r.value);
  CHECK(*r.value == Approx(500.0 / 1020.0));
  CHECK(r.emulated);
  // Both measured: the measurements (03 against itself: 1).
  const Measured m =
      measure(run, "03_online_softmax",
              "ncu_ratio:03_online_softmax:l1tex__data_pipe_lsu_wavefronts_mem_shared.sum");
  REQUIRE(m.value);
  CHECK(*m.value == Approx(1.0));
  CHECK_FALSE(m.emulated);
}

TEST_CASE("a stage folder's own bands join the shared ones, and name only that stage",
          "[emulated]") {
  namespace fs = std::filesystem;
  TempDir dir;
  dir.write("shared.txt", "* * m 0.9 1.1  # any stage\n");
  dir.write("stages/03x/emu-bands.txt", "03_old k m 1 1  # its own, under its measured name\n");
  const StageList tree = parse_stage_list(R"({"stages": [
      {"name": "03x", "parent": null, "dir": "stages/03x", "measured_as": "03_old"}]})",
                                          "tree.json");
  const auto b = load_emu_bands(dir.path / "shared.txt", tree, dir.path);
  REQUIRE(b.size() == 2);
  CHECK(find_emu_band(b, "03_old", "k", "m")->reason == "its own, under its measured name");
  CHECK(find_emu_band(b, "04_other", "k", "m")->reason == "any stage");
  dir.write("stages/03x/emu-bands.txt", "04_other k m 1 1  # another stage's\n");
  CHECK_THROWS_WITH(load_emu_bands(dir.path / "shared.txt", tree, dir.path),
                    ContainsSubstring("a band of stage 04_other"));
  // The committed bands: the shared file and the stage folders together (stage 07d's lines name
  // 07_hopper, the name the committed run measured it under).
  const auto all = load_emu_bands(FS_TABLE_BENCH_DIR "/emu-bands.txt", build_stages(),
                                  std::filesystem::path(FS_TABLE_BENCH_DIR).parent_path());
  CHECK(find_emu_band(all, "07_hopper", "fused_attention_kernel", "lts__t_bytes.sum")->stage ==
        "07_hopper");
}
