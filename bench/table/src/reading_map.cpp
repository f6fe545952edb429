// fs_table/src/reading_map.cpp — the book's front-page reading map (see fs_table/table.hpp,
// book_reading_map): the stage tree and the run's status of each stage, on one screen.
#include "fs_table/table.hpp"

#include <algorithm>
#include <fstream>

namespace flashsteps::table {

namespace fs = std::filesystem;

namespace {

// "Part III" of "# Part III: ... {#part_x}", the first line of the part's page; the part's name
// when the page or its heading is not there.
std::string part_short_name(const fs::path& chapters, const std::string& part) {
  const fs::path page = chapters / (part.empty() ? "part_2.md" : "part_" + part + ".md");
  std::ifstream in(page);
  std::string line;
  if (!chapters.empty() && std::getline(in, line) && line.starts_with("# Part ")) {
    const std::size_t colon = line.find(':');
    if (colon != std::string::npos) return trim(line.substr(2, colon - 2));
  }
  return part.empty() ? "Part II" : part;
}

std::string part_anchor(const std::string& part) {
  return part.empty() ? "part2" : "part_" + part;
}

std::string number_of(const StageList::Stage& s) {
  return s.number.empty() ? s.name : s.number;
}

const StageList::Stage* find_stage(const StageList& stages, const std::string& name) {
  for (const StageList::Stage& s : stages.stages)
    if (s.name == name) return &s;
  return nullptr;
}

std::string stage_ref(const StageList::Stage& s) {
  return s.anchor.empty() ? render(code(number_of(s)), Format::markdown)
                          : "\\ref " + s.anchor + " \"" + number_of(s) + "\"";
}

bool needs_hopper(const StageList::Stage& s) {
  return std::any_of(s.archs.begin(), s.archs.end(),
                     [](const std::string& a) { return a.starts_with("90"); });
}

}  // namespace

std::string book_reading_map(const RunData& run, const fs::path& chapters) {
  const StageList& tree = run.stages;
  std::size_t identical = 0, changed = 0, unknown = 0, hopper = 0, faults = 0;
  std::string rows;
  for (const StageList::Stage& s : tree.stages) {
    const KernelIdentity id = kernel_identity(run, s.name);
    const std::string old = run.file_name(s.name);
    const std::string as = old == s.name ? "" : " (as " + render(code(old), Format::markdown) + ")";
    std::string state;
    switch (id.state) {
      case KernelIdentity::State::not_measured:
        state = "predicted only";
        break;
      case KernelIdentity::State::identical:
        state = "**measured**" + as;
        ++identical;
        break;
      case KernelIdentity::State::changed:
        state = "measured" + as + "; " + std::to_string(id.changed.size()) + " kernel" +
                (id.changed.size() == 1 ? "" : "s") + " changed since";
        ++changed;
        break;
      default:
        state = "measured" + as + "; kernels not compared";
        ++unknown;
    }
    std::string gpu = "sm_80+";
    if (!s.archs.empty()) {
      gpu.clear();
      for (const std::string& a : s.archs)
        gpu += (gpu.empty() ? "sm_" : ", sm_") + a;
      if (needs_hopper(s)) gpu = "**" + gpu + "**";
    }
    hopper += needs_hopper(s) ? 1 : 0;
    faults += s.faults;
    const StageList::Stage* parent = find_stage(tree, s.parent);
    rows += "| \\ref " + part_anchor(s.part) + " \"" + part_short_name(chapters, s.part) + "\" | " +
            stage_ref(s) + " " + render(inline_markup(s.title), Format::markdown) + " | " +
            (parent ? number_of(*parent) : std::string("—")) + " | " + gpu + " | " + state +
            " | suite, " + std::to_string(s.faults) + " fault" + (s.faults == 1 ? "" : "s") +
            " |\n";
  }

  // The counts of the states that occur, in the order of the legend under the table.
  const std::size_t predicted = tree.stages.size() - identical - changed - unknown;
  std::string counts;
  for (const auto& [n, what] :
       {std::pair{identical, " measured with the very kernels they have now"},
        std::pair{changed, " measured with kernels changed since"},
        std::pair{unknown, " measured, their kernels not compared with this build's"},
        std::pair{predicted, " predicted only"}}) {
    if (n > 0) counts += (counts.empty() ? "" : ", ") + std::to_string(n) + what;
  }
  std::string md;
  md += std::to_string(tree.stages.size()) + " stages. On the committed run (" +
        (run.empty() ? std::string("none yet") : render(code(run.label), Format::markdown)) +
        "): " + counts + ". " + std::to_string(hopper) + (hopper == 1 ? " needs" : " need") +
        " sm_90a, a Hopper GPU (H100, H200); the others run on sm_80 or newer. Every stage's "
        "suite runs on the CPU emulator, and so do its planted faults (" +
        std::to_string(faults) + " in all), with no GPU.\n\n";
  md +=
      "| part | stage | builds on | GPU | committed run | CPU emulator |\n"
      "|---|---|---|---|---|---|\n" +
      rows + "\n";

  // Which part starts from which: the parent of each part's first stage.
  std::vector<std::string> parts;
  for (const StageList::Stage& s : tree.stages)
    if (std::find(parts.begin(), parts.end(), s.part) == parts.end()) parts.push_back(s.part);
  for (const std::string& part : parts) {
    const StageList::Stage* first = nullptr;
    const StageList::Stage* last = nullptr;
    for (const StageList::Stage& s : tree.stages) {
      if (s.part != part) continue;
      if (!first) first = &s;
      last = &s;
    }
    std::string line = "- \\ref " + part_anchor(part) + " \"" + part_short_name(chapters, part) +
                       "\" (" + number_of(*first) +
                       (first == last ? std::string() : " to " + number_of(*last)) + ") ";
    const StageList::Stage* parent = find_stage(tree, first->parent);
    if (!parent) {
      line += "starts a line of the tree: " + number_of(*first) + " builds on no stage";
      line += first->kind == StageKind::backward ? " (the backward line)" : " (the forward line)";
    } else {
      line +=
          "starts from " + number_of(*parent) + ", in " + part_short_name(chapters, parent->part);
    }
    md += line + ".\n";
  }
  return md;
}

}  // namespace flashsteps::table
