#include "flashsteps/problem.hpp"

#include "flashsteps/mask.hpp"

#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

namespace flashsteps {

std::string_view to_string(DType t) {
  return t == DType::fp16 ? "fp16" : "bf16";
}

std::optional<DType> parse_dtype(std::string_view s) {
  if (s == "fp16" || s == "f16" || s == "half") return DType::fp16;
  if (s == "bf16") return DType::bf16;
  return std::nullopt;
}

std::string_view to_string(StageKind k) {
  return k == StageKind::forward ? "forward" : "backward";
}

float Problem::softmax_scale() const {
  return scale != 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
}

std::int64_t Problem::min_dram_bytes(StageKind kind) const {
  const std::int64_t e = dtype_bytes(dtype);
  // Forward: Q, O and K, V. Backward: Q, O, dO, dQ and K, V, dK, dV.
  const std::int64_t n = kind == StageKind::forward ? 2 : 4;
  return (n * q_elems() + n * kv_elems()) * e + lse_elems() * 4;
}

double Problem::flops(StageKind kind) const {
  const double f = 4.0 * static_cast<double>(batch) * static_cast<double>(heads) *
                   static_cast<double>(seq_q) * static_cast<double>(seq_kv) *
                   static_cast<double>(head_dim);
  // The backward's five products (S again, dV, dP, dQ, dK) against the forward's two: 2.5x.
  const double k = kind == StageKind::forward ? 1.0 : 2.5;
  return (causal ? f / 2.0 : f) * k;
}

std::int64_t Problem::kv_end(std::int64_t i) const {
  return causal_kv_end(i, seq_q, seq_kv, causal);
}

std::string Problem::name() const {
  std::ostringstream s;
  s << 'b' << batch << "_h" << heads << "_sq" << seq_q << "_skv" << seq_kv << "_d" << head_dim
    << '_' << to_string(dtype) << (causal ? "_causal" : "");
  return s.str();
}

namespace {

bool mul_overflows(std::int64_t a, std::int64_t b, std::int64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

}  // namespace

std::string validate(const Problem& p) {
  struct Dim {
    const char* name;
    std::int64_t value;
  };
  for (const Dim& d : {Dim{"batch", p.batch}, Dim{"heads", p.heads}, Dim{"seq_q", p.seq_q},
                       Dim{"seq_kv", p.seq_kv}, Dim{"head_dim", p.head_dim}}) {
    if (d.value < 1) {
      return std::string(d.name) + " = " + std::to_string(d.value) + ": every size must be >= 1";
    }
  }
  if (p.head_dim > kMaxHeadDim) {
    return "head_dim = " + std::to_string(p.head_dim) + " exceeds the project limit of " +
           std::to_string(kMaxHeadDim);
  }
  if (p.seq_q > kMaxSeqLen || p.seq_kv > kMaxSeqLen) {
    return "sequence length exceeds the 32-bit row-index limit of " + std::to_string(kMaxSeqLen);
  }
  if (!(p.scale == 0.0f || (std::isfinite(p.scale) && p.scale > 0.0f))) {
    return "scale must be a positive finite number (or 0 for the default 1/sqrt(D))";
  }
  // Every element count (and its byte size) must fit a signed 64-bit offset.
  std::int64_t bh = 0, n = 0, bytes = 0;
  for (std::int64_t s : {p.seq_q, p.seq_kv}) {
    if (mul_overflows(p.batch, p.heads, &bh) || mul_overflows(bh, s, &n) ||
        mul_overflows(n, p.head_dim, &n) || mul_overflows(n, 8, &bytes)) {
      return "tensor of " + std::to_string(p.batch) + "x" + std::to_string(p.heads) + "x" +
             std::to_string(s) + "x" + std::to_string(p.head_dim) +
             " elements overflows a 64-bit offset";
    }
  }
  if (bh > std::numeric_limits<std::int32_t>::max()) {
    return "batch*heads = " + std::to_string(bh) + " exceeds the grid limit of 2^31-1";
  }
  return {};
}

std::string check_fits_memory(const Problem& p, std::int64_t workspace_bytes,
                              std::int64_t free_bytes, StageKind kind) {
  const std::int64_t need = p.min_dram_bytes(kind) + workspace_bytes;
  if (need > free_bytes) {
    std::ostringstream s;
    s << "problem " << p.name() << " needs " << need / (1 << 20) << " MiB of device memory ("
      << workspace_bytes / (1 << 20) << " MiB of it workspace) but only " << free_bytes / (1 << 20)
      << " MiB are free";
    return s.str();
  }
  return {};
}

std::optional<Problem> parse_problem_name(std::string_view name) {
  // b<B>_h<H>_sq<Sq>_skv<Skv>_d<D>_<dtype>[_causal]
  std::vector<std::string_view> parts;
  while (!name.empty()) {
    const auto cut = name.find('_');
    parts.push_back(name.substr(0, cut));
    name = cut == std::string_view::npos ? std::string_view{} : name.substr(cut + 1);
  }
  if (parts.size() != 6 && parts.size() != 7) return std::nullopt;
  Problem p;
  auto number = [](std::string_view part, std::string_view prefix, std::int64_t* out) {
    if (part.substr(0, prefix.size()) != prefix) return false;
    part.remove_prefix(prefix.size());
    const auto r = std::from_chars(part.data(), part.data() + part.size(), *out);
    return r.ec == std::errc{} && r.ptr == part.data() + part.size();
  };
  if (!number(parts[0], "b", &p.batch) || !number(parts[1], "h", &p.heads) ||
      !number(parts[2], "sq", &p.seq_q) || !number(parts[3], "skv", &p.seq_kv) ||
      !number(parts[4], "d", &p.head_dim)) {
    return std::nullopt;
  }
  const auto dt = parse_dtype(parts[5]);
  if (!dt || (parts[5] != "fp16" && parts[5] != "bf16")) return std::nullopt;
  p.dtype = *dt;
  if (parts.size() == 7) {
    if (parts[6] != "causal") return std::nullopt;
    p.causal = true;
  }
  return p;
}

}  // namespace flashsteps
