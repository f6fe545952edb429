// fs_table/src/ptxas.cpp — a build's ptxas resource reports (see fs_table/table.hpp).
#include "fs_table/table.hpp"

#include <fstream>
#include <regex>

namespace flashsteps::table {

namespace {

// The number before `what` on the line ("230" of "Used 230 registers"), or nullopt.
std::optional<int> number_before(const std::string& line, const std::regex& what) {
  std::smatch m;
  if (!std::regex_search(line, m, what)) return std::nullopt;
  return std::stoi(m[1].str());
}

}  // namespace

std::vector<PtxasKernel> parse_ptxas_report(std::istream& in, const std::string& source) {
  static const std::regex entry(R"(Compiling entry function '(.*)' for '(sm_[0-9]+[a-z]?)')");
  static const std::regex props(R"(Function properties for (.*)$)");
  static const std::regex stack(R"((\d+) bytes stack frame)"),
      stores(R"((\d+) bytes spill stores)"), loads(R"((\d+) bytes spill loads)"),
      regs(R"(Used (\d+) registers)"), smem(R"((\d+) bytes smem)");
  std::vector<PtxasKernel> out;
  bool open = false;       // the last entry function has no "Used" line yet
  bool own_props = false;  // the properties being read are the open entry function's
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::smatch m;
    if (std::regex_search(line, m, entry)) {
      if (open) {
        throw InputError(source + ": '" + out.back().name + "' (" + out.back().arch +
                         ") has no 'Used ... registers' line");
      }
      out.push_back({m[1].str(), m[2].str()});
      open = true;
      own_props = false;
    } else if (std::regex_search(line, m, props)) {
      own_props = open && trim(m[1].str()) == out.back().name;
    } else if (own_props && line.find("bytes stack frame") != std::string::npos) {
      PtxasKernel& k = out.back();
      k.stack_bytes = number_before(line, stack).value_or(0);
      k.spill_store_bytes = number_before(line, stores).value_or(0);
      k.spill_load_bytes = number_before(line, loads).value_or(0);
      own_props = false;
    } else if (open && line.find("ptxas info") != std::string::npos &&
               std::regex_search(line, regs)) {
      PtxasKernel& k = out.back();
      k.registers = *number_before(line, regs);
      k.smem_bytes = number_before(line, smem).value_or(0);
      open = false;
    }
  }
  if (open) {
    throw InputError(source + ": '" + out.back().name + "' (" + out.back().arch +
                     ") has no 'Used ... registers' line");
  }
  return out;
}

std::vector<PtxasKernel> load_ptxas_report(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw InputError("cannot read " + file.string());
  return parse_ptxas_report(in, file.string());
}

std::optional<double> ptxas_quantity(const PtxasKernel& k, std::string_view quantity) {
  if (quantity == "registers") return k.registers;
  if (quantity == "spill_bytes") return k.spill_store_bytes + k.spill_load_bytes;
  if (quantity == "stack_bytes") return k.stack_bytes;
  if (quantity == "smem_bytes") return k.smem_bytes;
  return std::nullopt;
}

}  // namespace flashsteps::table
