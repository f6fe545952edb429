// fs_table/src/steps.cpp — how big each step is: a stage's code lines against its parent's (see
// fs_table/table.hpp, steps).
#include <algorithm>
#include <fstream>
#include <sstream>

#include "fs_table/table.hpp"

namespace flashsteps::table {

namespace fs = std::filesystem;

std::vector<std::string> code_lines(std::istream& in) {
  std::vector<std::string> out;
  bool in_comment = false;  // inside /* ... */
  for (std::string line; std::getline(in, line);) {
    std::string code;
    char quote = 0;  // inside a string or character literal
    for (std::size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      const char next = i + 1 < line.size() ? line[i + 1] : '\0';
      if (in_comment) {
        if (c == '*' && next == '/') in_comment = false, ++i;
        continue;
      }
      if (quote) {
        code += c;
        if (c == '\\' && next)
          code += next, ++i;
        else if (c == quote)
          quote = 0;
        continue;
      }
      if (c == '/' && next == '/') break;
      if (c == '/' && next == '*') {
        in_comment = true, ++i;
        continue;
      }
      if (c == '"' || c == '\'') quote = c;
      code += c;
    }
    const std::string t = trim(code);
    if (!t.empty()) out.push_back(t);
  }
  return out;
}

namespace {

std::vector<std::string> stage_code_lines(const fs::path& dir) {
  std::vector<std::string> out;
  for (const char* f : kStepFiles) {
    std::ifstream in(dir / f);
    if (!in) throw InputError("cannot read " + (dir / f).string());
    const auto lines = code_lines(in);
    out.insert(out.end(), lines.begin(), lines.end());
  }
  return out;
}

// Length of the longest common subsequence of two line lists.
std::size_t lcs_length(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::size_t> prev(b.size() + 1, 0), cur(b.size() + 1, 0);
  for (const std::string& x : a) {
    for (std::size_t j = 0; j < b.size(); ++j)
      cur[j + 1] = x == b[j] ? prev[j] + 1 : std::max(prev[j + 1], cur[j]);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

StepSize step_size(const std::vector<std::string>& parent, const std::vector<std::string>& child) {
  const std::size_t common = lcs_length(parent, child);
  StepSize s;
  s.parent_lines = static_cast<int>(parent.size());
  s.child_lines = static_cast<int>(child.size());
  s.added = static_cast<int>(child.size() - common);
  s.removed = static_cast<int>(parent.size() - common);
  return s;
}

std::vector<StepSize> step_sizes(const StageList& stages, const fs::path& root) {
  std::vector<StepSize> out;
  for (const StageList::Stage& st : stages.stages) {
    const auto child = stage_code_lines(root / st.dir);
    StepSize s;
    if (st.parent.empty()) {
      s.child_lines = s.added = static_cast<int>(child.size());
    } else {
      std::string parent_dir;
      for (const StageList::Stage& p : stages.stages) {
        if (p.name == st.parent) parent_dir = p.dir;
      }
      s = step_size(stage_code_lines(root / parent_dir), child);
    }
    s.stage = st.name;
    s.parent = st.parent;
    s.large_step = st.large_step;
    out.push_back(s);
  }
  return out;
}

std::string step_problem(const StepSize& s) {
  if (s.parent.empty()) return {};
  const bool large = s.percent_new() > kMaxStepPercent;
  if (large && s.large_step.empty()) {
    return s.stage + ": " + fmt_sig(s.percent_new(), 2) + "% of its code lines are new against " +
           s.parent + ", above " + std::to_string(kMaxStepPercent) +
           "%: split the step, or say why it cannot be smaller with LARGE_STEP \"<why>\" in its "
           "manifest (stages/<name>/stage.cmake)";
  }
  if (!large && !s.large_step.empty()) {
    return s.stage + ": declares LARGE_STEP, but only " + fmt_sig(s.percent_new(), 2) +
           "% of its code lines are new against " + s.parent + ": drop the declaration";
  }
  return {};
}

Text step_text(const StepSize& s) {
  const std::string files = "kernels.cu + kernels.cuh";
  if (s.parent.empty()) {
    return plain("Step size: the first stage of its line, " + std::to_string(s.child_lines) +
                 " code lines (") +
           code(files) + plain(", comments and blank lines dropped).");
  }
  Text t = plain("Step size against ") + code(s.parent) +
           plain(": " + std::to_string(s.added) + " code lines added, " +
                 std::to_string(s.removed) + " removed; " + fmt_sig(s.percent_new(), 2) + "% of " +
                 std::to_string(s.child_lines) + " code lines new (") +
           code(files) + plain(", comments and blank lines dropped, lines compared by LCS).");
  if (!s.large_step.empty()) {
    const bool stop = s.large_step.ends_with('.');
    t = t + plain(" Above the " + std::to_string(kMaxStepPercent) +
                  "% a step aims for: " + s.large_step + (stop ? "" : "."));
  }
  return t;
}

Table steps_table(const std::vector<StepSize>& steps) {
  Table t;
  t.caption = plain("Each stage against its parent: code lines of kernels.cu + kernels.cuh");
  t.header = {plain("stage"),   plain("parent"), plain("lines"),     plain("added"),
              plain("removed"), plain("% new"),  plain("why larger")};
  t.numeric = {false, false, true, true, true, true, false};
  for (const StepSize& s : steps) {
    t.rows.push_back({code(s.stage), s.parent.empty() ? plain("-") : code(s.parent),
                      plain(std::to_string(s.child_lines)), plain(std::to_string(s.added)),
                      plain(std::to_string(s.removed)), plain(fmt_sig(s.percent_new(), 2)),
                      plain(s.large_step.empty() ? "-" : s.large_step)});
  }
  return t;
}

}  // namespace flashsteps::table
