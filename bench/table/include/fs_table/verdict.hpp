// fs_table/verdict.hpp — a stage's predictions against a run: the "which metric should move, and
// by how much" of each kernel header, written before any measurement, as checkable ranges.
//
// stages/<stage>/predictions.csv, one prediction per line (blank lines and # comments skipped):
//
//   measure,low,high,claim
//   speedup:04_cp_async:b8_h16_sq2048_skv2048_d128_fp16,1.05,1.10,"5-10% faster than 04 ..."
//
// measure, one of
//   tflops:<shape>                TFLOP/s of the stage at a bench shape (Problem::name())
//   pct_peak:<shape>              that, as % of the run's measured cuBLAS GEMM peak of its dtype
//   speedup:<backend>:<shape>     t(backend) / t(stage): above 1 the stage is faster
//   ncu:<metric>                  a metric of the stage's profile (ncu_<stage>.csv), reduced over
//                                 its kernels as the Nsight Compute tables reduce it
//   ncu_ratio:<backend>:<metric>  the stage's value of a metric over another stage's
// low, high: the predicted range, inclusive (equal for a point prediction); claim: the header's
// words, quoted when they hold a comma.
//
// The verdict of each line: "as predicted" inside the range, else "below" or "above" it by the
// distance to the nearer end, relative to that end.
#pragma once

#include <filesystem>
#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "fs_table/run.hpp"
#include "fs_table/text.hpp"

namespace flashsteps::table {

struct Prediction {
  std::string measure;
  double low = 0, high = 0;
  std::string claim;
  int line = 0;  ///< in the file, for messages
};

/// Throws InputError naming the source and line for a malformed line or an unknown measure.
std::vector<Prediction> parse_predictions(std::istream& in, const std::string& source);
/// An absent file is no predictions (empty), not an error.
std::vector<Prediction> load_predictions(const std::filesystem::path& file);

/// What one measure came to in a run: a value with its unit, or why there is none.
struct Measured {
  std::optional<double> value;
  std::string unit;    ///< "TFLOP/s", "x", "%", or the metric's unit
  std::string reason;  ///< when there is no value
};
Measured measure(const RunData& run, const std::string& stage, const std::string& measure);

enum class Verdict { within, below, above, unmeasured };
Verdict judge(const Prediction& p, const Measured& m);
/// "as predicted", "below by 23%", "above by 4%", "not measured: ..."
std::string verdict_text(const Prediction& p, const Measured& m);

/// The table the book shows: claim, measure, predicted range, measured value, verdict.
Table verdict_table(const RunData& run, const std::string& stage,
                    const std::vector<Prediction>& predictions);

}  // namespace flashsteps::table
