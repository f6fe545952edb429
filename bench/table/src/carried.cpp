// bench/table/src/carried.cpp — evidence carried forward by identity (CONTRIBUTING.md, "How we
// measure"): when a run holds no sanitizer log of a stage, an older committed run on the same
// architecture may stand for it, but only when that run's kernels of the stage are PTX-identical
// to this build's; the result is labelled with the run that made it. Timings are never carried.
#include <algorithm>

#include "fs_table/table.hpp"

namespace flashsteps::table {

namespace fs = std::filesystem;

std::optional<CarriedSanitizers> carried_sanitizer_result(const RunData& run,
                                                          std::string_view stage) {
  if (run.empty() || run.ptx_dir.empty() || sanitizer_result(run, stage)) return std::nullopt;
  // book/data/<gpu>/<run>: every other run folder under book/data, newest name first.
  const fs::path data = run.dir.parent_path().parent_path();
  std::vector<fs::path> others;
  std::error_code ec;
  for (const auto& gpu : fs::directory_iterator(data, ec)) {
    if (!gpu.is_directory()) continue;
    for (const auto& r : fs::directory_iterator(gpu.path(), ec)) {
      if (r.is_directory() && fs::exists(r.path() / "provenance.json") &&
          !fs::equivalent(r.path(), run.dir, ec))
        others.push_back(r.path());
    }
  }
  std::sort(others.begin(), others.end(), [](const fs::path& a, const fs::path& b) {
    return a.filename().string() > b.filename().string();
  });
  const std::string arch = context_text(run.provenance, "gpu_compute_capability");
  for (const fs::path& dir : others) {
    RunData other = load_run(dir, run.stages);
    if (other.empty() || arch.empty() ||
        context_text(other.provenance, "gpu_compute_capability") != arch)
      continue;
    other.ptx_dir = run.ptx_dir;
    const auto san = sanitizer_result(other, stage);
    if (san && kernel_identity(other, stage).state == KernelIdentity::State::identical)
      return CarriedSanitizers{*san, other.label};
  }
  return std::nullopt;
}

}  // namespace flashsteps::table
