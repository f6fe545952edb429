// fs_table/compare.hpp — the comparison tables: every stage and baseline at every shape of a run.
//
// Shapes are grouped as FlashAttention's benchmark sweeps them: one group per (D, causal, H,
// B*S tokens), with the sequence length S as columns. Each group gets an overview (median time
// and TFLOP/s per backend and S), and each shape a detail table with the derived ratios:
//
//   vs parent stage                   t(parent) / t(stage): the speedup over the stage it
//                                     builds on (StageList::parent_of)
//   vs sdpa_flash, vs sdpa_cudnn      t(reference) / t(row): above 1x the row is faster
//   % of peak                         FLOP/s / the cuBLAS GEMM peak of the same dtype measured
//                                     in the same run (peaks.json)
//
// A value that cannot be computed is a marker "n/a (k)" whose reason is note (k) of the table.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fs_table/run.hpp"
#include "fs_table/text.hpp"

namespace flashsteps::table {

/// Shapes sharing D, causal, H and B*Sq tokens; `shapes` sorted by Sq, then Skv.
struct ShapeGroup {
  std::int64_t head_dim = 0;
  bool causal = false;
  std::int64_t heads = 0;
  std::int64_t tokens = 0;  ///< B * Sq
  DType dtype = DType::fp16;
  std::vector<Problem> shapes;

  Text caption() const;  ///< "D = 64, causal, fp16: H = 32, B*S = 16384 tokens"
  /// A name without spaces for plot titles: "D=64,H=32,causal".
  std::string plot_title() const;
};

/// Groups of one dtype, sweeps (most shapes) first, then by D, causal, H, tokens.
std::vector<ShapeGroup> shape_groups(const RunData& run, DType dtype);
/// "S=1024", or "Sq=512,Skv=1024" when they differ.
std::string column_label(const Problem& p);

/// A time or the reason there is none, as a cell shows it.
struct TimeLookup {
  const Measurement* m = nullptr;  ///< non-null only when timed
  Text reason;
};
TimeLookup lookup_time(const RunData& run, std::string_view backend, const Problem& shape);

/// The measured GEMM peak (FLOP/s) of a dtype, or the reason there is none.
struct PeakLookup {
  std::optional<double> flops_per_second;
  Text reason;
};
PeakLookup lookup_gemm_peak(const RunData& run, DType dtype);

/// Ratio of two median times as a speedup of `t_ms` over `t_ref_ms` (t_ref / t).
double speedup(double t_ref_ms, double t_ms);
/// Achieved FLOP/s as a percentage of a peak.
double percent_of_peak(double flops_per_second, double peak_flops_per_second);

/// Per group: rows = backends, columns = S, cell = "median ms / TFLOP/s".
Table overview_table(const RunData& run, const ShapeGroup& group);
/// One shape: rows = the backends the run holds; columns = time, p10-p90, TFLOP/s, % of peak,
/// speedup over the parent stage, vs sdpa_flash, vs sdpa_cudnn.
Table shape_table(const RunData& run, const Problem& shape);
/// One stage at every shape of the run against its parent stage, sdpa_flash, sdpa_cudnn and
/// cuBLAS.
Table stage_table(const RunData& run, std::string_view stage, DType dtype);

/// "Run `h100/2025-01-01` on `NVIDIA H100 80GB HBM3`.": the line above every generated table.
Text run_caption(const RunData& run);

/// The legend under every table set: what the ratios mean.
Text legend();

/// The whole comparison: every overview, then every shape's detail table.
std::string comparison_report(const RunData& run, DType dtype, Format f);

}  // namespace flashsteps::table
