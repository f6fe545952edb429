// fs_table/src/book.cpp — the book's generated fragments (see fs_table/table.hpp).
#include "fs_table/table.hpp"

#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

extern char** environ;

namespace flashsteps::table {

namespace fs = std::filesystem;

namespace {

// How many of the last stages (in the stage list's order) the sequence-length plot follows,
// next to the baselines.
constexpr std::size_t kSeqPlotStages = 3;
constexpr DType kDType = DType::fp16;  // the book shows the fp16 shapes

// Writes the fragments into `dir`, listing every file written.
struct Writer {
  fs::path dir;
  std::vector<fs::path> written;
  void write(const std::string& name, const std::string& text) {
    std::ofstream out(dir / name, std::ios::binary);
    out << text;
    if (!out.flush()) throw std::runtime_error("cannot write " + (dir / name).string());
    written.push_back(dir / name);
  }
};

std::string md(const Text& t) {
  return render(t, Format::markdown);
}
std::string md(const Table& t) {
  return render(t, Format::markdown);
}

// The placeholder every fragment holds until a GPU run is committed.
std::string no_measurement(const Text& what) {
  return md(plain("No measurement committed yet: ") + what +
            plain(" will appear here once a GPU run is committed. Run ") + code(kGpuCheckCommand) +
            plain(" on a GPU host to produce one.")) +
         "\n";
}

// --- provenance.md ------------------------------------------------------------------------

std::string provenance_page(const RunData& run) {
  std::ostringstream os;
  os << md(run_caption(run)) << "\n\n";
  if (run.provenance.is_null()) {
    os << md(plain("This run has no provenance.json; the GPU of each results file is listed "
                   "below."))
       << "\n\n";
  } else {
    Table t;
    t.header = {plain("field"), plain("value")};
    t.numeric = {false, false};
    const std::pair<const char*, const char*> fields[] = {
        {"GPU", "gpu_name"},
        {"SMs", "gpu_sm_count"},
        {"compute capability", "gpu_compute_capability"},
        {"CUDA driver API version", "driver_version"},
        {"CUDA runtime version", "runtime_version"},
        {"SM clock (MHz)", "gpu_sm_clock_mhz"},
        {"memory clock (MHz)", "gpu_mem_clock_mhz"},
        {"git commit", "git_commit"},
        {"date", "date"},
        {"command", "command"}};
    for (const auto& [label, key] : fields) {
      const std::string v = context_text(run.provenance, key);
      t.rows.push_back({plain(label), v.empty() ? plain("not recorded") : code(v)});
    }
    os << md(t) << '\n';
  }

  Table peaks;
  peaks.caption = plain("Measured peaks (the denominators of every % of peak)");
  peaks.header = {plain("benchmark"), plain("rate")};
  peaks.numeric = {false, true};
  for (const auto& [name, p] : run.peaks) {
    const bool copy = name.rfind("peak_copy", 0) == 0;
    peaks.rows.push_back({code(name), p.per_second
                                          ? plain(copy ? fmt_sig(*p.per_second / 1e9) + " GB/s"
                                                       : fmt_sig(*p.per_second / 1e12) + " TFLOP/s")
                                          : plain("failed: ") + code(p.error)});
  }
  if (peaks.rows.empty()) {
    os << md(plain("This run has no measured peaks (peaks.json), so no table shows % of peak."))
       << "\n\n";
  } else {
    os << md(peaks) << '\n';
  }

  Table files;
  files.caption = plain("Results files");
  files.header = {plain("file"), plain("entries"), plain("failed"), plain("GPU"), plain("notes")};
  files.numeric = {false, true, true, false, false};
  for (const ResultFile& f : run.files) {
    std::string notes;
    for (const char* key : {"torch_version", "cudnn_version"}) {
      if (const std::string v = context_text(f.context, key); !v.empty()) {
        notes += (notes.empty() ? "" : ", ") + std::string(key) + " " + v;
      }
    }
    files.rows.push_back(
        {code(f.name), plain(std::to_string(f.entries)), plain(std::to_string(f.errors)),
         code(context_text(f.context, "gpu_name")), notes.empty() ? plain("") : code(notes)});
  }
  os << md(files) << '\n';

  // Which kernels PyTorch actually ran for each SDPA backend (sdpa_bench.py records them).
  Table kernels;
  kernels.caption = plain("Kernels each PyTorch SDPA backend ran");
  kernels.header = {plain("backend"), plain("kernels")};
  kernels.numeric = {false, false};
  for (const std::string& b : run.backends()) {
    std::vector<std::string> labels;
    for (const Measurement& m : run.measurements) {
      if (m.backend == b && !m.label.empty() &&
          std::find(labels.begin(), labels.end(), m.label) == labels.end()) {
        labels.push_back(m.label);
      }
    }
    // "kernels: a, b": one code span per kernel, so the cell can break between them (and the
    // stylesheet breaks a kernel name longer than the column).
    for (std::string l : labels) {
      if (l.rfind("kernels: ", 0) == 0) l.erase(0, 9);
      Text cell;
      for (std::size_t at = 0; at <= l.size();) {
        const std::size_t comma = std::min(l.find(", ", at), l.size());
        if (!cell.empty()) cell = cell + plain(", ");
        cell = cell + code(l.substr(at, comma - at));
        at = comma + 2;
      }
      kernels.rows.push_back({code(b), cell});
    }
  }
  if (!kernels.rows.empty()) os << md(kernels) << '\n';

  if (!run.warnings.empty()) {
    os << "**Consistency warnings**\n\n";
    for (const std::string& w : run.warnings)
      os << "- " << md(code(w)) << '\n';
    os << '\n';
  }
  if (const std::string smi = context_text(run.provenance, "nvidia_smi"); !smi.empty()) {
    std::string body = smi;
    for (std::size_t at; (at = body.find("```")) != std::string::npos;)
      body.replace(at, 3, "'''");
    os << "**nvidia-smi at the time of the run**\n\n```\n"
       << body << (body.empty() || body.back() == '\n' ? "" : "\n") << "```\n";
  }
  return os.str();
}

// --- Nsight Compute fragments -------------------------------------------------------------

fs::path ncu_csv(const RunData& run, std::string_view stage) {
  return run.dir / ("ncu_" + run.file_name(stage) + ".csv");
}

// "at `--batch 16 ...` on `NVIDIA H100`, `ncu 2025.1`": what profile.sh recorded next to a CSV.
Text profile_context(const fs::path& csv) {
  const auto kv = load_ncu_provenance(csv);
  Text t;
  auto field = [&](const char* key, const char* lead) {
    if (const auto it = kv.find(key); it != kv.end() && !it->second.empty()) {
      t = t + plain(lead) + code(it->second);
    }
  };
  field("runner_args", " Runner arguments: ");
  field("gpu", "; GPU: ");
  field("ncu_version", "; Nsight Compute: ");
  field("metrics_skipped", "; not collected on this GPU: ");
  return t.empty() ? t : t + plain(".");
}

// How a stage of several kernels gets one value per metric (fs_table/table.hpp, ncu), said where it
// applies.
std::string reduction_note(const NcuProfile& p, const std::string& stage) {
  const std::size_t kernels = profiled_pass(p).size();
  if (kernels < 2) return {};
  return md(code(stage) + plain(" launches " + std::to_string(kernels) +
                                " kernels per forward pass; its value of a metric sums the "
                                "counters (.sum), takes the largest register count, and weights "
                                "every other metric by each kernel's duration.")) +
         "\n\n";
}

// A stage's timing in the book: stage_table split into one table per sweep (D, mask, H, tokens),
// its rows labelled by sequence length and batch only, so that the table fits the reading column
// without a scroll bar and a row label does not wrap into a column of its own. The notes, numbered
// across the whole table, follow the last part.
std::string stage_tables_page(const RunData& run, const std::string& stage) {
  const Table all = stage_table(run, stage, kDType);
  std::string out;
  std::size_t r = 0;
  for (const ShapeGroup& g : shape_groups(run, kDType)) {
    Table part;
    part.caption = code(stage) + plain(", ") + g.caption();
    part.header = all.header;
    part.header[0] = plain("S (B)");
    part.numeric = all.numeric;
    for (const Problem& p : g.shapes) {
      std::vector<Text> row = all.rows.at(r++);
      row[0] = plain(column_label(p) + " (" + std::to_string(p.batch) + ")");
      part.rows.push_back(std::move(row));
    }
    out += md(part) + '\n';
  }
  if (r != all.rows.size()) throw std::logic_error("stage_tables_page: rows and sweeps disagree");
  if (!all.notes.empty()) {
    Table notes_only;
    notes_only.notes = all.notes;
    const std::string rendered = render(notes_only, Format::markdown);
    out += rendered.substr(rendered.find("- ("));  // the notes without an empty table
  }
  return out;
}

// The book's profile tables leave out the column of Nsight Compute names (the second): with it a
// table is wider than the reading column. The names are in the profiling chapter's metric set,
// which the line under each table points to.
Table without_names(Table t) {
  auto drop = [](auto& v) { v.erase(v.begin() + 1); };
  drop(t.header);
  drop(t.numeric);
  for (auto& row : t.rows)
    drop(row);
  return t;
}
const char* const kNamesNote =
    "\nEach metric's Nsight Compute name, and how to read it: \\ref profiling_metrics.\n";

std::string ncu_page(const RunData& run, std::string_view stage,
                     const std::vector<MetricSpec>& metrics) {
  const fs::path csv = ncu_csv(run, stage);
  if (!fs::exists(csv)) {
    return md(plain("This run has no Nsight Compute profile of ") + code(std::string(stage)) +
              plain(" (") + code(csv.filename().string()) + plain(").")) +
           "\n";
  }
  const NcuProfile p = load_ncu_csv(csv);
  Table t = without_names(ncu_table(p, metrics));
  t.caption = plain("Nsight Compute: ") + code(std::string(stage));
  return md(run_caption(run) + profile_context(csv)) + "\n\n" +
         reduction_note(p, std::string(stage)) + md(t) + kNamesNote;
}

std::string ncu_diff_page(const RunData& run, std::string_view stage,
                          const std::vector<MetricSpec>& metrics) {
  std::string prev = run.stages.parent_of(stage);
  if (prev.empty()) {
    return md(code(std::string(stage)) +
              plain(" is the first stage of its line: there is no parent's profile to compare "
                    "with.")) +
           "\n";
  }
  // An unmeasured parent: the diff is against the nearest ancestor the run measured, said so.
  const RunData::ComparedParent cp = run.compared_parent(stage);
  std::string skipped_note;
  if (!cp.stage.empty() && !cp.skipped.empty()) {
    skipped_note = md(plain("This run did not measure ") + RunData::skipped_list(cp) +
                      plain(": the diff is against ") + code(cp.stage) +
                      plain(", the nearest ancestor it measured.")) +
                   "\n\n";
    prev = cp.stage;
  }
  const fs::path before = ncu_csv(run, prev), after = ncu_csv(run, stage);
  for (const fs::path& f : {before, after}) {
    if (!fs::exists(f)) {
      return md(plain("This run has no ") + code(f.filename().string()) +
                plain(", so there is no diff of ") + code(prev) + plain(" against ") +
                code(std::string(stage)) + plain(".")) +
             "\n";
    }
  }
  const NcuProfile pb = load_ncu_csv(before), pa = load_ncu_csv(after);
  Table t = without_names(ncu_diff_table(pb, pa, metrics, prev, std::string(stage)));
  t.caption =
      plain("Nsight Compute: ") + code(prev) + plain(" against ") + code(std::string(stage));
  std::string text = md(run_caption(run)) + "\n\n" + skipped_note;
  if (const std::string a = load_ncu_provenance(before)["runner_args"],
      b = load_ncu_provenance(after)["runner_args"];
      a != b) {
    text += md(plain("The two profiles ran different arguments (") + code(a) + plain(" and ") +
               code(b) + plain("): compare them with care.")) +
            "\n\n";
  }
  return text + reduction_note(pb, prev) + reduction_note(pa, std::string(stage)) + md(t) +
         kNamesNote;
}

// --- plots --------------------------------------------------------------------------------

// gnuplot's single-quoted string: a quote is written twice.
std::string gp_string(const std::string& s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

void run_gnuplot(const std::string& script, const std::string& vars) {
  const fs::path gp = source_dir() / "bench" / "plots" / script;
  if (!fs::exists(gp)) throw std::runtime_error("gnuplot script " + gp.string() + " not found");
  std::vector<std::string> args{"gnuplot", "-e", vars, gp.string()};
  std::vector<char*> argv;
  for (std::string& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (const int err = posix_spawnp(&pid, "gnuplot", nullptr, nullptr, argv.data(), environ)) {
    throw std::runtime_error(std::string("cannot run gnuplot: ") + std::strerror(err) +
                             " (install gnuplot, e.g. Debian's gnuplot-nox)");
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("gnuplot failed on " + gp.string() + " with: " + vars);
  }
}

void placeholder_svg(Writer& w, const std::string& svg, const std::string& message,
                     const std::string& detail) {
  const fs::path out = w.dir / svg;
  run_gnuplot("placeholder.gp", "outfile=" + gp_string(out.string()) + "; message=" +
                                    gp_string(message) + "; detail=" + gp_string(detail));
  w.written.push_back(out);
}

// Sweeps (groups with more than one S) that have at least one timed value.
std::vector<ShapeGroup> sweeps(const RunData& run, DType dtype) {
  std::vector<ShapeGroup> out;
  for (const ShapeGroup& g : shape_groups(run, dtype)) {
    if (g.shapes.size() > 1) out.push_back(g);
  }
  return out;
}

std::string tflops_or_missing(const RunData& run, std::string_view b, const Problem& p) {
  const TimeLookup t = lookup_time(run, b, p);
  return t.m ? fmt_sig(t.m->flops_per_second() / 1e12, 4) : "-";
}

bool any_time(const RunData& run, std::string_view b, const std::vector<Problem>& shapes) {
  return std::any_of(shapes.begin(), shapes.end(),
                     [&](const Problem& p) { return lookup_time(run, b, p).m != nullptr; });
}

// One block per sweep: rows = backends, columns = S. Returns the titles of the blocks written.
std::vector<std::string> stages_dat(const RunData& run, const std::vector<ShapeGroup>& groups,
                                    std::ostringstream& os) {
  std::vector<std::string> titles;
  const auto backends = run.backends();
  for (const ShapeGroup& g : groups) {
    std::vector<Problem> cols;
    for (const Problem& p : g.shapes) {
      if (std::any_of(backends.begin(), backends.end(),
                      [&](const std::string& b) { return lookup_time(run, b, p).m; })) {
        cols.push_back(p);
      }
    }
    if (cols.empty()) continue;
    os << (titles.empty() ? "" : "\n\n") << "# " << render(g.caption(), Format::console)
       << ": TFLOP/s\nbackend";
    for (const Problem& p : cols)
      os << " \"" << column_label(p) << '"';
    os << '\n';
    for (const std::string& b : backends) {
      if (!any_time(run, b, cols)) continue;
      os << b;
      for (const Problem& p : cols)
        os << ' ' << tflops_or_missing(run, b, p);
      os << '\n';
    }
    titles.push_back(g.plot_title());
  }
  return titles;
}

// One block per sweep: rows = S, columns = the last stages and the baselines.
std::vector<std::string> seq_dat(const RunData& run, const std::vector<ShapeGroup>& groups,
                                 std::ostringstream& os) {
  std::vector<std::string> titles;
  std::vector<std::string> series = run.stages.names();
  series.erase(series.begin(), series.end() - std::min(series.size(), kSeqPlotStages));
  series.insert(series.end(), run.stages.baselines.begin(), run.stages.baselines.end());
  series.insert(series.end(), std::begin(kSdpaBackends), std::end(kSdpaBackends));
  for (const ShapeGroup& g : groups) {
    std::vector<std::string> cols;
    for (const std::string& b : series) {
      if (any_time(run, b, g.shapes)) cols.push_back(b);
    }
    if (cols.empty()) continue;
    os << (titles.empty() ? "" : "\n\n") << "# " << render(g.caption(), Format::console)
       << ": TFLOP/s against Sq\nSq";
    for (const std::string& b : cols)
      os << ' ' << b;
    os << '\n';
    for (const Problem& p : g.shapes) {
      os << p.seq_q;
      for (const std::string& b : cols)
        os << ' ' << tflops_or_missing(run, b, p);
      os << '\n';
    }
    titles.push_back(g.plot_title());
  }
  return titles;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v)
    out += (out.empty() ? "" : " ") + s;
  return out;
}

void write_plots(const RunData& run, Writer& w) {
  struct Plot {
    const char* name;  // stem of the .dat, .svg and .gp
    std::vector<std::string> (*data)(const RunData&, const std::vector<ShapeGroup>&,
                                     std::ostringstream&);
    const char* heading;
  };
  const Plot plots[] = {
      {"plot_stages", stages_dat, "TFLOP/s of every stage and baseline"},
      {"plot_seqlen", seq_dat, "TFLOP/s against sequence length, last stages and baselines"}};
  for (const Plot& p : plots) {
    const std::string dat = std::string(p.name) + ".dat", svg = std::string(p.name) + ".svg";
    if (run.empty()) {
      w.write(dat, "# No measurement committed yet: run " + std::string(kGpuCheckCommand) +
                       " on a GPU host to produce one.\n");
      placeholder_svg(w, svg, "No measurement committed yet.",
                      "Run " + std::string(kGpuCheckCommand) + " on a GPU host to produce one.");
      continue;
    }
    std::ostringstream os;
    const auto titles = p.data(run, sweeps(run, kDType), os);
    if (titles.empty()) {
      w.write(dat, "# This run has no timed sequence-length sweep.\n");
      placeholder_svg(w, svg, "This run has no timed sequence-length sweep.",
                      "Run " + run.label + ", " + std::string(to_string(kDType)) +
                          ": the tables list the shapes it measured.");
      continue;
    }
    w.write(dat, os.str());
    const fs::path out = w.dir / svg;
    const std::string gpu = run_gpu_name(run);
    const std::string heading = std::string(p.heading) + ", " + std::string(to_string(kDType));
    const std::string subheading = (gpu.empty() ? "" : gpu + ", ") + "run " + run.label;
    run_gnuplot(std::string(p.name) + ".gp",
                "datafile=" + gp_string((w.dir / dat).string()) +
                    "; outfile=" + gp_string(out.string()) + "; titles=" + gp_string(join(titles)) +
                    "; heading=" + gp_string(heading) + "; subheading=" + gp_string(subheading));
    w.written.push_back(out);
  }
}

}  // namespace

// The emulator's counts against the run's profiles (emulated.cpp), with bench/emu-bands.txt: of
// every stage, or of one.
static std::string emu_compare_page(const RunData& run, const std::vector<std::string>& stages,
                                    const std::vector<MetricSpec>& metrics) {
  if (run.empty()) return no_measurement(plain("the emulated counts against a profile"));
  // A stage the GPU run did not profile: its emulated counts alone, marked as such.
  if (const fs::path emu =
          run.dir / kEmulatedDir / ("emu_" + run.file_name(stages.front()) + ".csv");
      stages.size() == 1 && fs::exists(emu) &&
      !fs::exists(run.dir / ("ncu_" + run.file_name(stages.front()) + ".csv"))) {
    Table t = ncu_table(load_ncu_csv(emu), metrics);
    const std::string shape = emu_not_profiled(emu.parent_path(), run.file_name(stages.front()));
    t.caption = plain("Emulated counts of ") + code(stages.front()) +
                plain(
                    " (no GPU profile of this stage in this run): the CPU emulator, not a "
                    "measurement" +
                    (shape.empty() ? std::string() : "; " + shape));
    return md(t) + '\n';
  }
  // The run's files of a renamed stage carry the name it was measured under (MEASURED_AS).
  const EmuComparison c = emu_comparison(
      run.dir, run.dir / kEmulatedDir, run.file_names(stages),
      load_emu_bands(source_dir() / "bench" / "emu-bands.txt", run.stages, source_dir()));
  if (c.table.rows.empty())
    return md(plain("This run has no emulated counts (") + code("emu_<stage>.csv") + plain("); ") +
              code("bench/emu-profile.sh") + plain(" writes them.")) +
           "\n";
  std::string out = md(run_caption(run)) + "\n\n" + md(c.table) + '\n';
  if (const Text only = emulated_only_text(c); !only.empty()) out += '\n' + md(only) + '\n';
  for (const std::string& f : c.failures)
    out += md(plain("Not within its band: " + f)) + "\n";
  return out;
}

BookResult write_book(const fs::path& run_dir, const fs::path& out_dir, const StageList& stages,
                      const fs::path& ptx_dir, const fs::path& ptxas_dir) {
  const auto metrics = load_metric_set(source_dir() / "bench" / "ncu-metrics.txt");
  RunData run = load_run(run_dir, stages);
  run.ptx_dir = ptx_dir;
  run.ptxas_dir = ptxas_dir;
  fs::create_directories(out_dir);
  Writer w{out_dir, {}};

  if (run.empty()) {
    w.write("table_all.md", no_measurement(plain("the comparison of every stage and baseline")));
    w.write("provenance.md",
            no_measurement(plain("the GPU, driver, clocks and commit of the run")));
  } else {
    w.write("table_all.md",
            md(run_caption(run)) + "\n\n" + comparison_report(run, kDType, Format::markdown));
    w.write("provenance.md", provenance_page(run));
  }
  // The front page's table of the stages, Part II's list of their chapters and each other part's
  // (the manifests' PART), from the tree.
  w.write("stage_table.md", book_stage_table(run));
  w.write("stage_pages.md", book_stage_pages(run.stages, ""));
  w.write("contents_stages.md", book_contents(run.stages));  // the front page's contents
  w.write("reading_map.md", book_reading_map(run, source_dir() / "book" / "chapters"));
  std::vector<std::string> parts;
  for (const StageList::Stage& s : run.stages.stages) {
    if (s.part.empty() || std::find(parts.begin(), parts.end(), s.part) != parts.end()) continue;
    parts.push_back(s.part);
    w.write("stage_pages_" + s.part + ".md", book_stage_pages(run.stages, s.part));
  }
  for (const StepSize& s : step_sizes(run.stages, source_dir()))
    w.write("step_" + s.stage + ".md", md(step_text(s)) + "\n");
  for (const std::string& stage : run.stages.names()) {
    w.write("status_" + stage + ".md", status_fragment(run, stage));
    if (run.empty()) {
      const std::string parent = run.stages.parent_of(stage);
      w.write("table_" + stage + ".md", no_measurement(plain("the timing of ") + code(stage)));
      w.write("ncu_" + stage + ".md",
              no_measurement(plain("the Nsight Compute profile of ") + code(stage)));
      w.write("ncu_diff_" + stage + ".md",
              parent.empty() ? ncu_diff_page(run, stage, metrics)
                             : no_measurement(plain("the profile of ") + code(stage) +
                                              plain(" against ") + code(parent)));
      continue;
    }
    const std::string timing =
        run.shapes(kDType).empty()
            ? md(plain("This run has no " + std::string(to_string(kDType)) + " timings.")) + '\n'
            : stage_tables_page(run, stage) + '\n' + md(legend()) + '\n';
    w.write("table_" + stage + ".md", md(run_caption(run)) + "\n\n" + timing);
    w.write("ncu_" + stage + ".md", ncu_page(run, stage, metrics));
    w.write("ncu_diff_" + stage + ".md", ncu_diff_page(run, stage, metrics));
  }
  for (const std::string& stage : run.stages.names()) {
    // What a run judges, then what this build judges (its ptxas reports), which needs no run.
    std::vector<Prediction> by_run, by_build;
    for (Prediction& p : load_predictions(source_dir() / "stages" / stage / "predictions.csv"))
      (judged_by_build(p.measure) ? by_build : by_run).push_back(std::move(p));
    std::string text;
    if (run.empty()) {
      if (!by_run.empty() || by_build.empty()) {
        text = no_measurement(plain("the predictions of ") + code(stage) +
                              plain(" against a measurement"));
      }
    } else if (!by_run.empty()) {
      text = md(run_caption(run)) + "\n\n" + md(verdict_table(run, stage, by_run));
    } else if (by_build.empty()) {
      text = md(code(stage) + plain(" records no predictions (") +
                code("stages/" + stage + "/predictions.csv") + plain(").")) +
             "\n";
    }
    if (!by_build.empty())
      text += (text.empty() ? "" : "\n") + md(build_verdict_table(run, stage, by_build));
    w.write("verdict_" + stage + ".md", text);
  }
  w.write("emu_compare.md", emu_compare_page(run, run.stages.names(), metrics));
  for (const std::string& stage : run.stages.names())
    w.write("emu_" + stage + ".md", emu_compare_page(run, {stage}, metrics));
  write_plots(run, w);
  return {w.written, run.missing_reason, run.warnings};
}

}  // namespace flashsteps::table
