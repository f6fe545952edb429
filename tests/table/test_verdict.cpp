// tests/table/test_verdict.cpp — predictions.csv and its verdicts (fs_table/table.hpp, verdict),
// against the hand-made run of tests/table/fixtures/run_full (values worked out in
// fixtures/README.md).
#include <sstream>

#include "flashsteps_catch.hpp"
#include "fs_table/table.hpp"

#include "build_stages.hpp"

namespace {

using namespace flashsteps::table;
using Catch::Approx;
using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::StartsWith;

const std::filesystem::path kRun = std::filesystem::path(FS_TABLE_FIXTURES) / "run_full";
const std::filesystem::path kPtxas = std::filesystem::path(FS_TABLE_FIXTURES) / "ptxas";

std::vector<Prediction> parse(const std::string& text) {
  std::istringstream in(text);
  return parse_predictions(in, "p.csv");
}

Prediction range(double low, double high) {
  Prediction p;
  p.low = low;
  p.high = high;
  return p;
}

}  // namespace

TEST_CASE("predictions.csv: quoted claims, comments and blank lines", "[verdict]") {
  const auto p = parse(
      "# comment\n\nmeasure,low,high,claim\n"
      "tflops:b32_h32_sq512_skv512_d64_fp16,60,70,\"60-70 TFLOP/s, at S = 512\"\r\n"
      "ncu:launch__registers_per_thread,128,128,\"a \"\"point\"\" prediction\"\n");
  REQUIRE(p.size() == 2);
  CHECK(p[0].measure == "tflops:b32_h32_sq512_skv512_d64_fp16");
  CHECK(p[0].low == 60);
  CHECK(p[0].high == 70);
  CHECK(p[0].claim == "60-70 TFLOP/s, at S = 512");
  CHECK(p[1].claim == "a \"point\" prediction");
}

TEST_CASE("predictions.csv: each malformed line is refused, naming the line", "[verdict]") {
  const std::string head = "measure,low,high,claim\n";
  const std::pair<std::string, std::string> bad[] = {
      {"low,high,claim\n", "the first line must be"},
      {head + "tflops:b32_h32_sq512_skv512_d64_fp16,1,2\n", "p.csv:2: expected 4 fields"},
      {head + "flops:b32_h32_sq512_skv512_d64_fp16,1,2,x\n", "unknown measure"},
      {head + "tflops:b32_sq512,1,2,x\n", "is not a shape name"},
      {head + "speedup:b32_h32_sq512_skv512_d64_fp16,1,2,x\n", "takes 2 argument"},
      {head + "latency_ratio:02_wmma:b32_h32_sq512_skv512_d64_fp16,1,2,x\n",
       "'02_wmma' is not a shape name"},
      {head + "ncu:,1,2,x\n", "an empty argument"},
      {head + "ncu:m,one,2,x\n", "must be numbers"},
      {head + "ncu:m,3,2,x\n", "low is above high"},
      {head + "ncu:m,1,2,\n", "the claim is empty"},
      {head + "ncu:m,1,2,\"open\n", "p.csv:2: a quote is left open"}};
  for (const auto& [text, message] : bad) {
    INFO(text);
    CHECK_THROWS_WITH(parse(text), ContainsSubstring(message));
  }
}

TEST_CASE("a stage without predictions.csv has no predictions", "[verdict]") {
  CHECK(load_predictions(kRun / "no_such_file.csv").empty());
}

TEST_CASE("measures read the run: times, peaks and profiles", "[verdict]") {
  const RunData run = load_run(kRun, build_stages());
  // The value of one measure of stage 03, which must have one, in the unit it must have.
  const auto value = [&](const char* m, const char* unit) {
    const Measured x = measure(run, "03_online_softmax", m);
    REQUIRE(x.value);
    CHECK(x.unit == unit);
    return *x.value;
  };
  // 2^36 FLOPs in 1.0 ms; the fixture's fp16 GEMM peak is 500 TFLOP/s.
  CHECK(value("tflops:b32_h32_sq512_skv512_d64_fp16", "TFLOP/s") == Approx(68.719476736));
  CHECK(value("pct_peak:b32_h32_sq512_skv512_d64_fp16", "%") == Approx(100 * 68.719476736 / 500));
  // 02_wmma takes 8.0 ms at S = 1024, stage 03 2.0 ms.
  CHECK(value("speedup:02_wmma:b16_h32_sq1024_skv1024_d64_fp16", "x") == Approx(4.0));
  // Stage 03 itself at two shapes: 2.0 ms at S = 1024 against 1.0 ms at S = 512.
  CHECK(value("latency_ratio:b32_h32_sq512_skv512_d64_fp16:b16_h32_sq1024_skv1024_d64_fp16", "x") ==
        Approx(2.0));
  CHECK(value("latency_ratio:b16_h32_sq1024_skv1024_d64_fp16:b32_h32_sq512_skv512_d64_fp16", "x") ==
        Approx(0.5));
  // One kernel of 128 registers; 02_wmma's profiled pass lasts 300 + 100 + 100 us, 03's 250 us.
  CHECK(value("ncu:launch__registers_per_thread", "register/thread") == 128);
  CHECK(value("ncu_ratio:02_wmma:gpu__time_duration.sum", "x") == Approx(0.5));
}

TEST_CASE("a measure the run cannot give says why instead of a value", "[verdict]") {
  const RunData run = load_run(kRun, build_stages());
  const Measured failed =
      measure(run, "03_online_softmax", "tflops:b16_h16_sq1024_skv1024_d128_fp16_causal");
  CHECK_FALSE(failed.value);
  CHECK_FALSE(failed.reason.empty());
  // A latency ratio whose reference shape the run did not time names that shape.
  const Measured no_reference = measure(
      run, "03_online_softmax",
      "latency_ratio:b16_h16_sq1024_skv1024_d128_fp16_causal:b32_h32_sq512_skv512_d64_fp16");
  CHECK_FALSE(no_reference.value);
  CHECK_THAT(no_reference.reason, StartsWith("b16_h16_sq1024_skv1024_d128_fp16_causal: "));
  const Measured no_profile = measure(run, "07_hopper", "ncu:launch__registers_per_thread");
  CHECK_FALSE(no_profile.value);
  CHECK_THAT(no_profile.reason, ContainsSubstring("ncu_07_hopper.csv"));
  const Measured no_metric = measure(run, "03_online_softmax", "ncu:no__such_metric.sum");
  CHECK_FALSE(no_metric.value);
  CHECK_THAT(verdict_text(range(1, 2), no_metric), ContainsSubstring("not measured"));
}

TEST_CASE("verdicts: inside the range, or the distance to its nearer end", "[verdict]") {
  const auto at = [](double x) {
    Measured m;
    m.value = x;
    m.unit = "x";
    return m;
  };
  CHECK(verdict_text(range(1, 2), at(1)) == "as predicted");
  CHECK(verdict_text(range(1, 2), at(2)) == "as predicted");
  CHECK(verdict_text(range(2, 2), at(2)) == "as predicted");
  CHECK(verdict_text(range(0, 2), at(-1)) == "below the range");  // no distance to 0
  CHECK(verdict_text(range(1, 2), at(1.5)) == "as predicted");
  CHECK(verdict_text(range(1, 2), at(0.75)) == "below the range by 25.0%");
  CHECK(verdict_text(range(1, 2), at(3)) == "above the range by 50.0%");
}

TEST_CASE("the verdict table lists every prediction with its verdict", "[verdict]") {
  const RunData run = load_run(kRun, build_stages());
  const auto p = parse(
      "measure,low,high,claim\n"
      "speedup:02_wmma:b16_h32_sq1024_skv1024_d64_fp16,2,3,\"2-3x over 02\"\n"
      "ncu:launch__registers_per_thread,96,128,\"at most 128 registers\"\n");
  const Table t = verdict_table(run, "03_online_softmax", p);
  REQUIRE(t.rows.size() == 2);
  const auto cells = [&](std::size_t r) {
    std::vector<std::string> out;
    for (const Text& c : t.rows[r])
      out.push_back(render(c, Format::console));
    return out;
  };
  // The measure is a numbered note, not a column (the table fits the book's column).
  CHECK(cells(0) == std::vector<std::string>{"2-3x over 02 (1)", "2.00x to 3.00x", "4.00x",
                                             "above the range by 33.3%"});
  CHECK(cells(1) ==
        std::vector<std::string>{"at most 128 registers (2)", "96 to 128", "128", "as predicted"});
  REQUIRE(t.notes.size() == 2);
  CHECK(render(t.notes[0], Format::console) ==
        "measure: speedup:02_wmma:b16_h32_sq1024_skv1024_d64_fp16");
  CHECK(render(t.notes[1], Format::console) == "measure: ncu:launch__registers_per_thread");
}

// ---- what the build judges: its ptxas reports
// ----------------------------------------------------

namespace {

// No run at all, and the planted reports of tests/table/fixtures/ptxas as this build's.
RunData build_only() {
  RunData run = load_run(std::filesystem::path(FS_TABLE_FIXTURES) / "no_such_run", build_stages());
  REQUIRE(run.empty());
  run.ptxas_dir = kPtxas;
  return run;
}

std::vector<std::string> row(const Table& t, std::size_t r) {
  std::vector<std::string> out;
  for (const Text& c : t.rows.at(r))
    out.push_back(render(c, Format::console));
  return out;
}

}  // namespace

TEST_CASE("a ptxas report: every entry function, its own properties, per architecture",
          "[verdict][ptxas]") {
  const auto k = load_ptxas_report(kPtxas / "09_planted.ptxas.txt");
  REQUIRE(k.size() == 4);
  CHECK(k[0].arch == "sm_80");
  CHECK(k[2].arch == "sm_89");
  CHECK_THAT(k[1].name, ContainsSubstring("fx::FxTraits<128, 64, 2>"));
  CHECK(k[0].registers == 160);
  CHECK(k[1].registers == 255);
  // The callee's 8 bytes of stack and of spills, listed first, are not the kernel's.
  CHECK(k[1].stack_bytes == 16);
  CHECK(*ptxas_quantity(k[1], "spill_bytes") == 64);
  CHECK(*ptxas_quantity(k[1], "smem_bytes") == 2048);
  CHECK(*ptxas_quantity(k[0], "spill_bytes") == 0);
  CHECK_FALSE(ptxas_quantity(k[0], "dynamic_smem"));

  std::istringstream cut(
      "ptxas info    : Compiling entry function 'k' for 'sm_80'\n"
      "ptxas info    : Compile time = 1 ms\n");
  CHECK_THROWS_WITH(parse_ptxas_report(cut, "r.txt"),
                    ContainsSubstring("r.txt") && ContainsSubstring("'k' (sm_80)"));
}

TEST_CASE("ptxas lines: ranges, quantities and architectures are checked", "[verdict][ptxas]") {
  const std::string head = "measure,low,high,claim\n";
  const auto p = parse(head +
                       "\"ptxas:registers:sm_89:fx::FxTraits<128, 64, 2>\",170,240,\"a, b\"\n"
                       "ptxas:spill_bytes:*:*,0,0,no spills\n"
                       "ptxas_ratio:09_base:registers:*:*,0.9,1.1,about 09_base's\n");
  REQUIRE(p.size() == 3);
  CHECK(judged_by_build(p[0].measure));
  CHECK(judged_by_build(p[2].measure));
  CHECK_FALSE(judged_by_build("speedup:02_wmma:b32_h32_sq512_skv512_d64_fp16"));
  const std::pair<std::string, std::string> bad[] = {
      {"ptxas:registers:*:*,168,168,x\n", "states a range"},
      {"ptxas:smem_bytes:*:*,0,0,x\n", "states a range"},
      {"ptxas_ratio:09_base:spill_bytes:*:*,0,0,x\n", "states a range"},
      {"ptxas:regs:*:*,1,2,x\n", "'regs' is not a ptxas quantity"},
      {"ptxas:registers:ampere:*,1,2,x\n", "'ampere' is not an architecture"},
      {"ptxas:registers:*,1,2,x\n", "ptxas takes 3 argument"},
      {"ptxas:registers:*:,1,2,x\n", "an empty argument"}};
  for (const auto& [text, message] : bad) {
    INFO(text);
    CHECK_THROWS_WITH(parse(head + text), ContainsSubstring(message));
  }
}

TEST_CASE("a ptxas measure reads the build's report, with no run, and a planted miss is a miss",
          "[verdict][ptxas]") {
  const RunData run = build_only();
  const Measured all = measure(run, "09_planted", "ptxas:registers:*:*");
  REQUIRE(all.value);
  CHECK(*all.min_value == 160);
  CHECK(*all.value == 255);
  CHECK(all.source == "4 kernels (sm_80, sm_89) of 09_planted.ptxas.txt");
  // Every kernel must lie in the range: the report is outside it at both ends, then at one.
  CHECK(verdict_text(range(170, 240), all) == "outside the range at both ends");
  CHECK(verdict_text(range(150, 255), all) == "as predicted");
  const Measured d64 = measure(run, "09_planted", "ptxas:registers:sm_80:FxTraits<64, 128, 2>");
  CHECK(verdict_text(range(170, 240), d64) == "below the range by 5.88%");
  // A kernel selection holds colons and commas; one architecture, one tile.
  const Measured one = measure(run, "09_planted", "ptxas:registers:sm_89:fx::FxTraits<128, 64, 2>");
  REQUIRE(one.value);
  CHECK(*one.value == 240);
  CHECK(*one.min_value == 240);
  const Measured spills = measure(run, "09_planted", "ptxas:spill_bytes:*:*");
  CHECK(verdict_text(range(0, 0), spills) == "above the range");
  CHECK(verdict_text(range(0, 0), measure(run, "09_base", "ptxas:spill_bytes:*:*")) ==
        "as predicted");
  CHECK(*measure(run, "09_planted", "ptxas:smem_bytes:sm_80:<128, 64, 2>").value == 2048);
  CHECK(*measure(run, "09_planted", "ptxas:stack_bytes:*:*").value == 16);

  // What cannot be read says so: a selection nothing matches, a stage without a report, a build
  // whose reports were not given.
  const Measured none = measure(run, "09_planted", "ptxas:registers:sm_90a:*");
  CHECK_FALSE(none.value);
  CHECK_THAT(none.reason, ContainsSubstring("no kernel of 09_planted.ptxas.txt for sm_90a"));
  CHECK_THAT(verdict_text(range(1, 2), measure(run, "09_nothing", "ptxas:registers:*:*")),
             ContainsSubstring("not measured: this build has no 09_nothing.ptxas.txt"));
  RunData no_reports = run;
  no_reports.ptxas_dir.clear();
  CHECK_THAT(measure(no_reports, "09_planted", "ptxas:registers:*:*").reason,
             ContainsSubstring("no ptxas reports given"));
}

TEST_CASE("ptxas_ratio: the largest of the selection against the other stage's",
          "[verdict][ptxas]") {
  const RunData run = build_only();
  const Measured r = measure(run, "09_planted", "ptxas_ratio:09_base:registers:*:<128, 64, 2>");
  REQUIRE(r.value);
  CHECK(*r.value == Approx(255.0 / 128.0));
  CHECK(r.unit == "x");
  CHECK(verdict_text(range(0.9, 1.1), r) == "above the range by 81.1%");
  CHECK(*measure(run, "09_planted", "ptxas_ratio:09_base:registers:sm_89:<64, 128, 2>").value ==
        Approx(168.0 / 80.0));
  const Measured gone = measure(run, "09_planted", "ptxas_ratio:09_nothing:registers:*:*");
  CHECK_FALSE(gone.value);
  CHECK_THAT(gone.reason, ContainsSubstring("09_nothing: this build has no"));
}

TEST_CASE("the build's verdict table needs no run and shows a miss as a miss", "[verdict][ptxas]") {
  const RunData run = build_only();
  const auto p = parse(
      "measure,low,high,claim\n"
      "ptxas:registers:*:*,170,240,170-240 registers\n"
      "ptxas:spill_bytes:*:*,0,0,no spills\n"
      "\"ptxas:registers:*:FxTraits<64, 128, 2>\",150,200,\"D = 64: 150-200\"\n");
  const Table t = build_verdict_table(run, "09_planted", p);
  CHECK_THAT(render(t.caption, Format::console), ContainsSubstring("ptxas report"));
  REQUIRE(t.rows.size() == 3);
  CHECK(row(t, 0) == std::vector<std::string>{"170-240 registers (1)", "170 to 240", "160 to 255",
                                              "outside the range at both ends"});
  CHECK(row(t, 1) == std::vector<std::string>{"no spills (2)", "0 bytes", "0 bytes to 64 bytes",
                                              "above the range"});
  CHECK(row(t, 2) == std::vector<std::string>{"D = 64: 150-200 (3)", "150 to 200", "160 to 168",
                                              "as predicted"});
  CHECK(render(t.notes[0], Format::console) ==
        "measure: ptxas:registers:*:*, read from 4 kernels (sm_80, sm_89) of 09_planted.ptxas.txt");
}

// ---- a step against its parent
// -------------------------------------------------------------------

TEST_CASE(
    "a speed-up over a stage the run did not measure is not judged, never taken from another "
    "stage",
    "[verdict][stages]") {
  // 03_online_softmax builds on 03a_unmeasured, which builds on 02_wmma; the run has no time for
  // 03a_unmeasured. The tables compare with 02_wmma, said so (compared_parent); a prediction that
  // names the parent stays unjudged.
  const StageList tree = parse_stage_list(R"({"stages": [
      {"name": "02_wmma", "parent": null},
      {"name": "03a_unmeasured", "parent": "02_wmma", "ancestors": ["02_wmma"]},
      {"name": "03_online_softmax", "parent": "03a_unmeasured",
       "ancestors": ["03a_unmeasured", "02_wmma"]}]})",
                                          "tree.json");
  const RunData run = load_run(kRun, tree);
  REQUIRE(run.compared_parent("03_online_softmax").stage == "02_wmma");
  const char* shape = "b16_h32_sq1024_skv1024_d64_fp16";
  const Measured parent =
      measure(run, "03_online_softmax", std::string("speedup:03a_unmeasured:") + shape);
  CHECK_FALSE(parent.value);
  CHECK_THAT(parent.reason, ContainsSubstring("03a_unmeasured"));
  CHECK_THAT(verdict_text(range(0.9, 1.1), parent), StartsWith("not measured"));
  // The ancestor's own line is judged, with its own ratio (4x): the two are never mixed.
  const Measured ancestor =
      measure(run, "03_online_softmax", std::string("speedup:02_wmma:") + shape);
  REQUIRE(ancestor.value);
  CHECK(*ancestor.value == Approx(4.0));
  const Table t =
      verdict_table(run, "03_online_softmax",
                    parse(std::string("measure,low,high,claim\nspeedup:03a_unmeasured:") + shape +
                          ",3.5,4.5,within 3.5-4.5x of its parent\n"));
  CHECK(row(t, 0)[1] == "3.50x to 4.50x");
  CHECK(row(t, 0)[2] == "-");
  CHECK_THAT(row(t, 0)[3], StartsWith("not measured: 03a_unmeasured"));
}
