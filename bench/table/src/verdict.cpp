// fs_table/src/verdict.cpp — predictions against a run (see fs_table/table.hpp).
#include "fs_table/table.hpp"

#include <cmath>
#include <fstream>
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
  const Kind kinds[] = {{"tflops", 1}, {"pct_peak", 1},  {"speedup", 2},
                        {"ncu", 1},    {"ncu_ratio", 2}, {"emu", 1}};
  for (const Kind& k : kinds) {
    if (spec->kind != k.name) continue;
    if (spec->args.size() != k.args) {
      return "'" + m + "': " + k.name + " takes " + std::to_string(k.args) + " argument(s)";
    }
    for (const std::string& a : spec->args) {
      if (a.empty()) return "'" + m + "': an empty argument";
    }
    const bool shape_last =
        spec->kind == "tflops" || spec->kind == "pct_peak" || spec->kind == "speedup";
    if (shape_last && !parse_problem_name(spec->args.back())) {
      return "'" + m + "': '" + spec->args.back() +
             "' is not a shape name (b<B>_h<H>_sq<Sq>_skv<Skv>_d<D>_<dtype>[_causal])";
    }
    return std::nullopt;
  }
  return "'" + m + "': unknown measure (tflops, pct_peak, speedup, ncu, ncu_ratio, emu)";
}

Measured missing(std::string why) {
  return {std::nullopt, "", std::move(why)};
}

// The emulator's count of a metric at the profile's shape (emu_<stage>.csv), marked emulated.
Measured emu_value(const RunData& run, const std::string& stage, const std::string& metric) {
  const fs::path csv = run.dir / kEmulatedDir / ("emu_" + run.file_name(stage) + ".csv");
  if (!fs::exists(csv)) return missing("no " + csv.filename().string());
  const MetricValue v = stage_value(profiled_pass(load_ncu_csv(csv)), metric);
  if (!v.value) return missing(metric + " not in " + csv.filename().string());
  return {v.value, v.unit, "", true};
}

// The profile's value; without one, the emulated count where there is one.
Measured ncu_value(const RunData& run, const std::string& stage, const std::string& metric) {
  const fs::path csv = run.dir / ("ncu_" + run.file_name(stage) + ".csv");
  Measured m;
  if (!fs::exists(csv)) {
    m = missing("no " + csv.filename().string());
  } else if (const MetricValue v = stage_value(profiled_pass(load_ncu_csv(csv)), metric); v.value) {
    return {v.value, v.unit, ""};
  } else {
    m = missing(metric + " not in " + csv.filename().string());
  }
  const Measured e = emu_value(run, stage, metric);
  return e.value ? e : m;
}

}  // namespace

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
    return {*a.value / *b.value, "x", "", a.emulated || b.emulated};
  }
  const Problem shape = *parse_problem_name(spec.args.back());
  const TimeLookup t = lookup_time(run, stage, shape);
  if (!t.m) return missing(render(t.reason, Format::console));
  if (spec.kind == "tflops") return {t.m->flops_per_second() / 1e12, "TFLOP/s", ""};
  if (spec.kind == "pct_peak") {
    const PeakLookup peak = lookup_gemm_peak(run, shape.dtype);
    if (!peak.flops_per_second) return missing(render(peak.reason, Format::console));
    return {percent_of_peak(t.m->flops_per_second(), *peak.flops_per_second), "%", ""};
  }
  const TimeLookup ref = lookup_time(run, spec.args[0], shape);  // speedup
  if (!ref.m) return missing(spec.args[0] + ": " + render(ref.reason, Format::console));
  return {speedup(ref.m->median_ms, t.m->median_ms), "x", ""};
}

std::string verdict_text(const Prediction& p, const Measured& m) {
  if (!m.value) return "not measured: " + m.reason;
  const double x = *m.value, end = x < p.low ? p.low : p.high;
  if (x >= p.low && x <= p.high) return "as predicted";
  return std::string(x < p.low ? "below" : "above") + " the range" +
         (end == 0 ? "" : " by " + fmt_percent(100.0 * std::fabs(x - end) / std::fabs(end)));
}

Table verdict_table(const RunData& run, const std::string& stage,
                    const std::vector<Prediction>& predictions) {
  Table t;
  t.caption = plain("Predictions of ") + code(stage) +
              plain(" (its kernel header, written before any GPU run) against this run");
  // The measure (a long metric or shape name) is a numbered note under the table, not a column:
  // with it the table is wider than the book's reading column.
  t.header = {plain("prediction"), plain("predicted"), plain("measured"), plain("verdict")};
  t.numeric = {false, true, true, false};
  for (const Prediction& p : predictions) {
    const Measured m = measure(run, stage, p.measure);
    // Units as the other tables print them: ratios "1.92x", the metric's own unit otherwise.
    const auto num = [&](double x) {
      return m.unit == "x" ? fmt_ratio(x) : format_metric({x, m.unit});
    };
    const std::string range = p.low == p.high ? num(p.low) : num(p.low) + " to " + num(p.high);
    const std::string mark = m.emulated ? " (emulated count)" : "";
    t.notes.push_back(plain("measure: ") + code(p.measure));
    t.rows.push_back({plain(p.claim + " (" + std::to_string(t.notes.size()) + ")"), plain(range),
                      plain(m.value ? num(*m.value) + mark : "-"),
                      plain(verdict_text(p, m) + (m.value ? mark : ""))});
  }
  return t;
}

}  // namespace flashsteps::table
