// fs_table/src/verdict.cpp — predictions against a run (see fs_table/table.hpp).
#include "fs_table/table.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

namespace flashsteps::table {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == sep) {
      out.emplace_back();
    } else {
      out.back().push_back(c);
    }
  }
  return out;
}

// The measure's kind and arguments, or an error message.
struct MeasureSpec {
  std::string kind;
  std::vector<std::string> args;
};
std::optional<std::string> check_measure(const std::string& m, MeasureSpec* spec) {
  auto parts = split(m, ':');
  spec->kind = parts.front();
  spec->args.assign(parts.begin() + 1, parts.end());
  struct Kind {
    const char* name;
    std::size_t args;
  };
  const Kind kinds[] = {{"tflops", 1}, {"pct_peak", 1},      {"speedup", 2},
                        {"ncu", 1},    {"latency_ratio", 2}, {"ncu_ratio", 2},
                        {"emu", 1},    {"ptxas", 3},         {"ptxas_ratio", 4}};
  for (const Kind& k : kinds) {
    if (spec->kind != k.name) continue;
    const bool ptxas = judged_by_build(spec->kind);
    // A ptxas measure's last argument, a piece of a kernel name, is the rest of the measure:
    // demangled names hold colons.
    if (ptxas && spec->args.size() > k.args) {
      for (std::size_t i = k.args; i < spec->args.size(); ++i)
        spec->args[k.args - 1] += ":" + spec->args[i];
      spec->args.resize(k.args);
    }
    if (spec->args.size() != k.args) {
      return "'" + m + "': " + k.name + " takes " + std::to_string(k.args) + " argument(s)";
    }
    for (const std::string& a : spec->args) {
      if (a.empty()) return "'" + m + "': an empty argument";
    }
    // The speed measures end with their shape; both of latency_ratio's arguments are shapes.
    std::size_t shapes = 0;
    if (spec->kind == "tflops" || spec->kind == "pct_peak" || spec->kind == "speedup") shapes = 1;
    if (spec->kind == "latency_ratio") shapes = 2;
    for (std::size_t i = spec->args.size() - shapes; i < spec->args.size(); ++i) {
      if (!parse_problem_name(spec->args[i])) {
        return "'" + m + "': '" + spec->args[i] +
               "' is not a shape name (b<B>_h<H>_sq<Sq>_skv<Skv>_d<D>_<dtype>[_causal])";
      }
    }
    if (ptxas) {
      const std::string& quantity = spec->args[spec->args.size() - 3];
      const std::string& arch = spec->args[spec->args.size() - 2];
      if (std::find(std::begin(kPtxasQuantities), std::end(kPtxasQuantities), quantity) ==
          std::end(kPtxasQuantities)) {
        return "'" + m + "': '" + quantity +
               "' is not a ptxas quantity (registers, spill_bytes, stack_bytes, smem_bytes)";
      }
      static const std::regex arch_name("sm_[0-9]+[a-z]?");
      if (arch != "*" && !std::regex_match(arch, arch_name)) {
        return "'" + m + "': '" + arch + "' is not an architecture (sm_80, sm_90a, or *)";
      }
    }
    return std::nullopt;
  }
  return "'" + m +
         "': unknown measure (tflops, pct_peak, speedup, latency_ratio, ncu, ncu_ratio, emu, "
         "ptxas, ptxas_ratio)";
}

Measured missing(std::string why) {
  Measured m;
  m.reason = std::move(why);
  return m;
}

// A value in its unit, the emulator's count when `emulated`.
Measured found(double value, std::string unit, bool emulated = false) {
  Measured m;
  m.value = value;
  m.unit = std::move(unit);
  m.emulated = emulated;
  return m;
}

// The emulator's count of a metric at the profile's shape (emu_<stage>.csv), marked emulated.
Measured emu_value(const RunData& run, const std::string& stage, const std::string& metric) {
  const fs::path csv = run.dir / kEmulatedDir / ("emu_" + run.file_name(stage) + ".csv");
  if (!fs::exists(csv)) return missing("no " + csv.filename().string());
  const MetricValue v = stage_value(profiled_pass(load_ncu_csv(csv)), metric);
  if (!v.value) return missing(metric + " not in " + csv.filename().string());
  return found(*v.value, v.unit, true);
}

// The profile's value; without one, the emulated count where there is one.
Measured ncu_value(const RunData& run, const std::string& stage, const std::string& metric) {
  const fs::path csv = run.dir / ("ncu_" + run.file_name(stage) + ".csv");
  Measured m;
  if (!fs::exists(csv)) {
    m = missing("no " + csv.filename().string());
  } else if (const MetricValue v = stage_value(profiled_pass(load_ncu_csv(csv)), metric); v.value) {
    return found(*v.value, v.unit);
  } else {
    m = missing(metric + " not in " + csv.filename().string());
  }
  const Measured e = emu_value(run, stage, metric);
  return e.value ? e : m;
}

// A ptxas measure of `stage`: its kernels in this build's report that the selection names.
Measured ptxas_value(const RunData& run, const std::string& stage, const std::string& quantity,
                     const std::string& arch, const std::string& kernels) {
  if (run.ptxas_dir.empty()) {
    return missing("no ptxas reports given (fs_table book --ptxas <build>/resources)");
  }
  const fs::path file = run.ptxas_dir / (stage + ".ptxas.txt");
  if (!fs::exists(file)) return missing("this build has no " + file.filename().string());
  std::vector<double> values;
  std::set<std::string> archs;
  for (const PtxasKernel& k : load_ptxas_report(file)) {
    if (arch != "*" && k.arch != arch) continue;
    if (kernels != "*" && k.name.find(kernels) == std::string::npos) continue;
    values.push_back(*ptxas_quantity(k, quantity));
    archs.insert(k.arch);
  }
  if (values.empty()) {
    return missing("no kernel of " + file.filename().string() + " for " +
                   (arch == "*" ? std::string("any architecture") : arch) +
                   (kernels == "*" ? std::string() : " has '" + kernels + "' in its name"));
  }
  Measured m;
  m.value = *std::max_element(values.begin(), values.end());
  m.min_value = *std::min_element(values.begin(), values.end());
  m.unit = quantity == "registers" ? "registers" : "bytes";
  std::string arch_list;
  for (const std::string& a : archs)
    arch_list += (arch_list.empty() ? "" : ", ") + a;
  m.source = std::to_string(values.size()) + " kernel" + (values.size() == 1 ? "" : "s") + " (" +
             arch_list + ") of " + file.filename().string();
  return m;
}

}  // namespace

bool judged_by_build(const std::string& measure) {
  const std::string kind = measure.substr(0, measure.find(':'));
  return kind == "ptxas" || kind == "ptxas_ratio";
}

std::vector<Prediction> parse_predictions(std::istream& in, const std::string& source) {
  std::vector<Prediction> out;
  std::string line;
  bool header_seen = false;
  for (int n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos || line[0] == '#') continue;
    const auto where = [&] { return source + ":" + std::to_string(n) + ": "; };
    const auto fields = split_csv(line);
    if (!fields) throw InputError(where() + "a quote is left open");
    const auto& f = *fields;
    if (!header_seen) {
      if (f != std::vector<std::string>{"measure", "low", "high", "claim"}) {
        throw InputError(where() + "the first line must be 'measure,low,high,claim'");
      }
      header_seen = true;
      continue;
    }
    if (f.size() != 4)
      throw InputError(where() + "expected 4 fields, found " + std::to_string(f.size()));
    Prediction p;
    p.measure = f[0];
    p.claim = f[3];
    MeasureSpec spec;
    if (const auto err = check_measure(p.measure, &spec)) throw InputError(where() + *err);
    const auto lo = parse_number(f[1]), hi = parse_number(f[2]);
    if (!lo || !hi) throw InputError(where() + "low and high must be numbers");
    if (*lo > *hi) throw InputError(where() + "low is above high");
    if (judged_by_build(p.measure) && *lo == *hi) {
      // "No spills" is a claim of none at all; any other ptxas claim has a width.
      const std::string& quantity = spec.args[spec.args.size() - 3];
      const bool none = *lo == 0 && spec.kind == "ptxas" &&
                        (quantity == "spill_bytes" || quantity == "stack_bytes");
      if (!none) {
        throw InputError(where() +
                         "a ptxas line states a range (low below high); only spill_bytes and "
                         "stack_bytes may state 0 to 0");
      }
    }
    if (p.claim.empty()) throw InputError(where() + "the claim is empty");
    p.low = *lo;
    p.high = *hi;
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<Prediction> load_predictions(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return {};
  return parse_predictions(in, file.string());
}

Measured measure(const RunData& run, const std::string& stage, const std::string& m) {
  MeasureSpec spec;
  if (const auto err = check_measure(m, &spec)) throw InputError(*err);
  if (spec.kind == "ncu") return ncu_value(run, stage, spec.args[0]);
  if (spec.kind == "emu") return emu_value(run, stage, spec.args[0]);
  if (spec.kind == "ptxas")
    return ptxas_value(run, stage, spec.args[0], spec.args[1], spec.args[2]);
  if (spec.kind == "ptxas_ratio") {
    const Measured a = ptxas_value(run, stage, spec.args[1], spec.args[2], spec.args[3]);
    const Measured b = ptxas_value(run, spec.args[0], spec.args[1], spec.args[2], spec.args[3]);
    if (!a.value) return a;
    if (!b.value) return missing(spec.args[0] + ": " + b.reason);
    if (*b.value == 0) return missing(spec.args[0] + "'s largest " + spec.args[1] + " is 0");
    Measured r = found(*a.value / *b.value, "x");
    const auto num = [&](double x) { return format_metric({x, a.unit}); };
    r.source = "the largest, " + num(*a.value) + ", of " + a.source + " over the largest, " +
               num(*b.value) + ", of " + b.source;
    return r;
  }
  if (spec.kind == "ncu_ratio") {
    Measured a = ncu_value(run, stage, spec.args[1]);
    Measured b = ncu_value(run, spec.args[0], spec.args[1]);
    if (!a.value) return a;
    if (!b.value) return b;
    // Like against like: where one side has only an emulated count, the other side's emulated
    // count (where there is one) rather than its measurement, so that the ratio holds no
    // difference between the emulator and Nsight Compute.
    if (a.emulated != b.emulated) {
      Measured& measured = a.emulated ? b : a;
      const std::string& other = a.emulated ? spec.args[0] : stage;
      if (Measured e = emu_value(run, other, spec.args[1]); e.value) measured = e;
    }
    if (*b.value == 0) return missing(spec.args[0] + "'s " + spec.args[1] + " is 0");
    return found(*a.value / *b.value, "x", a.emulated || b.emulated);
  }
  const Problem shape = *parse_problem_name(spec.args.back());
  const TimeLookup t = lookup_time(run, stage, shape);
  if (!t.m) return missing(render(t.reason, Format::console));
  if (spec.kind == "tflops") return found(t.m->flops_per_second() / 1e12, "TFLOP/s");
  if (spec.kind == "pct_peak") {
    const PeakLookup peak = lookup_gemm_peak(run, shape.dtype);
    if (!peak.flops_per_second) return missing(render(peak.reason, Format::console));
    return found(percent_of_peak(t.m->flops_per_second(), *peak.flops_per_second), "%");
  }
  if (spec.kind == "latency_ratio") {
    const Problem reference = *parse_problem_name(spec.args[0]);
    const TimeLookup ref = lookup_time(run, stage, reference);
    if (!ref.m) return missing(spec.args[0] + ": " + render(ref.reason, Format::console));
    return found(t.m->median_ms / ref.m->median_ms, "x");
  }
  const TimeLookup ref = lookup_time(run, spec.args[0], shape);  // speedup
  if (!ref.m) return missing(spec.args[0] + ": " + render(ref.reason, Format::console));
  return found(speedup(ref.m->median_ms, t.m->median_ms), "x");
}

std::string verdict_text(const Prediction& p, const Measured& m) {
  if (!m.value) return "not measured: " + m.reason;
  // A ptxas measure is a set of kernels: each must lie in the range.
  const double lo = m.min_value.value_or(*m.value), hi = *m.value;
  if (lo >= p.low && hi <= p.high) return "as predicted";
  if (lo < p.low && hi > p.high) return "outside the range at both ends";
  const double x = lo < p.low ? lo : hi, end = lo < p.low ? p.low : p.high;
  return std::string(lo < p.low ? "below" : "above") + " the range" +
         (end == 0 ? "" : " by " + fmt_percent(100.0 * std::fabs(x - end) / std::fabs(end)));
}

namespace {

// The unit of a measure's value where its kind fixes one ("" for a metric: its profile's unit).
std::string kind_unit(const std::string& m) {
  MeasureSpec spec;
  if (check_measure(m, &spec)) return "";
  if (spec.kind == "tflops") return "TFLOP/s";
  if (spec.kind == "pct_peak") return "%";
  if (spec.kind == "speedup" || spec.kind == "latency_ratio" || spec.kind == "ncu_ratio" ||
      spec.kind == "ptxas_ratio")
    return "x";
  if (spec.kind == "ptxas") return spec.args[0] == "registers" ? "registers" : "bytes";
  return "";
}

Table predictions_table(const RunData& run, const std::string& stage,
                        const std::vector<Prediction>& predictions, Text caption) {
  Table t;
  t.caption = std::move(caption);
  // The measure (a long metric or shape name) is a numbered note under the table, not a column:
  // with it the table is wider than the book's reading column.
  t.header = {plain("prediction"), plain("predicted"), plain("measured"), plain("verdict")};
  t.numeric = {false, true, true, false};
  for (const Prediction& p : predictions) {
    const Measured m = measure(run, stage, p.measure);
    // Units as the other tables print them: ratios "1.92x", the metric's own unit otherwise; where
    // nothing was measured, the unit the measure's kind implies, so that the range reads the same.
    const std::string unit = m.value ? m.unit : kind_unit(p.measure);
    const auto num = [&](double x) {
      return unit == "x" ? fmt_ratio(x) : format_metric({x, unit});
    };
    const auto span = [&](double lo, double hi) {
      return lo == hi ? num(lo) : num(lo) + " to " + num(hi);
    };
    const std::string mark = m.emulated ? " (emulated count)" : "";
    t.notes.push_back(plain("measure: ") + code(p.measure) +
                      (m.value && !m.source.empty() ? plain(", read from " + m.source) : Text{}));
    t.rows.push_back({plain(p.claim + " (" + std::to_string(t.notes.size()) + ")"),
                      plain(span(p.low, p.high)),
                      plain(m.value ? span(m.min_value.value_or(*m.value), *m.value) + mark : "-"),
                      plain(verdict_text(p, m) + (m.value ? mark : ""))});
  }
  return t;
}

}  // namespace

Table verdict_table(const RunData& run, const std::string& stage,
                    const std::vector<Prediction>& predictions) {
  return predictions_table(
      run, stage, predictions,
      plain("Predictions of ") + code(stage) +
          plain(" (its kernel header, written before any GPU run) against this run"));
}

Table build_verdict_table(const RunData& run, const std::string& stage,
                          const std::vector<Prediction>& predictions) {
  return predictions_table(run, stage, predictions,
                           plain("Predictions of ") + code(stage) +
                               plain(" about registers, spills and shared memory (its kernel "
                                     "header) against the ptxas report of the build that made "
                                     "this book: no GPU needed"));
}

}  // namespace flashsteps::table
