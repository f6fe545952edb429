// fs_table/run.hpp — one GPU run as fs_table reads it: the folder bench/gpu-check.sh writes
// under book/data/<gpu-slug>/<run-id>/.
//
//   provenance.json         the GPU, driver, clocks, commit, date and command of the run
//   bench_<stage>.json      Google Benchmark JSON, one entry per shape, named
//   sdpa.json, peaks.json   <backend>/b<B>_h<H>_sq<Sq>_skv<Skv>_d<D>_<dtype>[_causal]
//   ncu_<stage>.csv         Nsight Compute, read by fs_table/ncu.hpp
//
// Every *.json with a "benchmarks" array is read, whatever its name. Entries named peak_* are
// the measured ceilings. A missing folder or a folder without results is not an error: it is a
// run with `missing_reason` set, which the tables and the book show as "no measurement yet".
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "flashsteps/problem.hpp"

namespace flashsteps::table {

/// Bad input (a malformed file, an unknown option value): fs_table prints it and exits 1.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The stage tree the build declares (flashsteps_add_stage() in stages/CMakeLists.txt), as it
/// writes it to <build>/stages.json:
///
///   {"stages": [{"name": "04_cp_async", "parent": "03_online_softmax", "dir": ...}, ...],
///    "baselines": [{"name": "baseline_cublas", "dir": ...}]}
///
/// The stages come in declaration order, each after its parent; only the first has none.
struct StageList {
  struct Stage {
    std::string name;
    std::string parent;  ///< empty for the first stage
  };
  std::vector<Stage> stages;
  std::vector<std::string> baselines;  ///< the build's own (baseline_cublas)

  std::vector<std::string> names() const;
  /// The stage `backend` builds on; empty for the first stage and for anything not a stage.
  std::string parent_of(std::string_view backend) const;
};

/// Parses a stage list; `origin` names it in messages. Throws InputError when it is not JSON of
/// that shape, or when a parent is not a stage listed before its child.
StageList parse_stage_list(const std::string& json, const std::string& origin);
/// Reads and parses a stage list file (stages.json).
StageList load_stage_list(const std::filesystem::path& file);

/// The PyTorch SDPA backends (bench/sdpa), compared with every stage next to the build's
/// baselines.
inline constexpr std::string_view kSdpaBackends[] = {"sdpa_flash", "sdpa_cudnn", "sdpa_efficient",
                                                     "sdpa_math"};

/// One benchmark entry: a backend at a shape, timed or failed.
struct Measurement {
  std::string backend;  ///< "03_online_softmax", "sdpa_flash", ...
  Problem problem;
  std::string file;  ///< the file it came from, for messages
  double median_ms = 0;
  std::optional<double> p10_ms, p90_ms;  ///< absent in files that do not record them
  std::string error;  ///< empty when timed; else why not (error_message, or what is malformed)
  std::string label;  ///< Google Benchmark's label (sdpa_bench.py: the kernels that ran)

  bool ok() const { return error.empty(); }
  /// FLOP/s from the shape (Problem::flops, FlashAttention's count) and the median time.
  double flops_per_second() const { return problem.flops() / (median_ms * 1e-3); }
};

/// A peak_* entry: peak_gemm/fp16, peak_gemm/bf16 (FLOP/s), peak_copy/d2d (bytes/s).
struct Peak {
  std::optional<double> per_second;
  std::string error;
};

/// What one results file held, for the provenance page.
struct ResultFile {
  std::string name;
  int entries = 0;
  int errors = 0;
  nlohmann::json context;
};

struct RunData {
  StageList stages;  ///< the tree whose stages the tables and the book show
  std::filesystem::path dir;
  std::string label;           ///< how the run is named to readers: CURRENT's text, or the folder
  std::string missing_reason;  ///< non-empty: there is nothing to show, and this says why
  nlohmann::json provenance;   ///< provenance.json, or null when the run has none
  std::vector<Measurement> measurements;
  bool has_peaks_file = false;
  std::map<std::string, Peak> peaks;  ///< by name, e.g. "peak_gemm/fp16"
  std::vector<ResultFile> files;
  std::vector<std::string> warnings;  ///< inconsistencies worth a reader's attention

  bool empty() const { return !missing_reason.empty(); }
  const Measurement* find(std::string_view backend, const Problem& shape) const;
  bool has_backend(std::string_view backend) const;
  /// Every stage, the build's baselines and the SDPA backends in order (present or not), then
  /// any other backend the run holds, sorted.
  std::vector<std::string> backends() const;
  /// Distinct shapes of one dtype that any backend has an entry for.
  std::vector<Problem> shapes(DType dtype) const;
};

/// A context or provenance value as text: Google Benchmark writes custom context as strings, a
/// hand-written provenance.json may hold numbers. Empty when absent.
std::string context_text(const nlohmann::json& obj, const char* key);

/// The GPU the run measured: provenance.json's, else the first results file's.
std::string run_gpu_name(const RunData& run);

/// A run folder as given, or book/data itself: when `dir` holds a CURRENT file, the run is the
/// folder CURRENT names (relative to `dir`). Sets `*label` to CURRENT's text when used.
std::filesystem::path resolve_run_dir(const std::filesystem::path& dir, std::string* label,
                                      std::string* missing_reason);

/// Loads a run, to be shown with the stages of `stages`. Throws InputError for a file that is
/// not valid JSON or an entry of the wrong type; a missing folder or missing files are reported
/// in the result, not thrown.
RunData load_run(const std::filesystem::path& dir, StageList stages);

}  // namespace flashsteps::table
