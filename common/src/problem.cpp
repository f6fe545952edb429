#include "flashsteps/problem.hpp"

#include "flashsteps/mask.hpp"

#include <charconv>
#include <cmath>
#include <limits>
#include <random>
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
  // Forward: Q, O and K, V. Backward: Q, O, dO, dQ and K, V, dK, dV. K and V: the keys held.
  const std::int64_t n = kind == StageKind::forward ? 2 : 4;
  std::int64_t keys = 0;
  for (std::int64_t b = 0; b < batch; ++b)
    keys += kv_len(b);
  return (n * q_elems() + n * keys * kv_heads() * head_dim) * e + lse_elems() * 4;
}

std::int64_t Problem::device_bytes(StageKind kind) const {
  const std::int64_t e = dtype_bytes(dtype);
  const std::int64_t n = kind == StageKind::forward ? 2 : 4;
  const auto index_bytes = static_cast<std::int64_t>(cache_seqlens.size() * sizeof(std::int32_t)) +
                           num_pages() * static_cast<std::int64_t>(sizeof(std::int32_t));
  return (n * q_elems() + n * kv_elems()) * e + lse_elems() * 4 + index_bytes;
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
  return kv_end(0, i);
}

std::int64_t Problem::kv_end(std::int64_t b, std::int64_t i) const {
  return causal_kv_end(i, seq_q, kv_len(b), causal);
}

std::string Problem::name() const {
  std::ostringstream s;
  s << 'b' << batch << "_h" << heads << "_sq" << seq_q << "_skv" << seq_kv << "_d" << head_dim
    << '_' << to_string(dtype) << (causal ? "_causal" : "");
  if (grouped()) s << "_hkv" << kv_heads();
  if (paged()) s << "_page" << page_size;
  if (!cache_seqlens.empty()) {
    s << "_lens";
    for (std::size_t b = 0; b < cache_seqlens.size(); ++b)
      s << (b ? "-" : "") << cache_seqlens[b];
  }
  return s.str();
}

namespace {

bool mul_overflows(std::int64_t a, std::int64_t b, std::int64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

// The KV cache's part of validate(): the sizes are valid already.
std::string validate_kv_cache(const Problem& p) {
  if (p.heads_kv < 0 || (p.heads_kv > 0 && p.heads % p.heads_kv != 0)) {
    return "heads = " + std::to_string(p.heads) +
           " is not a multiple of heads_kv = " + std::to_string(p.heads_kv) +
           ": each K/V head serves heads / heads_kv query heads (0 < heads_kv <= heads, heads_kv "
           "dividing heads; 0 means heads_kv = heads)";
  }
  if (!p.cache_seqlens.empty()) {
    if (static_cast<std::int64_t>(p.cache_seqlens.size()) != p.batch) {
      return "cache_seqlens has " + std::to_string(p.cache_seqlens.size()) +
             " lengths for batch = " + std::to_string(p.batch) + ": one per sequence";
    }
    for (std::size_t b = 0; b < p.cache_seqlens.size(); ++b) {
      const std::int32_t len = p.cache_seqlens[b];
      if (len < 0 || len > p.seq_kv) {
        return "cache_seqlens[" + std::to_string(b) + "] = " + std::to_string(len) +
               " is outside [0, seq_kv = " + std::to_string(p.seq_kv) +
               "]: a sequence holds at most the keys its cache has room for";
      }
    }
  }
  if (p.page_size < 0 || p.page_size > kMaxSeqLen) {
    return "page_size = " + std::to_string(p.page_size) + " is outside [1, " +
           std::to_string(kMaxSeqLen) + "] keys per page (0: K/V not paged)";
  }
  std::int64_t n = 0;
  if (p.paged() && (mul_overflows(p.num_pages(), p.page_size, &n) ||
                    mul_overflows(n, p.kv_heads() * p.head_dim, &n) || mul_overflows(n, 8, &n))) {
    return "a pool of " + std::to_string(p.num_pages()) + " pages of " +
           std::to_string(p.page_size) + " keys overflows a 64-bit offset";
  }
  return {};
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
  return validate_kv_cache(p);
}

std::string check_fits_memory(const Problem& p, std::int64_t workspace_bytes,
                              std::int64_t free_bytes, StageKind kind) {
  const std::int64_t need = p.device_bytes(kind) + workspace_bytes;
  if (need > free_bytes) {
    std::ostringstream s;
    s << "problem " << p.name() << " needs " << need / (1 << 20) << " MiB of device memory ("
      << workspace_bytes / (1 << 20) << " MiB of it workspace) but only " << free_bytes / (1 << 20)
      << " MiB are free";
    return s.str();
  }
  return {};
}

namespace {

// `part` is `prefix` and then a whole decimal number, which goes to `out`.
template <class Int>
bool number(std::string_view part, std::string_view prefix, Int* out) {
  if (part.substr(0, prefix.size()) != prefix) return false;
  part.remove_prefix(prefix.size());
  const auto r = std::from_chars(part.data(), part.data() + part.size(), *out);
  return r.ec == std::errc{} && r.ptr == part.data() + part.size();
}

// "3-0-17" -> {3, 0, 17}.
bool parse_lens(std::string_view s, std::vector<std::int32_t>* out) {
  while (true) {
    const auto cut = s.find('-');
    std::int32_t v = 0;
    if (!number(s.substr(0, cut), "", &v)) return false;
    out->push_back(v);
    if (cut == std::string_view::npos) return true;
    s.remove_prefix(cut + 1);
  }
}

}  // namespace

std::optional<Problem> parse_problem_name(std::string_view name) {
  // b<B>_h<H>_sq<Sq>_skv<Skv>_d<D>_<dtype>[_causal][_hkv<H_kv>][_page<P>][_lens<L0>-<L1>...]
  std::vector<std::string_view> parts;
  while (!name.empty()) {
    const auto cut = name.find('_');
    parts.push_back(name.substr(0, cut));
    name = cut == std::string_view::npos ? std::string_view{} : name.substr(cut + 1);
  }
  if (parts.size() < 6) return std::nullopt;
  Problem p;
  if (!number(parts[0], "b", &p.batch) || !number(parts[1], "h", &p.heads) ||
      !number(parts[2], "sq", &p.seq_q) || !number(parts[3], "skv", &p.seq_kv) ||
      !number(parts[4], "d", &p.head_dim)) {
    return std::nullopt;
  }
  const auto dt = parse_dtype(parts[5]);
  if (!dt || (parts[5] != "fp16" && parts[5] != "bf16")) return std::nullopt;
  p.dtype = *dt;
  // The optional parts, each at most once and in name()'s order.
  std::size_t i = 6;
  if (i < parts.size() && parts[i] == "causal") {
    p.causal = true;
    ++i;
  }
  if (i < parts.size() && number(parts[i], "hkv", &p.heads_kv)) ++i;
  if (i < parts.size() && number(parts[i], "page", &p.page_size)) ++i;
  if (i < parts.size() && parts[i].substr(0, 4) == "lens") {
    if (!parse_lens(parts[i].substr(4), &p.cache_seqlens)) return std::nullopt;
    ++i;
  }
  if (i != parts.size()) return std::nullopt;
  return p;
}

std::vector<std::int32_t> draw_cache_seqlens(std::int64_t batch, std::int64_t seq_kv,
                                             std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> u(0, seq_kv);
  std::vector<std::int32_t> lens(static_cast<std::size_t>(batch));
  for (auto& l : lens)
    l = static_cast<std::int32_t>(u(rng));
  return lens;
}

}  // namespace flashsteps
