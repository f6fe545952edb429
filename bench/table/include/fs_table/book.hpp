// fs_table/book.hpp — every generated fragment the book includes, from one run folder.
//
//   table_all.md            the full comparison (fs_table/compare.hpp)
//   table_<stage>.md        one stage against its parent stage, sdpa_flash, sdpa_cudnn, cuBLAS
//   provenance.md           where and how the run was measured
//   ncu_<stage>.md          the fixed Nsight Compute metric set of one stage
//   ncu_diff_<stage>.md     a stage against its parent stage, metric by metric
//   verdict_<stage>.md      the stage's predictions against the run (fs_table/verdict.hpp)
//   plot_stages.dat/.png    TFLOP/s of every backend at each sweep shape (bench/plots/*.gp)
//   plot_seqlen.dat/.png    TFLOP/s against S for the last three stages and the baselines
//
// Every file is written for every stage of the stage list whatever the run holds, so the book
// never includes a missing file: without a run each says that no measurement is committed yet
// and names the command that makes one, and each PNG is a gnuplot placeholder saying so.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "flashsteps/problem.hpp"
#include "fs_table/run.hpp"

namespace flashsteps::table {

struct BookOptions {
  std::filesystem::path run_dir;  ///< a run folder, or book/data (its CURRENT names the run)
  std::filesystem::path out_dir;
  std::filesystem::path plots_dir;     ///< bench/plots: the gnuplot scripts
  std::filesystem::path metrics_file;  ///< bench/ncu-metrics.txt
  std::filesystem::path stages_dir;    ///< stages/: each stage's predictions.csv
  StageList stages;                    ///< the stages to write fragments for
  std::string gnuplot = "gnuplot";
  DType dtype = DType::fp16;
};

/// The command a reader runs on a GPU host to produce a run.
inline constexpr const char* kGpuCheckCommand = "bench/gpu-check.sh";

struct BookResult {
  std::vector<std::filesystem::path> written;
  std::string missing_reason;         ///< non-empty: no run, every fragment is a placeholder
  std::vector<std::string> warnings;  ///< the run's inconsistencies (also in provenance.md)
};

/// Writes every fragment. Throws InputError on a malformed input file and std::runtime_error
/// when a file cannot be written or gnuplot fails.
BookResult write_book(const BookOptions& opt);

}  // namespace flashsteps::table
