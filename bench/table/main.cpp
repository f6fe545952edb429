// bench/table/main.cpp — fs_table: the comparison table, the book's generated fragments and the
// Nsight Compute diff, from the files one GPU run commits under book/data/<gpu>/<run-id>/.
//
//   fs_table table RUN_DIR [--format console|markdown] [-o FILE] [--stage-list FILE]
//   fs_table book RUN_DIR OUT_DIR [--stage-list FILE] [--ptx DIR] [--ptxas DIR]
//   fs_table ncu-diff BEFORE.csv AFTER.csv
//   fs_table steps [--check] [--stage-list FILE]
//   fs_table status RUN_DIR [--readme FILE [--check]] [--stage-list FILE] [--ptx DIR]
//   fs_table emu-compare RUN_DIR [--emu-dir DIR] [--bands FILE] [--format F] [-o FILE]
//   fs_table identity RUN_DIR... --ptx DIR [--stage-list FILE]
//
// RUN_DIR is a run folder, or book/data itself: then its CURRENT file names the run. The tables
// show the fp16 shapes; the metric set, gnuplot scripts and predictions are this source tree's, or
// those of the tree `fs_table --source-dir DIR <subcommand> ...` names (a copy of the repository).
// --stage-list: the stage tree the build writes to <build>/stages.json; without it, the copy of
// that file built into fs_table (so a bundle's fs_table needs no build folder).
// Exit codes: 0 ok; 1 bad input, or (table) no measurement to show; 2 bad command line.
#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>

#include "fs_table/table.hpp"

namespace {

using namespace flashsteps;
using namespace flashsteps::table;

constexpr int kExitInput = 1;
constexpr int kExitUsage = 2;

void emit(const std::string& text, const std::string& out_file) {
  if (out_file.empty()) {
    std::cout << text;
    return;
  }
  std::ofstream out(out_file, std::ios::binary);
  out << text;
  if (!out.flush()) throw InputError("cannot write " + out_file);
}

// The build's stages.json, built in (stage_list.inc is written from it at build time).
constexpr const char* kBuiltInStageList =
#include "stage_list.inc"
    ;

StageList stage_list(const std::string& file) {
  return file.empty() ? parse_stage_list(kBuiltInStageList, "the stage list built into fs_table")
                      : load_stage_list(file);
}

int table_command(const std::string& run_dir, const std::string& format,
                  const std::string& out_file, const StageList& stages) {
  const RunData run = load_run(run_dir, stages);
  for (const std::string& w : run.warnings)
    std::cerr << "fs_table: warning: " << w << '\n';
  if (run.empty()) {
    std::cerr << "fs_table: no measurement to show: " << run.missing_reason << ".\n"
              << "Run " << kGpuCheckCommand << " on a GPU host to produce one.\n";
    return kExitInput;
  }
  const Format f = format == "markdown" ? Format::markdown : Format::console;
  emit(render(run_caption(run), f) + "\n\n" + comparison_report(run, DType::fp16, f), out_file);
  return 0;
}

int ncu_diff_command(const std::string& before, const std::string& after) {
  const auto metrics = load_metric_set(source_dir() / "bench" / "ncu-metrics.txt");
  const NcuProfile pb = load_ncu_csv(before), pa = load_ncu_csv(after);
  const std::string nb = std::filesystem::path(before).stem().string();
  const std::string na = std::filesystem::path(after).stem().string();
  Table t = ncu_diff_table(pb, pa, metrics, nb, na);
  t.caption = plain("Nsight Compute: ") + code(nb) + plain(" against ") + code(na);
  std::cout << render(t, Format::console);
  return 0;
}

// README's status table: printed, written into README's status block, or (--check) compared
// with it.
int status_command(const std::string& run_dir, const std::string& readme_file, bool check,
                   const StageList& stages, const std::string& ptx_dir) {
  RunData run = load_run(run_dir, stages);
  run.ptx_dir = ptx_dir;
  // README sits at the repository's root: the chapters that explain a slower stage are there.
  const std::string block = status_block(
      run, readme_file.empty()
               ? std::filesystem::path{}
               : std::filesystem::absolute(readme_file).parent_path() / "book" / "chapters");
  if (readme_file.empty()) {
    std::cout << block;
    return 0;
  }
  std::ifstream in(readme_file, std::ios::binary);
  if (!in) throw InputError("cannot read " + readme_file);
  const std::string old((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // README's two generated blocks: the status of the run, and the stage table of the tree.
  const std::string updated = replace_stages_block(replace_status_block(old, block), stages);
  if (check) {
    if (updated == old) return 0;
    std::cerr << "fs_table: " << readme_file << "'s status or stage table is not what "
              << (run.empty() ? std::string("the absence of a run") : "run " + run.label)
              << " gives; regenerate it with: fs_table status " << run_dir << " --readme "
              << readme_file << (ptx_dir.empty() ? "" : " --ptx " + ptx_dir) << '\n';
    return kExitInput;
  }
  emit(updated, readme_file);
  return 0;
}

// The emulator's counts against the run's profiles; exit 1 when a ratio leaves its band.
int emu_compare_command(const std::string& run_dir, const std::string& emu_dir,
                        const std::string& bands_file, const std::string& format,
                        const std::string& out_file, const StageList& stages) {
  const RunData run = load_run(run_dir, stages);
  if (run.empty()) throw InputError("no run in " + run_dir + ": " + run.missing_reason);
  // The run's files of a renamed stage carry the name it was measured under (MEASURED_AS).
  const EmuComparison c = emu_comparison(
      run.dir, emu_dir.empty() ? run.dir / kEmulatedDir : std::filesystem::path(emu_dir),
      run.file_names(stages.names()),
      load_emu_bands(bands_file.empty() ? source_dir() / "bench" / "emu-bands.txt"
                                        : std::filesystem::path(bands_file),
                     stages, source_dir()));
  const Format f = format == "markdown" ? Format::markdown : Format::console;
  std::string text = render(c.table, f);
  if (const Text only = emulated_only_text(c); !only.empty())
    text += (f == Format::markdown ? "\n" : "") + render(only, f) + "\n";
  emit(text, out_file);
  for (const std::string& f : c.failures)
    std::cerr << "fs_table emu-compare: " << f << '\n';
  if (c.table.rows.empty()) {
    std::cerr << "fs_table emu-compare: nothing compared\n";
    return kExitInput;
  }
  return c.failures.empty() ? 0 : kExitInput;
}

// Every step's size (steps section of table.hpp); --check: exit 1 naming each step above the
// limit that does not say why, or that says why and is not above it.
int steps_command(const StageList& stages, bool check) {
  const auto steps = step_sizes(stages, source_dir());
  std::cout << render(steps_table(steps), Format::console);
  int problems = 0;
  for (const StepSize& s : steps) {
    if (const std::string p = step_problem(s); !p.empty()) {
      std::cerr << "fs_table steps: " << p << '\n';
      ++problems;
    }
  }
  return check && problems ? kExitInput : 0;
}

// Per run and stage, whether this build's kernels are PTX-identical to the ones the run measured
// and which of its evidence could be carried forward on that ground (bench/bundle.sh writes the
// bundle's carried.tsv from it; timings are never carried). One tab-separated line each:
//   <stage> <identical|changed|unknown|not_measured> <run label> <file name in the run>
//   <sanitizers: yes|no> <profile: yes|no>
int identity_command(const std::vector<std::string>& run_dirs, const StageList& stages,
                     const std::string& ptx_dir) {
  std::vector<std::string> names = stages.names();
  names.insert(names.end(), stages.baselines.begin(), stages.baselines.end());
  for (const std::string& dir : run_dirs) {
    RunData run = load_run(dir, stages);
    if (run.empty()) throw InputError("no run in " + dir + ": " + run.missing_reason);
    run.ptx_dir = ptx_dir;
    for (const std::string& stage : names) {
      const KernelIdentity id = kernel_identity(run, stage);
      const char* state = id.state == KernelIdentity::State::identical      ? "identical"
                          : id.state == KernelIdentity::State::changed      ? "changed"
                          : id.state == KernelIdentity::State::not_measured ? "not_measured"
                                                                            : "unknown";
      const std::string file = run.file_name(stage);
      const auto has = [&](const std::string& f) {
        return std::filesystem::exists(run.dir / f) ? "yes" : "no";
      };
      std::cout << stage << '\t' << state << '\t' << run.label << '\t' << file << '\t'
                << has("sanitizers_" + file + ".log") << '\t' << has("ncu_" + file + ".csv")
                << '\n';
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "fs_table: the flashsteps comparison table, the book's generated fragments and the Nsight "
      "Compute diff, from one GPU run (book/data/<gpu>/<run-id>/)."};
  app.footer("Exit codes: 0 ok; 1 bad input, or no measurement to show; 2 bad command line.");
  app.require_subcommand(1);
  std::string source;
  app.add_option("--source-dir", source,
                 "the source tree whose stage folders and bench/ files to read (before the "
                 "subcommand; default: the tree fs_table was built from, " FS_TABLE_SOURCE_DIR ")")
      ->check(CLI::ExistingDirectory);
  const auto formats = CLI::IsMember({"console", "markdown"});

  std::string run_dir, out_dir, out_file, format = "console", before, after, stage_list_file,
                                          ptx_dir, ptxas_dir;
  const std::string ptx_help =
      "this build's PTX hashes, <stage>.tsv (<build>/ptx, tests/ptx-manifest.sh): whether each "
      "stage's kernels are still the ones the run measured";
  const std::string stage_list_help =
      "the stage tree (stages.json, written by the build); default: the copy built in "
      "from " FS_TABLE_STAGE_LIST;

  auto* table = app.add_subcommand("table", "print the comparison of every stage and baseline");
  table->add_option("RUN_DIR", run_dir, "run folder, or book/data (its CURRENT names the run)")
      ->required();
  table->add_option("--format", format, "console or markdown")
      ->check(formats)
      ->capture_default_str();
  table->add_option("-o,--output", out_file, "write to FILE instead of standard output");
  table->add_option("--stage-list", stage_list_file, stage_list_help);

  auto* book = app.add_subcommand(
      "book",
      "write every generated book fragment (Markdown, gnuplot data, PNG) to OUT_DIR; "
      "placeholders when RUN_DIR holds no run");
  book->add_option("RUN_DIR", run_dir, "run folder, or book/data (its CURRENT names the run)")
      ->required();
  book->add_option("OUT_DIR", out_dir, "folder for the fragments (created)")->required();
  book->add_option("--stage-list", stage_list_file, stage_list_help);
  book->add_option("--ptx", ptx_dir, ptx_help);
  book->add_option("--ptxas", ptxas_dir,
                   "this build's ptxas reports, <stage>.ptxas.txt (<build>/resources): the "
                   "predictions about registers, spills and shared memory are judged from them");

  auto* diff = app.add_subcommand("ncu-diff", "compare two Nsight Compute CSVs metric by metric");
  diff->add_option("BEFORE", before, "ncu CSV of the earlier stage")->required();
  diff->add_option("AFTER", after, "ncu CSV of the later stage")->required();

  std::string readme_file;
  bool check = false;
  auto* status = app.add_subcommand(
      "status", "README's status table (GPU suite, sanitizers, speed per stage) from a run");
  status->add_option("RUN_DIR", run_dir, "run folder, or book/data (its CURRENT names the run)")
      ->required();
  status->add_option("--readme", readme_file, "rewrite the status block of this README in place");
  status->add_flag("--check", check, "with --readme: only compare, exit 1 when it differs");
  status->add_option("--stage-list", stage_list_file, stage_list_help);
  status->add_option("--ptx", ptx_dir, ptx_help);

  bool steps_check = false;
  auto* steps = app.add_subcommand(
      "steps", "each stage's code lines against its parent's: added, removed, % new");
  steps->add_flag("--check", steps_check,
                  "exit 1 when a step above " + std::to_string(kMaxStepPercent) +
                      "% new does not declare LARGE_STEP, or one that declares it is not above");
  steps->add_option("--stage-list", stage_list_file, stage_list_help);

  std::string emu_dir, bands_file;
  auto* emu = app.add_subcommand(
      "emu-compare",
      "the emulator's counts (emu_<stage>.csv) against the run's Nsight Compute profiles, ratio "
      "and band per metric; exit 1 when a ratio leaves its band");
  emu->add_option("RUN_DIR", run_dir, "run folder, or book/data (its CURRENT names the run)")
      ->required();
  emu->add_option("--emu-dir", emu_dir,
                  "folder of the emu_<stage>.csv files (default: RUN_DIR/emulated)");
  emu->add_option("--bands", bands_file,
                  "the band file (default: bench/emu-bands.txt of the source tree)");
  emu->add_option("--format", format, "console or markdown")->check(formats)->capture_default_str();
  emu->add_option("-o,--output", out_file, "write to FILE instead of standard output");
  emu->add_option("--stage-list", stage_list_file, stage_list_help);

  std::vector<std::string> run_dirs;
  auto* identity = app.add_subcommand(
      "identity",
      "per run and stage: are this build's kernels PTX-identical to the run's, and does the run "
      "hold their sanitizer log and profile (tab-separated; bench/bundle.sh's carried.tsv)");
  identity->add_option("RUN_DIR", run_dirs, "run folders, or book/data (its CURRENT)")->required();
  identity->add_option("--ptx", ptx_dir, ptx_help)->required();
  identity->add_option("--stage-list", stage_list_file, stage_list_help);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }

  if (!source.empty()) set_source_dir(source);
  try {
    if (*diff) return ncu_diff_command(before, after);
    const StageList stages = stage_list(stage_list_file);
    if (*table) return table_command(run_dir, format, out_file, stages);
    if (*status) return status_command(run_dir, readme_file, check, stages, ptx_dir);
    if (*steps) return steps_command(stages, steps_check);
    if (*emu) return emu_compare_command(run_dir, emu_dir, bands_file, format, out_file, stages);
    if (*identity) return identity_command(run_dirs, stages, ptx_dir);
    const BookResult r = write_book(run_dir, out_dir, stages, ptx_dir, ptxas_dir);
    for (const std::string& w : r.warnings)
      std::cerr << "fs_table: warning: " << w << '\n';
    if (!r.missing_reason.empty()) {
      std::cout << "fs_table book: " << r.missing_reason
                << "; the fragments say that no measurement is committed yet\n";
    }
    std::cout << "fs_table book: wrote " << r.written.size() << " files to " << out_dir << '\n';
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "fs_table: error: " << e.what() << '\n';
    return kExitInput;
  }
}
