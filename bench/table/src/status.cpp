// fs_table/src/status.cpp — README's status table from a run (see fs_table/table.hpp).
#include "fs_table/table.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <sstream>

namespace flashsteps::table {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> lines_of(const fs::path& file) {
  std::vector<std::string> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(line);
  }
  return out;
}

}  // namespace

SuiteResult suite_result(const RunData& run, std::string_view stage) {
  // "=== test_<stage>: exit <rc>" closes each test binary's output (bench/run.sh).
  const std::string marker = "=== test_" + run.file_name(stage) + ": exit ";
  for (const std::string& line : lines_of(run.dir / "tests.log")) {
    if (line.rfind(marker, 0) != 0) continue;
    const std::string rc = line.substr(marker.size());
    return rc == "0"    ? SuiteResult::passed
           : rc == "77" ? SuiteResult::skipped
                        : SuiteResult::failed;
  }
  return SuiteResult::not_run;
}

std::optional<SanitizerResult> sanitizer_result(const RunData& run, std::string_view stage) {
  const fs::path log = run.dir / ("sanitizers_" + run.file_name(stage) + ".log");
  if (!fs::exists(log)) return std::nullopt;
  SanitizerResult r;
  for (const std::string& line : lines_of(log)) {
    if (line.rfind("=== exit ", 0) != 0) continue;
    ++r.runs;
    if (line != "=== exit 0") ++r.failures;
  }
  return r;
}

namespace {

struct PtxManifest {
  std::string nvcc;    ///< the header's compiler and arch
  std::string commit;  ///< the header's commit (a manifest made with --rev)
  // source -> mangled name -> (hash, readable name)
  std::map<std::string, std::map<std::string, std::pair<std::string, std::string>>> kernels;
};

PtxManifest load_manifest(const fs::path& file) {
  PtxManifest m;
  for (const std::string& line : lines_of(file)) {
    std::vector<std::string> f;
    std::istringstream in(line);
    for (std::string field; std::getline(in, field, '\t');)
      f.push_back(field);
    if (f.size() >= 3 && f[0] == "# nvcc") {
      m.nvcc = f[1] + ", " + f[2];
      if (f.size() >= 4) m.commit = f[3];
    } else if (f.size() == 4 && !line.starts_with("#")) {
      m.kernels[f[0]][f[1]] = {f[2], f[3]};
    } else if (!line.empty()) {
      throw InputError(file.string() + ": not a line of tests/ptx-manifest.sh: " + line);
    }
  }
  return m;
}

std::string short_commit(const RunData& run) {
  return context_text(run.provenance, "git_commit");
}

}  // namespace

KernelIdentity kernel_identity(const RunData& run, std::string_view stage) {
  KernelIdentity id;
  id.commit = short_commit(run);
  if (run.empty() || !run.has_backend(stage)) {
    id.state = KernelIdentity::State::not_measured;
    return id;
  }
  // The run's hashes as this build's nvcc makes them (<build>/ptx/measured.tsv, when it is this
  // run's commit's), else the committed ones.
  fs::path manifest_file = run.dir / kPtxManifest;
  if (const fs::path rebuilt = run.ptx_dir / "measured.tsv";
      !run.ptx_dir.empty() && fs::exists(rebuilt) && !id.commit.empty()) {
    const std::string c = load_manifest(rebuilt).commit;
    if (!c.empty() && (c.starts_with(id.commit) || id.commit.starts_with(c)))
      manifest_file = rebuilt;
  }
  const fs::path current_file = run.ptx_dir / (std::string(stage) + ".tsv");
  if (!fs::exists(manifest_file)) {
    id.reason = "the run folder has no " + std::string(kPtxManifest);
    return id;
  }
  if (run.ptx_dir.empty() || !fs::exists(current_file)) {
    id.reason = "this build's PTX hashes were not given (fs_table --ptx)";
    return id;
  }
  const PtxManifest then = load_manifest(manifest_file), now = load_manifest(current_file);
  if (then.nvcc != now.nvcc) {
    id.reason = "the run's hashes are of " + then.nvcc + ", this build's of " + now.nvcc;
    return id;
  }
  if (now.kernels.size() != 1) {
    id.reason = current_file.string() + " holds " + std::to_string(now.kernels.size()) +
                " sources, not one";
    return id;
  }
  // Today's source, under the folder name the run had (MEASURED_AS).
  std::string source = now.kernels.begin()->first;
  if (const std::string old = run.file_name(stage); old != stage) {
    const std::string from = "/" + std::string(stage) + "/", to = "/" + old + "/";
    if (const auto at = source.find(from); at != std::string::npos)
      source.replace(at, from.size(), to);
  }
  const auto it = then.kernels.find(source);
  if (it == then.kernels.end()) {
    id.reason = std::string(kPtxManifest) + " has no " + source;
    return id;
  }
  const auto& a = it->second;
  const auto& b = now.kernels.begin()->second;
  for (const auto& [name, hr] : b) {
    const auto old = a.find(name);
    if (old == a.end())
      id.changed.push_back(hr.second + " (new)");
    else if (old->second.first != hr.first)
      id.changed.push_back(hr.second);
  }
  for (const auto& [name, hr] : a) {
    if (!b.contains(name)) id.changed.push_back(hr.second + " (gone)");
  }
  id.state = id.changed.empty() ? KernelIdentity::State::identical : KernelIdentity::State::changed;
  return id;
}

Text stage_status(const RunData& run, std::string_view stage) {
  const KernelIdentity id = kernel_identity(run, stage);
  if (id.state == KernelIdentity::State::not_measured) {
    Text t = plain("not yet measured on a GPU");
    const auto predictions =
        load_predictions(source_dir() / "stages" / std::string(stage) / "predictions.csv");
    for (const Prediction& p : predictions) {
      if (p.measure.ends_with(std::string(kStatusShape))) {
        return t + plain("; predicted: ") + plain(p.claim) + plain(" (") + code(p.measure) +
               plain(")");
      }
    }
    return t + plain(predictions.empty() ? "; no prediction recorded"
                                         : "; no prediction at this shape (chapter)");
  }
  Text t = plain("measured at ") + code(id.commit);
  if (const std::string old = run.file_name(stage); old != stage) t = t + plain(" as ") + code(old);
  switch (id.state) {
    case KernelIdentity::State::identical:
      return t + plain("; kernels PTX-identical to that commit's");
    case KernelIdentity::State::changed: {
      std::string names;
      for (const std::string& n : id.changed)
        names += (names.empty() ? "" : ", ") + n;
      return t + plain("; kernels changed since: ") + code(names);
    }
    default:
      return t + plain("; kernels not compared: " + id.reason);
  }
}

std::string status_fragment(const RunData& run, std::string_view stage) {
  const KernelIdentity id = kernel_identity(run, stage);
  Text t = plain("Status: ");
  if (id.state == KernelIdentity::State::not_measured) {
    t = t + stage_status(run, stage) + plain(". No committed run (") +
        (run.empty() ? plain("none yet") : code(run.label)) +
        plain(
            ") has timed this stage: the numbers in this chapter are predictions, not "
            "measurements.");
    return render(t, Format::markdown) + "\n";
  }
  t = t + plain("run ") + code(run.label) + plain(", ") + stage_status(run, stage) + plain(".");
  const Problem shape = *parse_problem_name(kStatusShape);
  if (const TimeLookup tl = lookup_time(run, stage, shape); tl.m) {
    t = t + plain(" " + fmt_sig(tl.m->flops_per_second() / 1e12) + " TFLOP/s at ") +
        code(std::string(kStatusShape)) + plain(".");
  }
  if (id.state == KernelIdentity::State::changed) {
    t = t + plain(" Its numbers are those of the kernels of ") + code(id.commit) +
        plain(", not of the changed ones.");
  }
  return render(t, Format::markdown) + "\n";
}

Table status_table(const RunData& run) {
  const Problem shape = *parse_problem_name(kStatusShape);
  Table t;
  t.caption = plain("Each stage on this run; speed at ") + code(std::string(kStatusShape)) +
              plain(" (fp16, D = 128, S = 2048, not causal)");
  t.header = {plain("stage"),         plain("GPU suite"),     plain("sanitizers"), plain("TFLOP/s"),
              plain("vs sdpa_flash"), plain("vs sdpa_cudnn"), plain("status")};
  t.numeric = {false, false, false, true, true, true, false};
  Footnotes notes;
  std::vector<std::string> rows = run.stages.names();
  rows.insert(rows.end(), run.stages.baselines.begin(), run.stages.baselines.end());
  rows.insert(rows.end(), std::begin(kSdpaBackends), std::end(kSdpaBackends));
  for (std::string_view b : kSdpaBackends) {  // SDPA's backward, where the run timed it
    if (run.has_backend(sdpa_of_kind(b, StageKind::backward)))
      rows.push_back(sdpa_of_kind(b, StageKind::backward));
  }
  for (const std::string& b : rows) {
    const bool sdpa = b.rfind("sdpa_", 0) == 0;  // timed only: no suite, no sanitizers
    std::vector<Text> row{code(b)};
    if (sdpa) {
      row.push_back(plain("-"));
      row.push_back(plain("-"));
    } else {
      const char* states[] = {"passed", "FAILED", "skipped", "not run"};
      row.push_back(plain(states[static_cast<int>(suite_result(run, b))]));
      const auto san = sanitizer_result(run, b);
      const auto carried = san ? std::nullopt : carried_sanitizer_result(run, b);
      const auto text = [](const SanitizerResult& r) {
        return r.failures
                   ? std::to_string(r.failures) + " of " + std::to_string(r.runs) + " runs FAILED"
                   : std::to_string(r.runs) + " runs, 0 errors";
      };
      row.push_back(san       ? plain(text(*san))
                    : carried ? plain(text(carried->result) + " (run ") + code(carried->label) +
                                    plain(", PTX-identical)")
                              : plain("not run"));
    }
    // A stage no GPU has timed shows no number at all, only its status (and prediction).
    const bool unmeasured = !sdpa && !run.has_backend(b);
    const TimeLookup t_b = lookup_time(run, b, shape);
    row.push_back(t_b.m        ? plain(fmt_sig(t_b.m->flops_per_second() / 1e12))
                  : unmeasured ? plain("-")
                               : notes.mark(t_b.reason));
    for (const char* ref : {"sdpa_flash", "sdpa_cudnn"}) {  // a backward against SDPA's backward
      const TimeLookup t_r = lookup_time(run, sdpa_of_kind(ref, run.kind_of(b)), shape);
      row.push_back(t_b.m && t_r.m ? plain(fmt_ratio(speedup(t_r.m->median_ms, t_b.m->median_ms)))
                                   : plain("-"));
    }
    row.push_back(sdpa ? plain("-") : stage_status(run, b));
    t.rows.push_back(std::move(row));
  }
  t.notes = notes.notes();
  return t;
}

namespace {

// The heading of `chapter` that says "slower" (its text and its {#anchor}), if any.
std::optional<std::pair<std::string, std::string>> slower_section(const fs::path& chapter) {
  for (const std::string& line : lines_of(chapter)) {
    if (line.rfind('#', 0) != 0) continue;
    std::string lower = line;
    for (char& c : lower)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower.find("slower") == std::string::npos) continue;
    std::string title = trim(line.substr(line.find_first_not_of('#')));
    std::string anchor;
    if (const std::size_t at = title.find("{#"); at != std::string::npos) {
      anchor = title.substr(at + 2, title.find('}', at) - at - 2);
      title = trim(title.substr(0, at));
    }
    return std::pair{title, anchor};
  }
  return std::nullopt;
}

// "- `04_cp_async` is slower than its parent ..." for each stage slower than its parent.
std::string slower_notes(const RunData& run, const fs::path& chapters) {
  const Problem shape = *parse_problem_name(kStatusShape);
  std::string out;
  for (const StageList::Stage& s : run.stages.stages) {
    if (s.parent.empty()) continue;
    const TimeLookup self = lookup_time(run, s.name, shape),
                     parent = lookup_time(run, s.parent, shape);
    if (!self.m || !parent.m || self.m->median_ms <= parent.m->median_ms) continue;
    Text note =
        plain("- ") + code(s.name) + plain(" is slower here than the stage it builds on, ") +
        code(s.parent) +
        plain(" (" + fmt_ratio(speedup(parent.m->median_ms, self.m->median_ms)) + " its speed)");
    std::string link;
    if (!chapters.empty()) {
      const fs::path chapter = chapters / ("stage_" + s.name + ".md");
      const auto section = slower_section(chapter);
      if (!section) {
        throw InputError(s.name + " is slower than its parent " + s.parent + " at " +
                         std::string(kStatusShape) + ", and its chapter " + chapter.string() +
                         " has no section whose heading says why ('slower'): README's status "
                         "table would show a step backwards that the book does not explain");
      }
      note = note + plain(": its chapter says why, in \"" + section->first + "\"");
      link = " ([book/chapters/" + chapter.filename().string() + "](book/chapters/" +
             chapter.filename().string() + ")" +
             (section->second.empty() ? "" : ", section `" + section->second + "` of the book") +
             ").";
    } else {
      note = note + plain(": its chapter says why.");
    }
    out += render(note, Format::markdown) + link + "\n";
  }
  return out;
}

}  // namespace

std::string status_block(const RunData& run, const fs::path& chapters) {
  // A run folder with test or sanitizer logs but no timings yet (run.sh --steps tests,...) still
  // gets its table; only a folder with neither is "no run".
  bool has_logs = fs::exists(run.dir / "tests.log");
  for (const std::string& s : run.stages.names())
    has_logs = has_logs || sanitizer_result(run, s).has_value();
  if (run.empty() && has_logs) {
    return render(plain("Run folder ") + code(run.dir.filename().string()) +
                      plain(" (no timings: ") + plain(run.missing_reason) + plain(")."),
                  Format::markdown) +
           "\n\n" + render(status_table(run), Format::markdown);
  }
  if (run.empty()) {
    return render(plain("No GPU run is committed yet: every stage compiles and passes the CPU "
                        "tests, but none has run on a GPU. Run ") +
                      code(kGpuCheckCommand) + plain(" on a GPU host to produce one."),
                  Format::markdown) +
           "\n";
  }
  const std::string slower = slower_notes(run, chapters);
  return render(run_caption(run), Format::markdown) + "\n\n" +
         render(status_table(run), Format::markdown) + (slower.empty() ? "" : "\n" + slower);
}

namespace {

std::string replace_between(const std::string& text, std::string_view begin_marker,
                            std::string_view end_marker, const std::string& block,
                            const std::string& what) {
  const std::size_t begin = text.find(begin_marker);
  const std::size_t end = text.find(end_marker);
  if (begin == std::string::npos || end == std::string::npos || end < begin) {
    throw InputError("the README has no " + what + ": put the line '" + std::string(begin_marker) +
                     "' and, below it, '" + std::string(end_marker) + "' where it belongs");
  }
  const std::size_t body = begin + begin_marker.size();
  return text.substr(0, body) + "\n" + block + (block.ends_with('\n') ? "" : "\n") +
         text.substr(end);
}

std::string number_of(const StageList& stages, const std::string& name) {
  for (const StageList::Stage& s : stages.stages) {
    if (s.name == name) return s.number.empty() ? s.name : s.number;
  }
  return name;
}

}  // namespace

std::string replace_status_block(const std::string& readme, const std::string& block) {
  return replace_between(readme, kStatusBegin, kStatusEnd, block, "status block");
}

Table stage_tree_table(const StageList& stages) {
  Table t;
  t.header = {plain("stage"), plain("folder"), plain("builds on"), plain("what it teaches")};
  t.numeric = {false, false, false, false};
  for (const StageList::Stage& s : stages.stages) {
    // The first stage of the backward line builds on no stage: it starts its own line.
    const std::string parent = !s.parent.empty()               ? number_of(stages, s.parent)
                               : s.kind == StageKind::backward ? "— (the backward line starts here)"
                                                               : "—";
    t.rows.push_back(
        {plain(number_of(stages, s.name)), code(s.dir), plain(parent), inline_markup(s.teaches)});
  }
  for (const StageList::Baseline& b : stages.baseline_info)
    t.rows.push_back({plain("—"), code(b.dir), plain("—"), inline_markup(b.teaches)});
  return t;
}

std::string replace_stages_block(const std::string& readme, const StageList& stages) {
  return replace_between(readme, kStagesBegin, kStagesEnd,
                         render(stage_tree_table(stages), Format::markdown), "stage table");
}

std::string book_stage_table(const RunData& run) {
  std::string md =
      "| stage | builds on | chapter | what it teaches | status |\n|---|---|---|---|---|\n";
  for (const StageList::Stage& s : run.stages.stages) {
    md += "| " + render(code(s.name), Format::markdown) + " | " +
          (s.parent.empty() ? std::string("—") : render(code(s.parent), Format::markdown)) +
          " | \\ref " + s.anchor + " | " + render(inline_markup(s.teaches), Format::markdown) +
          " | " + render(stage_status(run, s.name), Format::markdown) + " |\n";
  }
  return md;
}

std::string book_stage_pages(const StageList& stages, const std::string& part) {
  std::string md;
  int k = 0;
  for (const StageList::Stage& s : stages.stages)
    if (s.part == part) md += std::to_string(++k) + ". \\subpage " + s.anchor + "\n";
  return md;
}

std::string book_contents(const StageList& stages) {
  std::vector<std::string> parts = {""};
  for (const StageList::Stage& s : stages.stages)
    if (std::find(parts.begin(), parts.end(), s.part) == parts.end()) parts.push_back(s.part);
  std::string md;
  for (const std::string& part : parts) {
    md += "<b>\\ref " + (part.empty() ? std::string("part2") : "part_" + part) + "</b>\n\n";
    for (const StageList::Stage& s : stages.stages)
      if (s.part == part && !s.anchor.empty()) md += "- \\ref " + s.anchor + "\n";
    md += "\n";
  }
  return md;
}

}  // namespace flashsteps::table
