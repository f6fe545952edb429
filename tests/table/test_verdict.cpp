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

const std::filesystem::path kRun = std::filesystem::path(FS_TABLE_FIXTURES) / "run_full";

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
  const Measured no_profile = measure(run, "07_hopper", "ncu:launch__registers_per_thread");
  CHECK_FALSE(no_profile.value);
  CHECK_THAT(no_profile.reason, ContainsSubstring("ncu_07_hopper.csv"));
  const Measured no_metric = measure(run, "03_online_softmax", "ncu:no__such_metric.sum");
  CHECK_FALSE(no_metric.value);
  CHECK_THAT(verdict_text(range(1, 2), no_metric), ContainsSubstring("not measured"));
}

TEST_CASE("verdicts: inside the range, or the distance to its nearer end", "[verdict]") {
  const auto at = [](double x) { return Measured{x, "x", ""}; };
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
