// fs_table/src/ncu.cpp — Nsight Compute CSV parsing and the metric tables (fs_table/table.hpp).
#include "fs_table/table.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

namespace flashsteps::table {

namespace fs = std::filesystem;

namespace {

KernelLaunch& launch_with_id(NcuProfile& p, const std::string& id, const std::string& name) {
  for (KernelLaunch& k : p.launches) {
    if (k.id == id) return k;
  }
  p.launches.push_back({id, name, {}});
  return p.launches.back();
}

}  // namespace

std::vector<MetricSpec> parse_metric_set(std::istream& in, const std::string& source) {
  std::vector<MetricSpec> out;
  for (const CommentedLine& line : read_commented_lines(in)) {
    std::istringstream words(line.words);
    MetricSpec m;
    std::string word, extra;
    words >> m.name >> word >> extra;
    m.optional = word == "optional";
    m.label = line.comment;
    if (m.label.empty() || (!word.empty() && !m.optional) || !extra.empty()) {
      throw InputError(source + ":" + std::to_string(line.number) +
                       ": expected `<metric> [optional]  # <label>`, found: " + line.text);
    }
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<MetricSpec> load_metric_set(const fs::path& file) {
  std::istringstream in(read_text(file));
  return parse_metric_set(in, file.string());
}

NcuProfile parse_ncu_csv(std::istream& in, const std::string& source) {
  NcuProfile p;
  std::vector<std::string> header;
  std::string line;
  int n = 0;
  while (header.empty() && std::getline(in, line)) {
    ++n;
    if (line.rfind("\"ID\",", 0) == 0) header = split_csv(line).value_or(header);
  }
  auto col = [&](const char* name) {
    return static_cast<std::size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  const std::size_t kernel = col("Kernel Name"), metric = col("Metric Name"),
                    unit = col("Metric Unit"), value = col("Metric Value");
  if (std::max({kernel, metric, unit, value}) >= header.size()) {
    throw InputError(source +
                     ": no Nsight Compute CSV header (\"ID\",...,\"Kernel Name\",...,"
                     "\"Metric Value\") found");
  }
  while (std::getline(in, line)) {
    ++n;
    if (trim(line).empty()) continue;
    const auto f = split_csv(line);
    if (!f || f->size() != header.size()) {
      throw InputError(source + ":" + std::to_string(n) + ": expected " +
                       std::to_string(header.size()) + " fields, found " +
                       (f ? std::to_string(f->size()) : std::string("an unterminated quote")));
    }
    launch_with_id(p, (*f)[0], (*f)[kernel]).metrics[(*f)[metric]] = {parse_number((*f)[value]),
                                                                      (*f)[unit]};
  }
  if (p.launches.empty()) throw InputError(source + ": the profile holds no kernel launch");
  return p;
}

NcuProfile load_ncu_csv(const fs::path& file) {
  std::istringstream in(read_text(file));
  return parse_ncu_csv(in, file.filename().string());
}

std::vector<KernelLaunch> profiled_pass(const NcuProfile& p) {
  std::vector<KernelLaunch> pass;
  for (const KernelLaunch& k : p.launches) {
    auto it = std::find_if(pass.begin(), pass.end(),
                           [&](const KernelLaunch& q) { return q.name == k.name; });
    if (it == pass.end()) {
      pass.push_back(k);
    } else {
      *it = k;  // a later launch of the same kernel: keep the last one, in its first place
    }
  }
  return pass;
}

MetricValue stage_value(const std::vector<KernelLaunch>& pass, const std::string& metric) {
  static const std::string kDuration = "gpu__time_duration.sum";
  MetricValue out;
  std::vector<std::pair<double, std::optional<double>>> values;  // (value, duration)
  for (const KernelLaunch& k : pass) {
    const auto it = k.metrics.find(metric);
    if (it == k.metrics.end()) continue;
    if (out.unit.empty()) out.unit = it->second.unit;
    if (!it->second.value) continue;
    const auto d = k.metrics.find(kDuration);
    values.emplace_back(*it->second.value, d == k.metrics.end() ? std::nullopt : d->second.value);
  }
  if (values.empty()) return out;
  const bool is_sum = metric.size() > 4 && metric.compare(metric.size() - 4, 4, ".sum") == 0;
  double r = 0;
  if (metric.rfind("launch__", 0) == 0) {
    r = std::max_element(values.begin(), values.end())->first;
  } else if (is_sum) {
    for (const auto& v : values)
      r += v.first;
  } else if (std::all_of(values.begin(), values.end(),
                         [](const auto& v) { return v.second && *v.second > 0; })) {
    double weight = 0;
    for (const auto& v : values)
      r += v.first * *v.second, weight += *v.second;
    r /= weight;
  } else {
    for (const auto& v : values)
      r += v.first;
    r /= static_cast<double>(values.size());
  }
  out.value = r;
  return out;
}

std::vector<std::string> short_kernel_names(const std::vector<KernelLaunch>& pass) {
  std::vector<std::string> full, base;
  for (const KernelLaunch& k : pass) {
    std::string s = k.name;
    if (s.rfind("void ", 0) == 0) s.erase(0, 5);
    // Drop the parameter list: the parenthesis matching the final ')'.
    if (!s.empty() && s.back() == ')') {
      int depth = 0;
      for (std::size_t i = s.size(); i-- > 0;) {
        depth += s[i] == ')' ? 1 : s[i] == '(' ? -1 : 0;
        if (depth == 0) {
          s.erase(i);
          break;
        }
      }
    }
    // Anonymous namespaces print as "<unnamed>::": drop them
    // before looking for the template arguments, whose '<' they would otherwise be taken for.
    for (std::size_t at; (at = s.find("<unnamed>::")) != std::string::npos;)
      s.erase(at, 11);
    full.push_back(s);
    std::string b = s.substr(0, s.find('<'));
    if (const std::size_t ns = b.rfind("::"); ns != std::string::npos) b.erase(0, ns + 2);
    base.push_back(b);
  }
  std::vector<std::string> out = base;  // counted on `base`, so every duplicate gets its full name
  for (std::size_t i = 0; i < base.size(); ++i) {
    if (std::count(base.begin(), base.end(), base[i]) > 1) out[i] = full[i];
  }
  return out;
}

std::string format_metric(const MetricValue& v) {
  if (!v.value) return "n/a";
  const double x = *v.value;
  if (v.unit == "%") return fmt_percent(x);
  if (v.unit == "byte") return fmt_bytes(x);
  if (v.unit == "ns") return fmt_ns(x);
  if (v.unit.find("register") != std::string::npos) return std::to_string(std::lround(x));
  if (v.unit == "bytes") return std::to_string(std::lround(x)) + " bytes";  // exact (ptxas)
  if (v.unit.empty()) return fmt_sig(x);
  return fmt_sig(x) + " " + v.unit;
}

std::string format_change(const MetricValue& before, const MetricValue& after) {
  if (!before.value || !after.value) return "-";
  const double b = *before.value, a = *after.value;
  if (a == b) return "=";
  const auto sign = [](double d) { return d > 0 ? std::string("+") : std::string("-"); };
  if (after.unit == "%") return sign(a - b) + fmt_sig(std::fabs(a - b)) + " pt";
  if (after.unit.find("register") != std::string::npos) {
    return sign(a - b) + std::to_string(std::lround(std::fabs(a - b)));
  }
  if (b == 0) return "from 0";
  const double rel = 100.0 * (a - b) / b;
  return sign(rel) + fmt_sig(std::fabs(rel)) + "%";
}

std::map<std::string, std::string> load_ncu_provenance(const fs::path& csv) {
  std::map<std::string, std::string> out;
  std::ifstream in(fs::path(csv).replace_extension(".provenance.txt"));
  std::string line;
  while (std::getline(in, line)) {
    const std::string t = trim(line);
    const auto colon = t.find(':');
    if (t.empty() || t[0] == '#' || colon == std::string::npos) continue;
    out[trim(t.substr(0, colon))] = trim(t.substr(colon + 1));
  }
  return out;
}

namespace {

Text not_collected(const MetricSpec& m) {
  return plain(m.optional ? "optional metric, not available on the profiled GPU"
                          : "not in the profile");
}

}  // namespace

Table ncu_table(const NcuProfile& p, const std::vector<MetricSpec>& metrics) {
  Table t;
  Footnotes notes;
  const auto pass = profiled_pass(p);
  const bool per_kernel = pass.size() > 1;
  t.header = {plain("metric"), plain("Nsight Compute name")};
  if (per_kernel) {
    for (const std::string& k : short_kernel_names(pass))
      t.header.push_back(code(k));
  }
  t.header.push_back(plain(per_kernel ? "stage (all kernels)" : "value"));
  t.numeric.assign(t.header.size(), true);
  t.numeric[0] = t.numeric[1] = false;
  for (const MetricSpec& m : metrics) {
    std::vector<Text> row{plain(m.label), code(m.name)};
    if (per_kernel) {
      for (const KernelLaunch& k : pass) {
        const auto it = k.metrics.find(m.name);
        row.push_back(plain(it == k.metrics.end() ? "-" : format_metric(it->second)));
      }
    }
    const MetricValue v = stage_value(pass, m.name);
    row.push_back(v.value ? plain(format_metric(v)) : notes.mark(not_collected(m)));
    t.rows.push_back(std::move(row));
  }
  t.notes = notes.notes();
  return t;
}

Table ncu_diff_table(const NcuProfile& before, const NcuProfile& after,
                     const std::vector<MetricSpec>& metrics, const std::string& before_name,
                     const std::string& after_name) {
  Table t;
  Footnotes notes;
  const auto pb = profiled_pass(before), pa = profiled_pass(after);
  t.header = {plain("metric"), plain("Nsight Compute name"), code(before_name), code(after_name),
              plain("change")};
  t.numeric = {false, false, true, true, true};
  for (const MetricSpec& m : metrics) {
    const MetricValue b = stage_value(pb, m.name), a = stage_value(pa, m.name);
    t.rows.push_back({plain(m.label), code(m.name),
                      b.value ? plain(format_metric(b)) : notes.mark(not_collected(m)),
                      a.value ? plain(format_metric(a)) : notes.mark(not_collected(m)),
                      plain(format_change(b, a))});
  }
  t.notes = notes.notes();
  return t;
}

}  // namespace flashsteps::table
