// fs_table/src/emulated.cpp — the emulator's counts (emu_<stage>.csv, written by
// bench/emu-profile.sh) against the committed Nsight Compute profiles (ncu_<stage>.csv): the
// comparison table, and the bands each ratio must stay within (fs_table/table.hpp).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string_view>

#include "fs_table/table.hpp"

namespace flashsteps::table {

namespace fs = std::filesystem;

namespace {

// The base name of a kernel: "void ns::(anonymous namespace)::scores_kernel<...>(...)" (the host
// compiler's) and "void ns::<unnamed>::scores_kernel<...>(const T1 *)" (ncu's) both give
// "scores_kernel".
std::string base_name(std::string s) {
  for (const char* anon : {"(anonymous namespace)", "<unnamed>"}) {
    for (auto p = s.find(anon); p != std::string::npos; p = s.find(anon))
      s.replace(p, std::string_view(anon).size(), "anon");
  }
  s = s.substr(0, s.find('('));  // the parameter list
  s = s.substr(0, s.find('<'));  // the template arguments
  if (auto c = s.rfind("::"); c != std::string::npos) s = s.substr(c + 2);
  if (auto sp = s.rfind(' '); sp != std::string::npos) s = s.substr(sp + 1);
  return s;
}

// A band's end as its file gives it: "0.95", "1.5", "0".
std::string band_number(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

bool matches(const std::string& pattern, const std::string& value) {
  return pattern == "*" || pattern == value;
}

}  // namespace

const std::vector<std::string>& emu_compared_metrics() {
  static const std::vector<std::string> m = {
      "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
      "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
      "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
      "l1tex__t_bytes.sum",
      "lts__t_bytes.sum",
      // Instruction counts: compared once a GPU run's profile holds them (bench/ncu-metrics.txt).
      "sm__inst_executed_pipe_tensor_op_hmma.sum",
      "sm__inst_executed_pipe_tensor_op_gmma.sum",
      "smsp__inst_executed_op_ldsm.sum",
      "smsp__inst_executed_op_ldgsts.sum",
      "sm__sass_inst_executed_op_shared_ld.sum",
      "sm__sass_inst_executed_op_shared_st.sum",
      "sm__sass_inst_executed_op_global_ld.sum",
      "sm__sass_inst_executed_op_global_st.sum",
  };
  return m;
}

std::vector<EmuBand> parse_emu_bands(std::istream& in, const std::string& source) {
  std::vector<EmuBand> out;
  for (const CommentedLine& line : read_commented_lines(in)) {
    std::istringstream words(line.words);
    EmuBand b;
    std::string lo, hi, extra;
    words >> b.stage >> b.kernel >> b.metric >> lo >> hi >> extra;
    const auto l = parse_number(lo), h = parse_number(hi);
    b.reason = line.comment;
    if (!l || !h || !extra.empty() || b.reason.empty() || *l > *h) {
      throw InputError(source + ":" + std::to_string(line.number) +
                       ": expected `<stage|*> <kernel|*> <metric> <low> <high>  # <reason>` "
                       "with low <= high, found: " +
                       line.text);
    }
    b.low = *l;
    b.high = *h;
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<EmuBand> load_emu_bands(const fs::path& file) {
  std::istringstream in(read_text(file));
  return parse_emu_bands(in, file.string());
}

std::vector<EmuBand> load_emu_bands(const fs::path& file, const StageList& stages,
                                    const fs::path& root) {
  std::vector<EmuBand> out = load_emu_bands(file);
  for (const StageList::Stage& st : stages.stages) {
    const fs::path own = root / st.dir / "emu-bands.txt";
    if (st.dir.empty() || !fs::exists(own)) continue;
    for (EmuBand& b : load_emu_bands(own)) {
      if (b.stage != st.name && (st.measured_as.empty() || b.stage != st.measured_as)) {
        throw InputError(own.string() + ": a band of stage " + b.stage + "; a stage folder's " +
                         "bands name that stage (" + st.name +
                         (st.measured_as.empty() ? "" : " or " + st.measured_as) + ")");
      }
      out.push_back(std::move(b));
    }
  }
  return out;
}

const EmuBand* find_emu_band(const std::vector<EmuBand>& bands, const std::string& stage,
                             const std::string& kernel, const std::string& metric) {
  // The most specific line wins: stage and kernel named, then the stage, then neither.
  const EmuBand* best = nullptr;
  int best_score = -1;
  for (const EmuBand& b : bands) {
    if (b.metric != metric || !matches(b.stage, stage) || !matches(b.kernel, kernel)) continue;
    const int score = (b.stage != "*" ? 2 : 0) + (b.kernel != "*" ? 1 : 0);
    if (score > best_score) {
      best = &b;
      best_score = score;
    }
  }
  return best;
}

std::string emu_not_profiled(const fs::path& emu_dir, const std::string& stage) {
  std::ifstream in(emu_dir / ("emu_" + stage + ".provenance.txt"));
  const std::string key = "not_profiled: ";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) == 0) return line.substr(key.size());
  }
  return "";
}

Text emulated_only_text(const EmuComparison& c) {
  if (c.emulated_only.empty()) return {};
  Text t = plain(
      "Emulated only, with no Nsight Compute profile to compare with (the run did not profile "
      "these stages), so no ratio and no band: ");
  for (std::size_t i = 0; i < c.emulated_only.size(); ++i) {
    const auto& [stage, note] = c.emulated_only[i];
    t = t + plain(i == 0 ? "" : "; ") + code(stage);
    if (!note.empty()) t = t + plain(" (" + note + ")");
  }
  return t + plain(".");
}

EmuComparison emu_comparison(const fs::path& run_dir, const fs::path& emu_dir,
                             const std::vector<std::string>& stages,
                             const std::vector<EmuBand>& bands) {
  EmuComparison c;
  Table& t = c.table;
  t.caption = plain("Emulated counts (") + code("emulated/emu_<stage>.csv") +
              plain(") against the committed Nsight Compute profiles (") + code("ncu_<stage>.csv") +
              plain(") of this run, per kernel at the profile's shape");
  t.header = {plain("stage"),    plain("kernel"), plain("metric"), plain("Nsight Compute"),
              plain("emulated"), plain("ratio"),  plain("band"),   plain("verdict")};
  t.numeric = {false, false, false, true, true, true, true, false};
  for (const std::string& stage : stages) {
    const fs::path ncu = run_dir / ("ncu_" + stage + ".csv");
    const fs::path emu = emu_dir / ("emu_" + stage + ".csv");
    if (!fs::exists(ncu)) {
      if (fs::exists(emu)) c.emulated_only.emplace_back(stage, emu_not_profiled(emu_dir, stage));
      continue;
    }
    if (!fs::exists(emu)) {
      c.failures.push_back(stage + ": no " + emu.string() + " (bench/emu-profile.sh writes it)");
      continue;
    }
    const auto measured = profiled_pass(load_ncu_csv(ncu));
    const auto emulated = profiled_pass(load_ncu_csv(emu));
    if (measured.size() != emulated.size()) {
      c.failures.push_back(stage + ": the profile has " + std::to_string(measured.size()) +
                           " kernels, the emulation " + std::to_string(emulated.size()));
      continue;
    }
    for (std::size_t k = 0; k < measured.size(); ++k) {
      const std::string kernel = base_name(measured[k].name);
      if (kernel != base_name(emulated[k].name)) {
        c.failures.push_back(stage + ": kernel " + std::to_string(k) + " is " + kernel +
                             " in the profile, " + base_name(emulated[k].name) +
                             " in the emulation");
        continue;
      }
      for (const std::string& metric : emu_compared_metrics()) {
        const auto m = measured[k].metrics.find(metric);
        const auto e = emulated[k].metrics.find(metric);
        if (m == measured[k].metrics.end() || e == emulated[k].metrics.end() || !m->second.value ||
            !e->second.value)
          continue;
        const double mv = *m->second.value, ev = *e->second.value;
        const double ratio = mv == 0 ? (ev == 0 ? 1.0 : INFINITY) : ev / mv;
        const EmuBand* band = find_emu_band(bands, stage, kernel, metric);
        std::string verdict;
        if (!band) {
          verdict = "no band";
          c.failures.push_back(stage + " " + kernel + " " + metric + ": no band in the band file");
        } else if (ratio >= band->low && ratio <= band->high) {
          verdict = "within";
        } else {
          verdict = "OUTSIDE";
          c.failures.push_back(stage + " " + kernel + " " + metric + ": ratio " +
                               fmt_sig(ratio, 4) + " outside " + band_number(band->low) + " .. " +
                               band_number(band->high));
        }
        const MetricValue mval{mv, m->second.unit}, evalue{ev, m->second.unit};
        std::string ratio_text = mv == 0 ? (ev == 0 ? "both 0" : "inf") : fmt_sig(ratio, 4);
        t.rows.push_back(
            {plain(stage), code(kernel), code(metric), plain(format_metric(mval)),
             plain(format_metric(evalue)), plain(ratio_text),
             plain(band ? band_number(band->low) + " .. " + band_number(band->high) : "-"),
             plain(verdict + (band ? " (" + band->reason + ")" : ""))});
      }
    }
  }
  return c;
}

}  // namespace flashsteps::table
