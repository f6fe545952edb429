// fs_table/ncu.hpp — Nsight Compute CSV: parse, reduce to one value per metric, compare.
//
// bench/profile.sh writes `ncu --csv` output in the default "details" layout, one row per
// (kernel launch, metric) with "Metric Name", "Metric Unit" and "Metric Value" columns. The
// "raw" page layout (`--page raw`: one row per launch, one column per metric, a row of units
// under the header) is read too, so any ncu CSV of the fixed metric set can be compared.
// Values are read whatever their format (1,234,567.8) and unit scale (Kbyte, usecond): bytes
// become "byte" and times "ns".
//
// A stage may launch several kernels per forward pass (00_scalar launches three). Its value of
// a metric is taken over the last launch of each distinct kernel (the profiled pass):
//   *.sum counters and gpu__time_duration.sum   summed over the kernels
//   launch__* (registers per thread)            the maximum
//   everything else (%, ratios, averages)       weighted by each kernel's duration
#pragma once

#include <filesystem>
#include <istream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fs_table/text.hpp"

namespace flashsteps::table {

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
  std::string unit;             ///< normalized: "byte", "ns", "%", "" ...
};

struct KernelLaunch {
  std::string id;    ///< ncu's launch ID
  std::string name;  ///< demangled kernel name as ncu printed it
  std::map<std::string, MetricValue> metrics;
};

struct NcuProfile {
  std::string source;                  ///< file name, for messages
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

/// "42.1%", "1.23 GB", "4.56 ms", "128", "3.21" by unit.
std::string format_metric(const MetricValue& v);
/// "+12.3 pt" for percentages, "-42%" relative change otherwise, "=" when equal.
std::string format_change(const MetricValue& before, const MetricValue& after);

/// The `key: value` lines profile.sh writes next to the CSV (<name>.provenance.txt).
std::map<std::string, std::string> load_ncu_provenance(const std::filesystem::path& file);

/// One stage's metrics: rows = the metric set (then any other metric in the CSV), columns =
/// each kernel of the pass when there are several, and the stage value.
Table ncu_table(const NcuProfile& p, const std::vector<MetricSpec>& metrics);
/// Two profiles metric by metric: before, after, change.
Table ncu_diff_table(const NcuProfile& before, const NcuProfile& after,
                     const std::vector<MetricSpec>& metrics, const std::string& before_name,
                     const std::string& after_name);

}  // namespace flashsteps::table
