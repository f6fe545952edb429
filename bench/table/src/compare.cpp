// fs_table/src/compare.cpp — the comparison tables (see fs_table/table.hpp).
#include "fs_table/table.hpp"

#include <algorithm>
#include <optional>
#include <sstream>
#include <tuple>

namespace flashsteps::table {

Text ShapeGroup::caption() const {
  return plain("D = " + std::to_string(head_dim) + (causal ? ", causal, " : ", non-causal, ") +
               std::string(to_string(dtype)) + ": H = " + std::to_string(heads) +
               ", B·S = " + std::to_string(tokens) + " tokens");
}

std::string ShapeGroup::plot_title() const {
  return "D=" + std::to_string(head_dim) + ",H=" + std::to_string(heads) +
         (causal ? ",causal" : ",non-causal");
}

bool decode_shape(const Problem& p) {
  return p.seq_q <= kDecodeMaxRows;
}

std::vector<ShapeGroup> shape_groups(const RunData& run, DType dtype) {
  std::vector<ShapeGroup> groups;
  for (const Problem& p : run.shapes(dtype)) {
    if (decode_shape(p)) continue;
    const std::int64_t tokens = p.batch * p.seq_q;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const ShapeGroup& g) {
      return g.head_dim == p.head_dim && g.causal == p.causal && g.heads == p.heads &&
             g.tokens == tokens;
    });
    if (it == groups.end()) {
      groups.push_back({p.head_dim, p.causal, p.heads, tokens, dtype, {}});
      it = groups.end() - 1;
    }
    it->shapes.push_back(p);
  }
  for (ShapeGroup& g : groups) {
    std::sort(g.shapes.begin(), g.shapes.end(), [](const Problem& a, const Problem& b) {
      return std::tie(a.seq_q, a.seq_kv) < std::tie(b.seq_q, b.seq_kv);
    });
  }
  std::sort(groups.begin(), groups.end(), [](const ShapeGroup& a, const ShapeGroup& b) {
    const auto na = -static_cast<std::int64_t>(a.shapes.size());
    const auto nb = -static_cast<std::int64_t>(b.shapes.size());
    return std::tie(na, a.head_dim, a.causal, a.heads, a.tokens) <
           std::tie(nb, b.head_dim, b.causal, b.heads, b.tokens);
  });
  return groups;
}

std::string column_label(const Problem& p) {
  if (p.seq_q == p.seq_kv) return "S=" + std::to_string(p.seq_q);
  return "Sq=" + std::to_string(p.seq_q) + ",Skv=" + std::to_string(p.seq_kv);
}

TimeLookup lookup_time(const RunData& run, std::string_view backend, const Problem& shape) {
  if (const Measurement* m = run.find(backend, shape)) {
    if (m->ok()) return {m, {}};
    return {nullptr, code(m->error)};
  }
  if (run.has_backend(backend)) return {nullptr, plain("not measured at this shape")};
  return {nullptr, plain("no results for this backend in this run")};
}

PeakLookup lookup_gemm_peak(const RunData& run, DType dtype) {
  const std::string key = "peak_gemm/" + std::string(to_string(dtype));
  if (!run.has_peaks_file)
    return {std::nullopt, plain("no measured peaks (peaks.json) in this run")};
  const auto it = run.peaks.find(key);
  if (it == run.peaks.end()) return {std::nullopt, code(key) + plain(" is not in peaks.json")};
  if (!it->second.per_second) {
    return {std::nullopt, code(key) + plain(" failed: ") + code(it->second.error)};
  }
  return {it->second.per_second, {}};
}

double speedup(double t_ref_ms, double t_ms) {
  return t_ref_ms / t_ms;
}

double percent_of_peak(double flops_per_second, double peak_flops_per_second) {
  return 100.0 * flops_per_second / peak_flops_per_second;
}

bool Measurement::noisy() const {
  return ok() && p10_ms && p90_ms && median_ms > 0 &&
         (*p90_ms - *p10_ms) > kNoisySpread * median_ms * (1 + 1e-9);  // not at exactly 15%
}

namespace {

constexpr const char* kNoisyMark = " (noisy)";

Text noisy_note() {
  return plain(
      "noisy: the time, or the time a ratio divides by, spreads from its 10th to its "
      "90th percentile by more than " +
      fmt_percent(100 * kNoisySpread) +
      " of its median; read it as a range (the p10-p90 column of the shape tables), "
      "not as one number.");
}

// "3.22", or "3.22 (noisy)" when that time is noisy.
std::string median_cell(const Measurement& m) {
  return fmt_sig(m.median_ms) + (m.noisy() ? kNoisyMark : "");
}

// t(ref) / t(m), marked when either time is noisy.
std::string ratio_cell(const Measurement& ref, const Measurement& m) {
  return fmt_ratio(speedup(ref.median_ms, m.median_ms)) +
         (ref.noisy() || m.noisy() ? kNoisyMark : "");
}

// Appends the noisy note to a table that used the mark.
void note_noise(Table& t) {
  for (const auto& row : t.rows) {
    for (const Text& cell : row) {
      if (render(cell, Format::console).find(kNoisyMark) != std::string::npos) {
        t.notes.push_back(noisy_note());
        return;
      }
    }
  }
}

std::string tflops(const Measurement& m) {
  return fmt_sig(m.flops_per_second() / 1e12);
}

Text no_time_at_shape(std::string_view backend) {
  return code(std::string(backend)) + plain(" has no time at this shape");
}

// "D=64 causal S=1024 (B=16, H=32)": a shape as a row label.
// Why a "vs parent" ratio is against an older stage: the parents between were not measured.
Text skipped_parents_note(const RunData::ComparedParent& cp) {
  return plain("against ") + code(cp.stage) +
         plain(", the nearest ancestor this run measured (it has no time for ") +
         RunData::skipped_list(cp) + plain(")");
}

Text shape_label(const Problem& p) {
  return plain("D=" + std::to_string(p.head_dim) + (p.causal ? " causal " : " ") + column_label(p) +
               " (B=" + std::to_string(p.batch) + ", H=" + std::to_string(p.heads) + ")");
}

}  // namespace

std::vector<std::string> backends_of_kind(const RunData& run, StageKind kind) {
  std::vector<std::string> out;
  std::vector<std::string> sdpa_bwd;  // SDPA's backward: every backend, in SDPA's order
  for (std::string_view s : kSdpaBackends)
    sdpa_bwd.push_back(sdpa_of_kind(s, StageKind::backward));
  for (const std::string& b : run.backends()) {
    const bool is_sdpa_bwd = std::find(sdpa_bwd.begin(), sdpa_bwd.end(), b) != sdpa_bwd.end();
    if (run.kind_of(b) == kind && !is_sdpa_bwd) out.push_back(b);
  }
  if (kind == StageKind::backward) {  // after the backward stages, before any other entry
    const auto is_stage = [&](const std::string& b) {
      return std::any_of(run.stages.stages.begin(), run.stages.stages.end(),
                         [&](const StageList::Stage& st) { return st.name == b; });
    };
    const auto others = std::stable_partition(out.begin(), out.end(), is_stage);
    out.insert(others, sdpa_bwd.begin(), sdpa_bwd.end());
  }
  return out;
}

Table overview_table(const RunData& run, const ShapeGroup& group, StageKind kind) {
  Table t;
  Footnotes notes;
  t.caption = (kind == StageKind::backward ? plain("Backward, ") : plain("")) + group.caption() +
              plain(" (median ms / TFLOP/s)");
  t.header.push_back(plain("backend"));
  t.numeric.push_back(false);
  for (const Problem& p : group.shapes) {
    t.header.push_back(plain(column_label(p)));
    t.numeric.push_back(true);
  }
  for (const std::string& b : backends_of_kind(run, kind)) {
    std::vector<Text> row{code(b)};
    for (const Problem& p : group.shapes) {
      const TimeLookup tl = lookup_time(run, b, p);
      row.push_back(tl.m ? plain(fmt_sig(tl.m->median_ms) + " / " + tflops(*tl.m) +
                                 (tl.m->noisy() ? kNoisyMark : ""))
                         : notes.mark(tl.reason));
    }
    t.rows.push_back(std::move(row));
  }
  t.notes = notes.notes();
  note_noise(t);
  return t;
}

Table shape_table(const RunData& run, const Problem& shape, StageKind kind) {
  Table t;
  Footnotes notes;
  t.caption = (kind == StageKind::backward ? plain("Backward, ") : plain("")) + code(shape.name());
  t.header = {plain("backend"),
              plain("median ms"),
              plain("p10-p90 ms"),
              plain("TFLOP/s"),
              plain("% of peak"),
              plain("vs parent stage"),
              plain("vs ") + code(sdpa_of_kind("sdpa_flash", kind)),
              plain("vs ") + code(sdpa_of_kind("sdpa_cudnn", kind))};
  t.numeric.assign(t.header.size(), true);
  t.numeric[0] = false;
  const PeakLookup peak = lookup_gemm_peak(run, shape.dtype);
  const TimeLookup flash = lookup_time(run, "sdpa_flash", shape);
  const TimeLookup cudnn = lookup_time(run, "sdpa_cudnn", shape);
  auto ratio_to = [&](const TimeLookup& ref, std::string_view ref_name, const Measurement& m) {
    return ref.m ? plain(ratio_cell(*ref.m, m)) : notes.mark(no_time_at_shape(ref_name));
  };
  for (const std::string& b : backends_of_kind(run, kind)) {
    if (!run.has_backend(b)) continue;  // the overview already marks backends the run lacks
    const TimeLookup tl = lookup_time(run, b, shape);
    std::vector<Text> row{code(b)};
    if (!tl.m) {
      row.push_back(notes.mark(tl.reason));
      row.resize(t.header.size(), plain("-"));
      t.rows.push_back(std::move(row));
      continue;
    }
    const Measurement& m = *tl.m;
    row.push_back(plain(median_cell(m)));
    row.push_back(m.p10_ms && m.p90_ms ? plain(fmt_sig(*m.p10_ms) + "-" + fmt_sig(*m.p90_ms))
                                       : plain("-"));
    row.push_back(plain(tflops(m)));
    row.push_back(peak.flops_per_second ? plain(fmt_percent(percent_of_peak(
                                              m.flops_per_second(), *peak.flops_per_second)))
                                        : notes.mark(peak.reason));
    if (const std::string parent = run.stages.parent_of(b); parent.empty()) {
      row.push_back(plain("-"));
    } else if (const RunData::ComparedParent cp = run.compared_parent(b);
               cp.skipped.empty() || cp.stage.empty()) {
      row.push_back(ratio_to(lookup_time(run, parent, shape), parent, m));
    } else if (const TimeLookup ref = lookup_time(run, cp.stage, shape); !ref.m) {
      row.push_back(notes.mark(no_time_at_shape(cp.stage)));
    } else {
      row.push_back(notes.annotate(ratio_cell(*ref.m, m), skipped_parents_note(cp)));
    }
    if (run.kind_of(b) == StageKind::forward) {
      row.push_back(ratio_to(flash, "sdpa_flash", m));
      row.push_back(ratio_to(cudnn, "sdpa_cudnn", m));
    } else {  // a backward against SDPA's backward
      for (const char* ref : {"sdpa_flash", "sdpa_cudnn"}) {
        const std::string r = sdpa_of_kind(ref, StageKind::backward);
        row.push_back(ratio_to(lookup_time(run, r, shape), r, m));
      }
    }
    t.rows.push_back(std::move(row));
  }
  t.notes = notes.notes();
  note_noise(t);
  return t;
}

Table stage_table(const RunData& run, std::string_view stage, DType dtype) {
  Table t;
  Footnotes notes;
  // The parent, or the nearest ancestor the run measured when it has no time for the parent.
  const RunData::ComparedParent cp = run.compared_parent(stage);
  const std::string prev = cp.stage.empty() ? run.stages.parent_of(stage) : cp.stage;
  t.caption = code(std::string(stage)) +
              plain(" at every " + std::string(to_string(dtype)) + " shape of this run");
  auto column = [&](Text h, bool numeric) {
    t.header.push_back(std::move(h));
    t.numeric.push_back(numeric);
  };
  column(plain("shape"), false);
  column(plain("median ms"), true);
  column(plain("TFLOP/s"), true);
  column(plain("% of peak"), true);
  std::vector<std::string> refs;
  if (!prev.empty()) refs.push_back(prev);
  // A backward stage against SDPA's backward (no cuBLAS backward baseline).
  const StageKind kind = run.kind_of(stage);
  refs.push_back(sdpa_of_kind("sdpa_flash", kind));
  refs.push_back(sdpa_of_kind("sdpa_cudnn", kind));
  if (kind == StageKind::forward) refs.push_back("baseline_cublas");
  for (const std::string& r : refs) {
    // An ancestor standing in for an unmeasured parent says so in a note on its column.
    const bool stand_in = r == prev && !cp.skipped.empty() && !cp.stage.empty();
    column(plain("vs ") + code(r) +
               (stand_in ? plain(" " + notes.number(skipped_parents_note(cp))) : plain("")),
           true);
  }
  const PeakLookup peak = lookup_gemm_peak(run, dtype);
  for (const ShapeGroup& g : shape_groups(run, dtype)) {
    for (const Problem& p : g.shapes) {
      std::vector<Text> row{shape_label(p)};
      const TimeLookup self = lookup_time(run, stage, p);
      if (self.m) {
        row.push_back(plain(median_cell(*self.m)));
        row.push_back(plain(tflops(*self.m)));
        row.push_back(peak.flops_per_second
                          ? plain(fmt_percent(percent_of_peak(self.m->flops_per_second(),
                                                              *peak.flops_per_second)))
                          : notes.mark(peak.reason));
      } else {
        row.push_back(notes.mark(self.reason));
        row.push_back(plain("-"));
        row.push_back(plain("-"));
      }
      for (const std::string& r : refs) {
        const TimeLookup ref = lookup_time(run, r, p);
        if (!ref.m) {
          row.push_back(notes.mark(ref.reason));
        } else {
          row.push_back(self.m ? plain(ratio_cell(*ref.m, *self.m)) : plain("-"));
        }
      }
      t.rows.push_back(std::move(row));
    }
  }
  t.notes = notes.notes();
  note_noise(t);
  return t;
}

Text run_caption(const RunData& run) {
  Text t = plain("Run ") + code(run.label);
  if (const std::string gpu = run_gpu_name(run); !gpu.empty()) t = t + plain(" on ") + code(gpu);
  return t + plain(".");
}

Text legend() {
  return plain(
      "Times are medians over launches with the L2 cache flushed before each. TFLOP/s counts "
      "4·B·H·Sq·Skv·D FLOPs, halved when causal, and 2.5 times that in the backward tables "
      "(the backward line against SDPA's backward). Speedups and ratios are t(reference) / t(row): "
      "above 1x the row is faster. % of peak is against the cuBLAS GEMM of the same dtype "
      "measured in the same run. \"-\": not applicable; \"n/a (k)\": see note (k).");
}

Table decode_table(const RunData& run, DType dtype) {
  Table t;
  std::vector<Problem> shapes;
  for (const Problem& p : run.shapes(dtype))
    if (decode_shape(p)) shapes.push_back(p);
  if (shapes.empty()) return t;
  std::sort(shapes.begin(), shapes.end(), [](const Problem& a, const Problem& b) {
    return std::make_tuple(-a.heads, -a.kv_heads(), a.head_dim, a.causal, a.seq_q, a.batch,
                           a.seq_kv, a.page_size) < std::make_tuple(-b.heads, -b.kv_heads(),
                                                                    b.head_dim, b.causal, b.seq_q,
                                                                    b.batch, b.seq_kv, b.page_size);
  });
  std::vector<std::string> backends;
  for (const std::string& b : run.backends()) {
    const bool timed = std::any_of(shapes.begin(), shapes.end(),
                                   [&](const Problem& p) { return run.find(b, p) != nullptr; });
    if (timed) backends.push_back(b);
  }
  Footnotes notes;
  std::optional<double> copy;
  if (const auto it = run.peaks.find("peak_copy/d2d"); it != run.peaks.end())
    copy = it->second.per_second;
  t.caption =
      plain("Decode, " + std::string(to_string(dtype)) + ": TB/s of the bytes it must move" +
            (copy ? " (% of the device-to-device copy, " + fmt_sig(*copy / 1e12) +
                        " TB/s, measured in the same run)"
                  : " (no copy peak in this run: no %)"));
  t.header.push_back(plain("shape"));
  t.numeric.push_back(false);
  for (const std::string& b : backends) {
    t.header.push_back(code(b));
    t.numeric.push_back(true);
  }
  for (const Problem& p : shapes) {
    std::vector<Text> row{plain("B=" + std::to_string(p.batch) + " H=" + std::to_string(p.heads) +
                                "/" + std::to_string(p.kv_heads()) + " Sq=" +
                                std::to_string(p.seq_q) + " Skv=" + std::to_string(p.seq_kv) +
                                " D=" + std::to_string(p.head_dim) + (p.causal ? " causal" : "") +
                                (p.paged() ? " pages of " + std::to_string(p.page_size) : ""))};
    const double bytes = static_cast<double>(p.min_dram_bytes(StageKind::forward));
    for (const std::string& b : backends) {
      const TimeLookup tl = lookup_time(run, b, p);
      if (!tl.m) {
        row.push_back(notes.mark(tl.reason));
        continue;
      }
      const double rate = bytes / (tl.m->median_ms * 1e-3);
      row.push_back(plain(fmt_sig(rate / 1e12) +
                          (copy ? " (" + fmt_percent(percent_of_peak(rate, *copy)) + ")" : "") +
                          (tl.m->noisy() ? kNoisyMark : "")));
    }
    t.rows.push_back(std::move(row));
  }
  t.notes = notes.notes();
  note_noise(t);
  return t;
}

std::string comparison_report(const RunData& run, DType dtype, Format f) {
  const auto groups = shape_groups(run, dtype);
  const Table decode = decode_table(run, dtype);
  std::ostringstream os;
  if (groups.empty() && decode.rows.empty()) {
    os << "No " << to_string(dtype) << " measurements in this run.\n";
    return os.str();
  }
  os << render(legend(), f) << "\n\n";
  for (const ShapeGroup& g : groups)
    os << render(overview_table(run, g), f) << '\n';
  for (const ShapeGroup& g : groups) {
    for (const Problem& p : g.shapes)
      os << render(shape_table(run, p), f) << '\n';
  }
  // The backward line against SDPA's backward, in tables of its own, when the run timed it.
  const auto backward = backends_of_kind(run, StageKind::backward);
  if (std::any_of(backward.begin(), backward.end(),
                  [&](const std::string& b) { return run.has_backend(b); })) {
    for (const ShapeGroup& g : groups)
      os << render(overview_table(run, g, StageKind::backward), f) << '\n';
    for (const ShapeGroup& g : groups) {
      for (const Problem& p : g.shapes)
        os << render(shape_table(run, p, StageKind::backward), f) << '\n';
    }
  }
  if (!decode.rows.empty()) os << render(decode, f) << '\n';
  return os.str();
}

}  // namespace flashsteps::table
