// fs_table/table.hpp — fs_table's library: reading one GPU run, the comparison and Nsight Compute
// tables, the predictions' verdicts, README's status table and the book's fragments. Sections:
// text (tables and their rendering), run (a run folder), compare, ncu, ptxas, verdict, status,
// book; each is implemented in src/<section>.cpp.
#pragma once

#include <filesystem>
#include <istream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "flashsteps/problem.hpp"

namespace flashsteps::table {

// ---- text ---------------------------------------------------------------------------------------
// The tables fs_table prints, and how they render as console text or as Markdown that
// Doxygen 1.9.4 accepts without warnings.
//
// Every piece of text is a list of spans, plain or code, and both are literal: in Markdown a
// code span keeps its text verbatim in a monospace font (names, error messages, kernels) and a
// plain span has every character Doxygen would read as markup (\ ` * _ < > & @ # % |)
// backslash-escaped. In a code span a backtick would end the span, a pipe the table cell, and
// `%word` would lose its `%` (Doxygen's no-autolink marker), so those are replaced or doubled.

enum class Format { console, markdown };

struct Span {
  std::string text;
  bool code = false;
};
using Text = std::vector<Span>;

inline Text plain(std::string s) {
  return {Span{std::move(s), false}};
}
inline Text code(std::string s) {
  return {Span{std::move(s), true}};
}
/// Concatenation: `plain("failed: ") + code(msg)`.
Text operator+(Text a, const Text& b);
/// A manifest's one-line text (TEACHES) with `backticked` words as code spans, the rest plain.
Text inline_markup(std::string_view s);

std::string render(const Text& t, Format f);

/// One table: an optional caption above, numbered notes below.
struct Table {
  Text caption;
  std::vector<Text> header;
  std::vector<bool> numeric;  ///< per column: right-aligned
  std::vector<std::vector<Text>> rows;
  std::vector<Text> notes;  ///< rendered as "(1) ...", "(2) ..." in order
};

/// Console: aligned columns. Markdown: caption paragraph, pipe table, notes as a list.
std::string render(const Table& t, Format f);

/// Numbers the distinct reasons why cells are empty, so a cell reads "n/a (2)" and the table
/// explains (2) once below.
class Footnotes {
 public:
  /// The cell text for a missing value with this reason.
  Text mark(const Text& reason);
  /// The cell text for a value that needs a note: "1.23x (2)".
  Text annotate(const std::string& value, const Text& note);
  /// "(k)": the note's number, the note added if new.
  std::string number(const Text& note);
  /// The reasons in order of first use; pass as Table::notes.
  const std::vector<Text>& notes() const { return notes_; }

 private:
  std::vector<std::string> keys_;
  std::vector<Text> notes_;
};

// Number formatting: three significant digits, never an exponent (times span 10 us to 10 s).
std::string fmt_sig(double x, int digits = 3);
std::string fmt_ratio(double x);    ///< "1.92x"
std::string fmt_percent(double x);  ///< "42.1%"
std::string fmt_bytes(double b);    ///< "1.23 GB" (SI, as Nsight Compute counts)
std::string fmt_ns(double ns);      ///< "12.3 us", "4.56 ms"

/// The number `s` is, all of it ("12.5", "-3", "1e9"); nullopt for anything else ("n/a",
/// " 1", "inf").
std::optional<double> parse_number(const std::string& s);

/// The fields of one CSV record on one line (Nsight Compute's output, predictions.csv): commas
/// separate, double quotes enclose a field that holds commas, "" inside quotes is one quote, a
/// trailing CR is dropped. nullopt when a quote is left open.
std::optional<std::vector<std::string>> split_csv(const std::string& line);

// ---- run ----------------------------------------------------------------------------------------
// One GPU run as fs_table reads it: the folder bench/gpu-check.sh writes
// under book/data/<gpu-slug>/<run-id>/.
//
//   provenance.json         the GPU, driver, clocks, commit, date and command of the run
//   bench_<stage>.json      Google Benchmark JSON, one entry per shape, named
//   sdpa.json, peaks.json   <backend>/b<B>_h<H>_sq<Sq>_skv<Skv>_d<D>_<dtype>[_causal]
//   ncu_<stage>.csv         Nsight Compute, read by the ncu section below
//
// Every *.json with a "benchmarks" array is read, whatever its name. Entries named peak_* are
// the measured ceilings. A missing folder or a folder without results is not an error: it is a
// run with `missing_reason` set, which the tables and the book show as "no measurement yet".

/// Bad input (a malformed file, an unknown option value): fs_table prints it and exits 1.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The source tree whose files fs_table reads besides a run's: each stage folder's predictions.csv,
/// emu-bands.txt and sources (step sizes), bench/emu-bands.txt, bench/ncu-metrics.txt and
/// bench/plots. By default the tree it was built from; `fs_table --source-dir DIR` names another
/// (a copy of the repository: tests/stages/new-stage.sh).
const std::filesystem::path& source_dir();
void set_source_dir(std::filesystem::path dir);

/// `s` without leading and trailing white space.
std::string trim(std::string_view s);
/// A file's contents; throws InputError when it cannot be read.
std::string read_text(const std::filesystem::path& file);
/// One line of a "<words>  # <comment>" list (the metric set, the emulator's bands): its number
/// (from 1), its trimmed text, the words before '#' and the trimmed comment after it.
struct CommentedLine {
  int number = 0;
  std::string text;
  std::string words;
  std::string comment;
};
/// Every line of such a list but the blank ones and those that are only a comment.
std::vector<CommentedLine> read_commented_lines(std::istream& in);

/// The stage tree the build declares (the stage manifests, stages/<name>/stage.cmake), as it
/// writes it to <build>/stages.json:
///
///   {"stages": [{"name": "04_cp_async", "parent": "03_online_softmax", "dir": ...}, ...],
///    "baselines": [{"name": "baseline_cublas", "dir": ...}]}
///
/// The stages come in declaration order, each after its parent; only the first of each kind
/// (forward, backward) has none.
struct StageList {
  struct Stage {
    std::string name;
    std::string parent;       ///< empty for the first stage
    std::string measured_as;  ///< the name an older run measured it under (MEASURED_AS), or empty
    std::string dir;          ///< its folder, relative to the repository
    std::string large_step;   ///< why its step is above kMaxStepPercent (LARGE_STEP), or empty
    /// Its parent, the parent's parent, ... to the first stage: the walk the build made once
    /// ("ancestors" in stages.json); every "nearest ancestor" here reads this list.
    std::vector<std::string> ancestors;
    std::string number;   ///< "06c" of 06c_swizzle
    std::string title;    ///< the manifest's TITLE
    std::string teaches;  ///< the manifest's TEACHES: the stage tables' "what it teaches"
    std::string anchor;   ///< its chapter's page anchor (stage06c), empty without a chapter
    StageKind kind = StageKind::forward;  ///< the manifest's KIND
    std::string part;  ///< the manifest's PART: the book part of its chapter; empty: Part II
    /// The manifest's ARCHS (CUDA architectures, "90a"); empty: any the build targets (sm_80+).
    std::vector<std::string> archs = {};
    std::size_t faults = 0;  ///< how many planted faults its faults.cmake declares
  };
  struct Baseline {
    std::string name;
    std::string dir;
    std::string teaches;
  };
  std::vector<Stage> stages;
  std::vector<std::string> baselines;   ///< the build's own (baseline_cublas)
  std::vector<Baseline> baseline_info;  ///< the same, with their folder and what they show

  std::vector<std::string> names() const;
  /// The stage `backend` builds on; empty for the first stage and for anything not a stage.
  std::string parent_of(std::string_view backend) const;
  /// Its ancestors, nearest first (Stage::ancestors); empty for anything not a stage.
  std::vector<std::string> ancestors_of(std::string_view backend) const;
};

/// Parses a stage list; `origin` names it in messages. Throws InputError when it is not JSON of
/// that shape (the build checks the tree itself when it declares the stages).
StageList parse_stage_list(const std::string& json, const std::string& origin);
/// Reads and parses a stage list file (stages.json).
StageList load_stage_list(const std::filesystem::path& file);

/// The PyTorch SDPA backends (bench/sdpa), compared with every stage next to the build's
/// baselines.
inline constexpr std::string_view kSdpaBackends[] = {"sdpa_flash", "sdpa_cudnn", "sdpa_efficient",
                                                     "sdpa_math"};

/// The SDPA entry a backend of `kind` is compared with: `sdpa` itself ("sdpa_flash") for the
/// forward, its backward ("sdpa_bwd_flash") for the backward.
std::string sdpa_of_kind(std::string_view sdpa, StageKind kind);

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
  /// Its p10-p90 spread exceeds kNoisySpread of its median: the tables mark it "noisy", and a
  /// ratio built on it, so that no one reads it as one number.
  bool noisy() const;
  /// Forward or backward: a backward stage's entries (its KIND) and SDPA's backward backends
  /// (sdpa_bwd_<backend>, bench/sdpa/sdpa_bench.py) count the backward's FLOPs.
  StageKind kind = StageKind::forward;
  /// FLOP/s from the shape (Problem::flops of its kind, FlashAttention's count) and the median.
  double flops_per_second() const { return problem.flops(kind) / (median_ms * 1e-3); }
};

/// The spread (p90 - p10, over the median) above which a time is marked noisy.
inline constexpr double kNoisySpread = 0.15;

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
  /// Stages this run measured under the name they had then (their MEASURED_AS): stage -> that
  /// name. Their measurements carry the stage's name here; their files keep the old one.
  std::map<std::string, std::string> measured_as;
  /// Where this build's PTX hashes of every stage's kernels are (<stage>.tsv, written by
  /// tests/ptx-manifest.sh at build time); empty: not known, the kernels are not compared.
  std::filesystem::path ptx_dir;
  /// Where this build's ptxas reports are (<stage>.ptxas.txt, <build>/resources; the ptxas
  /// section): the ptxas measures of the predictions read them; empty: not known, those measures
  /// read "not measured".
  std::filesystem::path ptxas_dir;

  bool empty() const { return !missing_reason.empty(); }
  /// The name under which this run's files hold `stage`: its MEASURED_AS name when the run
  /// measured it under that name, else `stage` itself ("ncu_" + file_name(s) + ".csv").
  std::string file_name(std::string_view stage) const;
  /// file_name() of each stage, in order.
  std::vector<std::string> file_names(const std::vector<std::string>& stages) const;
  const Measurement* find(std::string_view backend, const Problem& shape) const;
  bool has_backend(std::string_view backend) const;
  /// Whether `backend`'s entries are a backward pass: a stage of KIND backward, or SDPA's
  /// backward (sdpa_bwd_<backend>).
  StageKind kind_of(std::string_view backend) const;
  /// The stage `stage` is compared with in this run's "vs parent" columns: its parent when the
  /// run measured it, else the nearest ancestor the run measured (parents it skips, nearest first,
  /// in `skipped`); empty when `stage` has no parent or no ancestor was measured.
  struct ComparedParent {
    std::string stage;
    std::vector<std::string> skipped;
  };
  ComparedParent compared_parent(std::string_view stage) const;
  /// The parents compared_parent() skipped, as "`06b_registers`, `06a_mma_sync`".
  static Text skipped_list(const ComparedParent& cp);
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

/// Loads a run, to be shown with the stages of `stages`. `dir` is a run folder, or book/data
/// itself: when it holds a CURRENT file, the run is the folder CURRENT names (relative to `dir`),
/// and CURRENT's text is the run's label. Throws InputError for a file that is
/// not valid JSON or an entry of the wrong type; a missing folder or missing files are reported
/// in the result, not thrown.
RunData load_run(const std::filesystem::path& dir, StageList stages);

// ---- compare ------------------------------------------------------------------------------------
// The comparison tables: every stage and baseline at every shape of a run.
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

/// A decode shape (Part V): at most kDecodeMaxRows query rows per sequence (Sq 1..16), bound by
/// memory: its tables show bytes per second, not FLOP/s, and shape_groups() leaves it out.
inline constexpr std::int64_t kDecodeMaxRows = 16;
bool decode_shape(const Problem& p);
/// Groups of one dtype, sweeps (most shapes) first, then by D, causal, H, tokens; no decode shape.
std::vector<ShapeGroup> shape_groups(const RunData& run, DType dtype);
/// The decode shapes of one dtype: rows = shapes (by H, H_kv, D, B, Skv), columns = the backends
/// timed at any of them, cell = "TB/s (x% of copy)": the bytes Problem::min_dram_bytes counts (K
/// and V of the cache read once, Q read and O written once) per second of the median, against
/// the device-to-device copy (peak_copy/d2d) measured in the same run. Empty when there is none.
Table decode_table(const RunData& run, DType dtype);
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

/// The backends of one kind, in RunData::backends()' order: the forward (forward stages, the
/// baselines, SDPA's forward backends) or the backward (backward stages, sdpa_bwd_<backend>).
std::vector<std::string> backends_of_kind(const RunData& run, StageKind kind);
/// Per group: rows = the backends of `kind`, columns = S, cell = "median ms / TFLOP/s" (the
/// backward's TFLOP/s count its 2.5x FLOPs).
Table overview_table(const RunData& run, const ShapeGroup& group,
                     StageKind kind = StageKind::forward);
/// One shape: rows = the backends of `kind` the run holds; columns = time, p10-p90, TFLOP/s, % of
/// peak, speedup over the parent stage, vs sdpa_flash and vs sdpa_cudnn (for the backward: vs
/// sdpa_bwd_flash and sdpa_bwd_cudnn).
Table shape_table(const RunData& run, const Problem& shape, StageKind kind = StageKind::forward);
/// One stage at every shape of the run against its parent stage, sdpa_flash, sdpa_cudnn and
/// cuBLAS: its time, rate and % of peak, and its speedup over each (the references' own times are
/// in the shape tables). A time whose spread is noisy (Measurement::noisy), and a ratio built on
/// one, carries the mark " (noisy)", explained in a note.
Table stage_table(const RunData& run, std::string_view stage, DType dtype);

/// "Run `h100/2025-01-01` on `NVIDIA H100 80GB HBM3`.": the line above every generated table.
Text run_caption(const RunData& run);

/// The legend under every table set: what the ratios mean.
Text legend();

/// The whole comparison: every overview, then every shape's detail table.
std::string comparison_report(const RunData& run, DType dtype, Format f);

// ---- ncu ----------------------------------------------------------------------------------------
// Nsight Compute CSV: parse, reduce to one value per metric, compare.
//
// bench/profile.sh writes `ncu --csv --page details --print-units base`: one row per (kernel
// launch, metric) with "Metric Name", "Metric Unit" and "Metric Value" columns, values as plain
// numbers in base units (bytes in "byte", times in "ns").
//
// A stage may launch several kernels per forward pass (00_scalar launches three). Its value of
// a metric is taken over the last launch of each distinct kernel (the profiled pass):
//   *.sum counters and gpu__time_duration.sum   summed over the kernels
//   launch__* (registers per thread)            the maximum
//   everything else (%, ratios, averages)       weighted by each kernel's duration

/// One line of bench/ncu-metrics.txt: `<metric> [optional]  # <label shown in the book>`.
struct MetricSpec {
  std::string name;
  std::string label;
  bool optional = false;  ///< not every GPU has it (the Hopper wgmma pipe)
};
std::vector<MetricSpec> parse_metric_set(std::istream& in, const std::string& source);
std::vector<MetricSpec> load_metric_set(const std::filesystem::path& file);

struct MetricValue {
  std::optional<double> value;  ///< nullopt when ncu printed no number (n/a)
  std::string unit;             ///< as ncu printed it: "byte", "ns", "%", "" ...
};

struct KernelLaunch {
  std::string id;    ///< ncu's launch ID
  std::string name;  ///< demangled kernel name as ncu printed it
  std::map<std::string, MetricValue> metrics;
};

struct NcuProfile {
  std::vector<KernelLaunch> launches;  ///< in profile order
};

/// Throws InputError when no ncu header is found or a row is malformed.
NcuProfile parse_ncu_csv(std::istream& in, const std::string& source);
NcuProfile load_ncu_csv(const std::filesystem::path& file);

/// The last launch of each distinct kernel, in order of first appearance.
std::vector<KernelLaunch> profiled_pass(const NcuProfile& p);
/// A metric over the profiled pass, reduced as described above; nullopt value when no kernel
/// has it.
MetricValue stage_value(const std::vector<KernelLaunch>& pass, const std::string& metric);

/// A kernel name for a table header: no "void ", no parameter list, no template arguments
/// unless two kernels of the pass would otherwise read the same.
std::vector<std::string> short_kernel_names(const std::vector<KernelLaunch>& pass);

/// "42.1%", "1.23 GB", "4.56 ms", "128", "3.21" by unit; "64 bytes" (exact) for unit "bytes".
std::string format_metric(const MetricValue& v);
/// "+12.3 pt" for percentages, "-42%" relative change otherwise, "=" when equal.
std::string format_change(const MetricValue& before, const MetricValue& after);

/// The `key: value` lines profile.sh writes next to `csv` (<name>.provenance.txt); empty when
/// there is none.
std::map<std::string, std::string> load_ncu_provenance(const std::filesystem::path& csv);

/// One stage's metrics: rows = the metric set (then any other metric in the CSV), columns =
/// each kernel of the pass when there are several, and the stage value.
Table ncu_table(const NcuProfile& p, const std::vector<MetricSpec>& metrics);
/// Two profiles metric by metric: before, after, change.
Table ncu_diff_table(const NcuProfile& before, const NcuProfile& after,
                     const std::vector<MetricSpec>& metrics, const std::string& before_name,
                     const std::string& after_name);

// ---- ptxas --------------------------------------------------------------------------------------
// A stage's resource report from this very build: <build>/resources/<stage>.ptxas.txt, the
// `ptxas -v` output of its objects (stages/ptxas-report.sh, collect-ptxas.cmake), demangled where
// c++filt was found. Per kernel and architecture:
//
//   ptxas info    : Compiling entry function '<kernel>' for 'sm_80'
//   ptxas info    : Function properties for <kernel>
//       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//   ptxas info    : Used 230 registers, used 1 barriers, 1024 bytes smem, 416 bytes cmem[0]
//
// Static shared memory is the "bytes smem" of that line; the dynamic shared memory a launch asks
// for is the launcher's decision and is not in the report.

struct PtxasKernel {
  std::string name;  ///< as the report prints it
  std::string arch;  ///< "sm_80", "sm_90a"
  int registers = 0;
  int stack_bytes = 0, spill_store_bytes = 0, spill_load_bytes = 0;
  int smem_bytes = 0;  ///< static shared memory; 0 where the line names none
};

/// Every entry function of a report, in its order. Throws InputError, naming the source, for an
/// entry function without its "Used ... registers" line.
std::vector<PtxasKernel> parse_ptxas_report(std::istream& in, const std::string& source);
/// Throws InputError when the file cannot be read.
std::vector<PtxasKernel> load_ptxas_report(const std::filesystem::path& file);

/// What a ptxas measure reads of a kernel: "registers" (per thread), "spill_bytes" (spill stores
/// plus spill loads), "stack_bytes" (the stack frame), "smem_bytes" (static shared memory).
inline constexpr std::string_view kPtxasQuantities[] = {"registers", "spill_bytes", "stack_bytes",
                                                        "smem_bytes"};
/// nullopt for a name not in kPtxasQuantities.
std::optional<double> ptxas_quantity(const PtxasKernel& k, std::string_view quantity);

// ---- verdict ------------------------------------------------------------------------------------
// A stage's predictions against a run: the "which metric should move, and
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
//   latency_ratio:<reference shape>:<shape>
//                                 t(stage at shape) / t(stage at reference shape): the cost of
//                                 what the shapes differ in, one stage, one run (10d's pages
//                                 against its contiguous cache)
//   ncu:<metric>                  a metric of the stage's profile (ncu_<stage>.csv), reduced over
//                                 its kernels as the Nsight Compute tables reduce it
//   ncu_ratio:<backend>:<metric>  the stage's value of a metric over another stage's
//   emu:<metric>                  the emulator's count of a metric at the profile's shape
//                                 (emulated/emu_<stage>.csv, bench/emu-profile.sh): evidence for a
//                                 counting prediction without a GPU, marked "emulated"
//   ptxas:<quantity>:<arch>:<kernels>
//                                 a quantity of kPtxasQuantities over the kernels of this build's
//                                 ptxas report of the stage (RunData::ptxas_dir) compiled for
//                                 <arch> ("sm_89"; "*": every architecture the build compiled)
//                                 whose name contains <kernels> ("Traits<128, 64, 2>"; "*": every
//                                 kernel; the rest of the measure, colons included): the smallest
//                                 and the largest, and every kernel must lie in the range
//   ptxas_ratio:<backend>:<quantity>:<arch>:<kernels>
//                                 the stage's largest value of that selection over <backend>'s
//                                 (another stage of this build, the same selection)
// A speed measure names the stage it compares with (speedup:<backend>): without that stage's time
// in the run it reads "not measured", whatever other stage the run has.
// An ncu: measure whose stage has no profile, or whose profile lacks the metric, takes the
// emulated count instead when emu_<stage>.csv has it, marked the same way.
// The ptxas measures need no GPU and no run: they are judged from the build's own reports, and the
// book shows their verdicts whether or not a run measured the stage (judged_by_build).
// low, high: the predicted range, inclusive (equal for a point prediction); claim: the header's
// words, quoted when they hold a comma. A ptxas line states a range, low below high; the one
// point it may state is 0 to 0 for spill_bytes or stack_bytes ("no spills": none at all).
//
// The verdict of each line: "as predicted" inside the range, else "below" or "above" it by the
// distance to the nearer end, relative to that end (for a ptxas measure, of its smallest or
// largest kernel).

struct Prediction {
  std::string measure;
  double low = 0, high = 0;
  std::string claim;
};

/// Throws InputError naming the source and line for a malformed line or an unknown measure.
std::vector<Prediction> parse_predictions(std::istream& in, const std::string& source);
/// An absent file is no predictions (empty), not an error.
std::vector<Prediction> load_predictions(const std::filesystem::path& file);
/// A ptxas or ptxas_ratio measure: judged from the build's reports, not from a GPU run.
bool judged_by_build(const std::string& measure);

/// What one measure came to in a run: a value with its unit, or why there is none.
struct Measured {
  std::optional<double> value;  ///< for a ptxas measure, its largest kernel's
  std::string unit;             ///< "TFLOP/s", "x", "%", or the metric's unit
  std::string reason;           ///< when there is no value
  bool emulated = false;  ///< the value is the emulator's count (emu_<stage>.csv), not measured
  std::optional<double> min_value;  ///< a ptxas measure: its smallest kernel's value
  std::string source;               ///< a ptxas measure: which kernels of which report it read
};
Measured measure(const RunData& run, const std::string& stage, const std::string& measure);

/// "as predicted", "below by 23%", "above by 4%", "not measured: ..."
std::string verdict_text(const Prediction& p, const Measured& m);

/// The table the book shows: claim, measure, predicted range, measured value, verdict; for the
/// predictions a run judges (not judged_by_build).
Table verdict_table(const RunData& run, const std::string& stage,
                    const std::vector<Prediction>& predictions);
/// The same for the predictions the build judges (judged_by_build), against its ptxas reports.
Table build_verdict_table(const RunData& run, const std::string& stage,
                          const std::vector<Prediction>& predictions);

// ---- status -------------------------------------------------------------------------------------
// What one run says about each stage, for README's status table: did its
// GPU suite pass, were its sanitizer runs clean, how fast is it at the reference shape.
//
// Read from the run folder beside the JSON: tests.log (the test binaries' output, each ending in
// a line "=== test_<stage>: exit <rc>") and sanitizers_<stage>.log (each run ending in
// "=== exit <rc>"), as bench/run.sh writes them.
//
// README holds the table between two marker lines; `fs_table status book/data --readme README.md`
// rewrites it there and `--check` only compares (a CPU test runs the check, so README cannot drift
// from the committed run).

/// Exit 0, any other, 77 (no suitable GPU), or no marker line.
enum class SuiteResult { passed, failed, skipped, not_run };
/// The GPU suite of `stage` (a stage or baseline_cublas) in the run's tests.log.
SuiteResult suite_result(const RunData& run, std::string_view stage);

struct SanitizerResult {
  int runs = 0;      ///< "=== exit" lines in sanitizers_<stage>.log
  int failures = 0;  ///< of which with a non-zero exit
};
/// Absent when the run has no sanitizers_<stage>.log.
std::optional<SanitizerResult> sanitizer_result(const RunData& run, std::string_view stage);

/// Are a stage's kernels the ones the run measured? The run folder holds the per-kernel PTX hashes
/// of its commit's sources (kPtxManifest, made by tests/ptx-manifest.sh --rev <commit>), the build
/// the same hashes of today's sources (RunData::ptx_dir); a stage the run renamed (MEASURED_AS)
/// is compared under its old folder's name.
inline constexpr std::string_view kPtxManifest = "ptx_sm_90a.tsv";
struct KernelIdentity {
  enum class State {
    not_measured,  ///< the run has no timing of the stage
    identical,     ///< every kernel's PTX (and the PTX around them) is the run's commit's
    changed,       ///< `changed` names what differs
    unknown,       ///< not compared: `reason` says why
  };
  State state = State::unknown;
  std::string commit;                ///< the run's commit (provenance.json)
  std::vector<std::string> changed;  ///< readable kernel names: changed, new or gone
  std::string reason;
};
KernelIdentity kernel_identity(const RunData& run, std::string_view stage);

/// A sanitizer result carried forward by identity: the run holds no sanitizers_<stage>.log, and
/// the newest other committed run (book/data/<gpu>/<run>) with the same compute capability whose
/// kernels of the stage are PTX-identical to this build's (RunData::ptx_dir) has one. `label` names
/// that run. Absent when the run has its own log, or no such run exists. Timings never carry.
struct CarriedSanitizers {
  SanitizerResult result;
  std::string label;
};
std::optional<CarriedSanitizers> carried_sanitizer_result(const RunData& run,
                                                          std::string_view stage);
/// The stage's status in words, for README's table and the chapters: which run measured it (and
/// under which name), whether its kernels are still that run's, or "not yet measured on a GPU"
/// with its prediction at kStatusShape when it has one.
Text stage_status(const RunData& run, std::string_view stage);
/// The chapter's status paragraph (status_<stage>.md in the book).
std::string status_fragment(const RunData& run, std::string_view stage);

/// The shape README quotes speed at (a canonical bench shape).
inline constexpr std::string_view kStatusShape = "b8_h16_sq2048_skv2048_d128_fp16";

/// Rows: every stage, baseline_cublas, and the SDPA backends; columns: GPU suite, sanitizers,
/// TFLOP/s at kStatusShape, that against sdpa_flash and sdpa_cudnn, and the stage's status
/// (stage_status). A stage the run has not timed shows no number, only its status.
Table status_table(const RunData& run);

inline constexpr std::string_view kStatusBegin =
    "<!-- status: generated by `fs_table status book/data --readme README.md`; do not edit -->";
inline constexpr std::string_view kStatusEnd = "<!-- status: end -->";

/// The Markdown between the markers: the run's caption and the table (a placeholder without a
/// run), then a note for every stage slower than its parent at kStatusShape. With `chapters`
/// (book/chapters) the note names the section of the stage's chapter (stage_<name>.md) whose
/// heading says "slower", and a slower stage whose chapter has none is an InputError: README may
/// not show a step backwards that the book does not explain.
std::string status_block(const RunData& run, const std::filesystem::path& chapters = {});
/// `readme` with the text between the markers replaced by `block`. Throws InputError when the
/// markers are missing or out of order.
std::string replace_status_block(const std::string& readme, const std::string& block);

/// README's table of the stages, generated from the stage tree (each stage's manifest): number,
/// folder, the stage it builds on, what it teaches; then the baselines. `fs_table status
/// --readme` rewrites it between these markers too, and --check compares it.
inline constexpr std::string_view kStagesBegin =
    "<!-- stages: generated from the stage manifests by `fs_table status book/data --readme "
    "README.md`; do not edit -->";
inline constexpr std::string_view kStagesEnd = "<!-- stages: end -->";
Table stage_tree_table(const StageList& stages);
/// `readme` with the stage table between kStagesBegin and kStagesEnd replaced.
std::string replace_stages_block(const std::string& readme, const StageList& stages);
/// The book's generated lists of the stages (book/chapters/index.md and part_2.md include them):
/// the table of every stage with its chapter and status, and the \subpage list of the chapters of
/// one book part (the manifests' PART; empty: Part II).
std::string book_stage_table(const RunData& run);
/// The \\subpage list of the chapters of the stages in book part `part` (the manifests' PART;
/// empty: Part II), in the tree's order.
std::string book_stage_pages(const StageList& stages, const std::string& part);
/// The front page's contents of the stage parts: Part II, then each PART in the order its first
/// stage comes in the tree, each a bold link to the part and a list of links to its chapters.
std::string book_contents(const StageList& stages);
/// The front page's reading map (reading_map.md): one row per stage, in the tree's order, with its
/// book part, the stage it builds on, the GPU it needs (the manifest's ARCHS), its state on the
/// run (kernel_identity: measured with its kernels PTX-identical, measured with kernels changed
/// since, or predicted only) and what the CPU emulator checks of it (its suite and planted
/// faults); then which part starts from which. `chapters` (book/chapters) gives the parts' short
/// names ("Part III") from the headings of part_<part>.md (part_2.md for Part II).
std::string book_reading_map(const RunData& run, const std::filesystem::path& chapters);

// ---- emulated counts ----------------------------------------------------------------------------
// The emulator's counts at a profile's shape (emu_<stage>.csv, written by bench/emu-profile.sh in
// Nsight Compute's CSV layout) against the profile (ncu_<stage>.csv), kernel by kernel (the
// profiled passes in order; their base names must agree), for the metrics both hold of
// emu_compared_metrics(). Each ratio emulated / measured must lie in its band:
//
// bench/emu-bands.txt (and a stage folder's own emu-bands.txt for the lines that name it), one band
// per line (blank lines and # comments skipped):
//
//   <stage|*> <kernel base name|*> <metric> <low> <high>  # <why this band>
//
// the most specific line (stage and kernel named, then stage, then neither) applies.

/// Where a run folder keeps the emulated counts at its profiles' shapes (emu_<stage>.csv), added
/// after the GPU run by bench/emu-profile.sh: <run>/emulated/.
inline constexpr const char* kEmulatedDir = "emulated";

struct EmuBand {
  std::string stage, kernel, metric;
  double low = 0, high = 0;
  std::string reason;
};
const std::vector<std::string>& emu_compared_metrics();
std::vector<EmuBand> parse_emu_bands(std::istream& in, const std::string& source);
std::vector<EmuBand> load_emu_bands(const std::filesystem::path& file);
/// The bands of `file` (bench/emu-bands.txt: the lines every stage shares) and of every stage
/// folder's own emu-bands.txt (`root`/<dir>/emu-bands.txt, optional), whose lines may name only
/// that stage or the name a run measured it under (MEASURED_AS); InputError otherwise.
std::vector<EmuBand> load_emu_bands(const std::filesystem::path& file, const StageList& stages,
                                    const std::filesystem::path& root);
const EmuBand* find_emu_band(const std::vector<EmuBand>& bands, const std::string& stage,
                             const std::string& kernel, const std::string& metric);
struct EmuComparison {
  Table table;
  std::vector<std::string> failures;  ///< a ratio outside its band, a missing band or file
  /// Stages with emulated counts and no profile in the run (bench/emu-profile.sh emulates them at
  /// a profiled ancestor's shape): nothing to compare, so no row; each with its provenance's
  /// not_profiled line ("" where it has none).
  std::vector<std::pair<std::string, std::string>> emulated_only;
};
EmuComparison emu_comparison(const std::filesystem::path& run_dir,
                             const std::filesystem::path& emu_dir,
                             const std::vector<std::string>& stages,
                             const std::vector<EmuBand>& bands);
/// The not_profiled line of emu_<stage>.provenance.txt in emu_dir (where bench/emu-profile.sh says
/// at which profiled ancestor's shape it emulated a stage the run did not profile); "" if none.
std::string emu_not_profiled(const std::filesystem::path& emu_dir, const std::string& stage);
/// The sentence listing a comparison's emulated-only stages; empty when there are none.
Text emulated_only_text(const EmuComparison& c);

// ---- steps --------------------------------------------------------------------------------------
// How big each step is: the code lines of a stage's kernels.cu + kernels.cuh against its parent's,
// comments and blank lines dropped and each line trimmed, compared by longest common subsequence
// (line-level LCS): lines added, lines removed, and the share of the stage's lines that are new.
// A step should teach one idea: above kMaxStepPercent new, the stage declares why in
// its manifest (LARGE_STEP "<why>"), and `fs_table steps --check` fails for a large step
// that does not, or for a declaration on a step that is no longer large.

inline constexpr const char* kStepFiles[] = {"kernels.cu", "kernels.cuh"};
inline constexpr int kMaxStepPercent = 40;

struct StepSize {
  std::string stage, parent;  ///< parent empty: the first stage
  int parent_lines = 0, child_lines = 0, added = 0, removed = 0;
  std::string large_step;  ///< the stage's LARGE_STEP reason
  double percent_new() const { return child_lines ? 100.0 * added / child_lines : 0.0; }
};

/// The code lines of a C++/CUDA source: comments (// and /* */, not inside literals) and blank
/// lines dropped, each line trimmed.
std::vector<std::string> code_lines(std::istream& in);
/// A child's lines against its parent's.
StepSize step_size(const std::vector<std::string>& parent, const std::vector<std::string>& child);
/// Every stage of the list against its parent, from the sources under `root` (the repository).
std::vector<StepSize> step_sizes(const StageList& stages, const std::filesystem::path& root);
/// Empty, or what is wrong with the step (large and undeclared, or declared and not large).
std::string step_problem(const StepSize& s);
/// The sentence each chapter opens with (step_<stage>.md in the book).
Text step_text(const StepSize& s);
/// Every step: stage, parent, lines, added, removed, % new, why larger.
Table steps_table(const std::vector<StepSize>& steps);

// ---- book ---------------------------------------------------------------------------------------
// Every generated fragment the book includes, from one run folder.
//
//   table_all.md            the full comparison (the compare section)
//   table_<stage>.md        one stage against its parent stage, sdpa_flash, sdpa_cudnn, cuBLAS
//   provenance.md           where and how the run was measured
//   ncu_<stage>.md          the fixed Nsight Compute metric set of one stage
//   ncu_diff_<stage>.md     a stage against its parent stage, metric by metric
//   verdict_<stage>.md      the stage's predictions against the run (the verdict section), then
//                           those about its registers, spills and shared memory against this
//                           build's ptxas reports, which are there with or without a run
//   emu_compare.md          the emulator's counts against the run's profiles (emu_comparison)
//   emu_<stage>.md          the same, of one stage (its chapter's Evidence)
//   step_<stage>.md         the stage's step size against its parent (steps)
//   status_<stage>.md       which run measured the stage, and whether its kernels are still the
//                           ones it measured (status_fragment), or "not yet measured on a GPU"
//   plot_stages.dat/.svg    TFLOP/s of every backend at each sweep shape (bench/plots/*.gp)
//   plot_seqlen.dat/.svg    TFLOP/s against S for the last three stages and the baselines
//
// Every file is written for every stage of the stage list whatever the run holds, so the book
// never includes a missing file: without a run each says that no measurement is committed yet
// and names the command that makes one, and each PNG is a gnuplot placeholder saying so.

/// The command a reader runs on a GPU host to produce a run.
inline constexpr const char* kGpuCheckCommand = "bench/gpu-check.sh";

struct BookResult {
  std::vector<std::filesystem::path> written;
  std::string missing_reason;         ///< non-empty: no run, every fragment is a placeholder
  std::vector<std::string> warnings;  ///< the run's inconsistencies (also in provenance.md)
};

/// Writes every fragment of the fp16 shapes of the run in `run_dir` (a run folder, or book/data:
/// its CURRENT names the run) to `out_dir`, for the stages of `stages`, with this source tree's
/// metric set (bench/ncu-metrics.txt), gnuplot scripts (bench/plots) and predictions
/// (stages/<stage>/predictions.csv); gnuplot is the one on PATH. Throws InputError on a
/// malformed input file and std::runtime_error when a file cannot be written or gnuplot fails.
/// `ptx_dir`: this build's PTX hashes (RunData::ptx_dir) for the status fragments; `ptxas_dir`:
/// its ptxas reports (RunData::ptxas_dir) for the verdicts the build judges.
BookResult write_book(const std::filesystem::path& run_dir, const std::filesystem::path& out_dir,
                      const StageList& stages, const std::filesystem::path& ptx_dir = {},
                      const std::filesystem::path& ptxas_dir = {});

}  // namespace flashsteps::table
