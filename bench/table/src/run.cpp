// fs_table/src/run.cpp — reading one run folder (see fs_table/table.hpp, run, for its layout).
#include "fs_table/table.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace flashsteps::table {

namespace fs = std::filesystem;

namespace {
fs::path& source_dir_storage() {
  static fs::path dir = FS_TABLE_SOURCE_DIR;
  return dir;
}
}  // namespace

const fs::path& source_dir() {
  return source_dir_storage();
}
void set_source_dir(fs::path dir) {
  source_dir_storage() = std::move(dir);
}

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  return std::string(s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1));
}

std::vector<CommentedLine> read_commented_lines(std::istream& in) {
  std::vector<CommentedLine> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    const auto hash = t.find('#');
    std::string comment = hash == std::string::npos ? "" : trim(t.substr(hash + 1));
    std::string words = t.substr(0, hash);
    out.push_back({n, std::move(t), std::move(words), std::move(comment)});
  }
  return out;
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError("cannot read " + file.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const Measurement* RunData::find(std::string_view backend, const Problem& shape) const {
  const std::string name = shape.name();
  for (const Measurement& m : measurements) {
    if (m.backend == backend && m.problem.name() == name) return &m;
  }
  return nullptr;
}

std::string RunData::file_name(std::string_view stage) const {
  const auto it = measured_as.find(std::string(stage));
  return it == measured_as.end() ? std::string(stage) : it->second;
}

std::vector<std::string> RunData::file_names(const std::vector<std::string>& stages) const {
  std::vector<std::string> out;
  for (const std::string& s : stages)
    out.push_back(file_name(s));
  return out;
}

bool RunData::has_backend(std::string_view backend) const {
  return std::any_of(measurements.begin(), measurements.end(),
                     [&](const Measurement& m) { return m.backend == backend; });
}

StageKind RunData::kind_of(std::string_view backend) const {
  if (backend.rfind("sdpa_bwd_", 0) == 0) return StageKind::backward;
  for (const StageList::Stage& s : stages.stages) {
    if (s.name == backend) return s.kind;
  }
  return StageKind::forward;
}

std::string sdpa_of_kind(std::string_view sdpa, StageKind kind) {
  if (kind == StageKind::forward) return std::string(sdpa);
  return "sdpa_bwd_" + std::string(sdpa.substr(std::string_view("sdpa_").size()));
}

RunData::ComparedParent RunData::compared_parent(std::string_view stage) const {
  ComparedParent out;
  for (const std::string& p : stages.ancestors_of(stage)) {
    if (has_backend(p)) {
      out.stage = p;
      return out;
    }
    out.skipped.push_back(p);
  }
  out.skipped.clear();
  return out;
}

Text RunData::skipped_list(const ComparedParent& cp) {
  Text t;
  for (std::size_t k = 0; k < cp.skipped.size(); ++k)
    t = t + plain(k ? ", " : "") + code(cp.skipped[k]);
  return t;
}

std::vector<std::string> StageList::names() const {
  std::vector<std::string> out;
  for (const Stage& s : stages)
    out.push_back(s.name);
  return out;
}

std::string StageList::parent_of(std::string_view backend) const {
  for (const Stage& s : stages) {
    if (s.name == backend) return s.parent;
  }
  return {};
}

std::vector<std::string> StageList::ancestors_of(std::string_view backend) const {
  for (const Stage& s : stages) {
    if (s.name == backend) return s.ancestors;
  }
  return {};
}

StageList parse_stage_list(const std::string& json, const std::string& origin) {
  StageList list;
  try {
    const auto j = nlohmann::json::parse(json);
    for (const auto& e : j.at("stages")) {
      const auto& parent = e.value("parent", nlohmann::json());
      list.stages.push_back(
          {e.at("name").get<std::string>(), parent.is_null() ? "" : parent.get<std::string>(),
           e.value("measured_as", std::string()), e.value("dir", std::string()),
           e.value("large_step", std::string()), e.value("ancestors", std::vector<std::string>()),
           e.value("number", std::string()), e.value("title", std::string()),
           e.value("teaches", std::string()), e.value("anchor", std::string()),
           e.value("kind", std::string("forward")) == "backward" ? StageKind::backward
                                                                 : StageKind::forward,
           e.value("part", std::string()), e.value("archs", std::vector<std::string>()),
           e.value("faults", std::vector<std::string>()).size()});
    }
    for (const auto& e : j.value("baselines", nlohmann::json::array())) {
      list.baselines.push_back(e.at("name").get<std::string>());
      list.baseline_info.push_back({list.baselines.back(), e.value("dir", std::string()),
                                    e.value("teaches", std::string())});
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError(origin + ": " + e.what() +
                     " (the stage list the build writes to stages.json)");
  }
  return list;
}

StageList load_stage_list(const fs::path& file) {
  return parse_stage_list(read_text(file), file.string());
}

std::vector<std::string> RunData::backends() const {
  std::vector<std::string> out = stages.names();
  out.insert(out.end(), stages.baselines.begin(), stages.baselines.end());
  for (std::string_view s : kSdpaBackends)
    out.emplace_back(s);
  std::vector<std::string> extra;
  for (const Measurement& m : measurements) {
    if (std::find(out.begin(), out.end(), m.backend) == out.end() &&
        std::find(extra.begin(), extra.end(), m.backend) == extra.end()) {
      extra.push_back(m.backend);
    }
  }
  std::sort(extra.begin(), extra.end());
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

std::vector<Problem> RunData::shapes(DType dtype) const {
  std::vector<Problem> out;
  std::vector<std::string> seen;
  for (const Measurement& m : measurements) {
    if (m.problem.dtype != dtype) continue;
    const std::string name = m.problem.name();
    if (std::find(seen.begin(), seen.end(), name) == seen.end()) {
      seen.push_back(name);
      out.push_back(m.problem);
    }
  }
  return out;
}

std::string context_text(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key)) return {};
  const auto& v = obj.at(key);
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::string run_gpu_name(const RunData& run) {
  std::string gpu = context_text(run.provenance, "gpu_name");
  for (const ResultFile& f : run.files) {
    if (gpu.empty()) gpu = context_text(f.context, "gpu_name");
  }
  return gpu;
}

namespace {

// "<gpu-slug>/<run-id>": the last two components of the folder.
std::string folder_label(const fs::path& dir) {
  const fs::path p = fs::absolute(dir).lexically_normal();
  const fs::path clean = p.has_filename() ? p : p.parent_path();
  return (clean.parent_path().filename() / clean.filename()).generic_string();
}

void read_entry(const nlohmann::json& e, const std::string& file, RunData* run, ResultFile* rf) {
  if (!e.is_object() || !e.contains("name") || !e.at("name").is_string()) {
    throw InputError(file + ": a benchmark entry has no string \"name\"");
  }
  if (e.value("run_type", std::string("iteration")) == "aggregate") return;
  const std::string name = e.at("name").get<std::string>();
  // <backend>/<shape>[/...]: Google Benchmark appends /iterations:N/manual_time and the like.
  const auto slash = name.find('/');
  const std::string backend = name.substr(0, slash);
  const std::string rest = slash == std::string::npos ? "" : name.substr(slash + 1);
  const std::string shape = rest.substr(0, rest.find('/'));

  const bool failed = e.value("error_occurred", false);
  const std::string error =
      failed ? e.value("error_message", std::string("error_occurred, with no error_message")) : "";
  ++rf->entries;
  if (failed) ++rf->errors;
  auto number = [&](const char* key) -> std::optional<double> {
    if (!e.contains(key)) return std::nullopt;
    if (!e.at(key).is_number())
      throw InputError(file + ": " + name + ": \"" + key + "\" is not a number");
    return e.at(key).get<double>();
  };

  if (backend.rfind("peak_", 0) == 0) {
    run->has_peaks_file = true;
    Peak p;
    const char* counter = backend == "peak_copy" ? "bytes_per_second" : "FLOP/s";
    if (failed) {
      p.error = error;
    } else if (auto v = number(counter); v && *v > 0) {
      p.per_second = v;
    } else {
      p.error = std::string("no positive ") + counter + " counter";
    }
    run->peaks[backend + "/" + shape] = p;
    return;
  }

  const auto problem = parse_problem_name(shape);
  if (!problem) {
    run->warnings.push_back(file + ": skipped \"" + name +
                            "\": not <backend>/b<B>_h<H>_sq<Sq>_skv<Skv>_d<D>_<dtype>[_causal]");
    return;
  }
  if (run->find(backend, *problem)) {
    run->warnings.push_back(file + ": \"" + name + "\" appears again; the first entry is used");
    return;
  }
  Measurement m;
  m.backend = backend;
  m.kind = backend.rfind("sdpa_bwd_", 0) == 0 ? StageKind::backward : StageKind::forward;
  m.problem = *problem;
  m.file = file;
  m.label = e.value("label", std::string());
  if (failed) {
    m.error = error;
  } else if (auto median = number("median_ms"); !median || !(*median > 0)) {
    m.error = "malformed entry: no positive median_ms counter";
    run->warnings.push_back(file + ": " + name + ": " + m.error);
  } else {
    m.median_ms = *median;
    m.p10_ms = number("p10_ms");
    m.p90_ms = number("p90_ms");
  }
  run->measurements.push_back(std::move(m));
}

void read_results_file(const nlohmann::json& j, const std::string& file, RunData* run) {
  const auto& benchmarks = j.at("benchmarks");
  if (!benchmarks.is_array()) throw InputError(file + ": \"benchmarks\" is not an array");
  ResultFile rf;
  rf.name = file;
  rf.context = j.value("context", nlohmann::json::object());
  for (const auto& e : benchmarks)
    read_entry(e, file, run, &rf);
  run->files.push_back(std::move(rf));
}

}  // namespace

static fs::path resolve_run_dir(const fs::path& dir, std::string* label,
                                std::string* missing_reason) {
  if (!fs::exists(dir)) {
    *missing_reason = "the run folder " + dir.string() + " does not exist";
    return dir;
  }
  const fs::path current = dir / "CURRENT";
  if (!fs::is_regular_file(current)) {
    *label = folder_label(dir);
    return dir;
  }
  const std::string name = trim(read_text(current));
  if (name.empty()) {
    *missing_reason = current.string() + " is empty";
    return dir;
  }
  *label = name;
  const fs::path run = dir / name;
  if (!fs::is_directory(run)) {
    *missing_reason =
        current.string() + " names " + name + ", which is not a folder under " + dir.string();
  }
  return run;
}

RunData load_run(const fs::path& dir, StageList stages) {
  RunData run;
  run.stages = std::move(stages);
  run.dir = resolve_run_dir(dir, &run.label, &run.missing_reason);
  if (!run.missing_reason.empty()) return run;
  if (!fs::is_directory(run.dir)) {
    run.missing_reason = run.dir.string() + " is not a folder";
    return run;
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(run.dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".json")
      files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& path : files) {
    const std::string file = path.filename().string();
    try {
      const auto j = nlohmann::json::parse(read_text(path));
      if (file == "provenance.json") {
        if (!j.is_object()) throw InputError(file + ": not a JSON object");
        run.provenance = j;
      } else if (j.is_object() && j.contains("benchmarks")) {
        read_results_file(j, file, &run);
      }
    } catch (const nlohmann::json::exception& e) {
      throw InputError(path.string() + ": " + e.what());
    }
  }
  // A stage renamed since this run (MEASURED_AS): when the run holds nothing under its name and
  // something under its old one, its measurements take the stage's name and its files are read
  // under the old name.
  const auto holds = [&](const std::string& name) {
    if (run.has_backend(name)) return true;
    for (const auto& entry : fs::directory_iterator(run.dir)) {
      const std::string f = entry.path().stem().string();
      if (f.size() > name.size() && f.ends_with("_" + name)) return true;
    }
    return false;
  };
  for (const StageList::Stage& s : run.stages.stages) {
    if (s.measured_as.empty() || holds(s.name) || !holds(s.measured_as)) continue;
    run.measured_as[s.name] = s.measured_as;
    for (Measurement& m : run.measurements) {
      if (m.backend == s.measured_as) m.backend = s.name;
    }
  }
  // A backward stage's entries count the backward's FLOPs.
  for (const StageList::Stage& s : run.stages.stages) {
    if (s.kind != StageKind::backward) continue;
    for (Measurement& m : run.measurements) {
      if (m.backend == s.name) m.kind = StageKind::backward;
    }
  }
  if (run.measurements.empty() && run.peaks.empty()) {
    run.missing_reason = "no benchmark results in " + run.dir.string() +
                         " (a run folder holds *.json files with a \"benchmarks\" array; "
                         "book/data names its run in a CURRENT file)";
  }
  return run;
}

}  // namespace flashsteps::table
