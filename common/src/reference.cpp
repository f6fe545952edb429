#include "flashsteps/reference.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace flashsteps {

std::vector<std::int64_t> sample_heads(const Problem& p, std::int64_t max_heads) {
  const std::int64_t n = p.batch_heads();
  std::vector<std::int64_t> heads;
  if (n <= max_heads || max_heads <= 1) {
    for (std::int64_t i = 0; i < std::min(n, std::max<std::int64_t>(max_heads, 1)); ++i)
      heads.push_back(i);
    return heads;
  }
  for (std::int64_t i = 0; i < max_heads; ++i)
    heads.push_back(i * (n - 1) / (max_heads - 1));
  heads.erase(std::unique(heads.begin(), heads.end()), heads.end());
  return heads;
}

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// One head, exact: doubles throughout.
// Row i of sequence b sees keys [0, p.kv_end(b, i)).
void head_exact(const Problem& p, std::int64_t b, const double* q, const double* k, const double* v,
                double* o, double* lse, std::int64_t row_begin, std::int64_t row_end) {
  const std::int64_t D = p.head_dim;
  const double scale = p.softmax_scale();
  std::vector<double> s(static_cast<std::size_t>(p.seq_kv));
  for (std::int64_t i = row_begin; i < row_end; ++i) {
    const std::int64_t end = p.kv_end(b, i);
    double* oi = o + i * D;
    std::fill(oi, oi + D, 0.0);
    if (end == 0) {  // this row sees no key: O = 0, LSE = -inf by the contract
      lse[i] = kNegInf;
      continue;
    }
    double m = kNegInf;
    for (std::int64_t j = 0; j < end; ++j) {
      double acc = 0;
      for (std::int64_t d = 0; d < D; ++d)
        acc += q[i * D + d] * k[j * D + d];
      s[j] = acc * scale;
      m = std::max(m, s[j]);
    }
    double l = 0;
    for (std::int64_t j = 0; j < end; ++j) {
      s[j] = std::exp(s[j] - m);
      l += s[j];
    }
    for (std::int64_t j = 0; j < end; ++j) {
      const double pj = s[j] / l;
      for (std::int64_t d = 0; d < D; ++d)
        oi[d] += pj * v[j * D + d];
    }
    lse[i] = m + std::log(l);
  }
}

// One head, as a careful fp32 kernel computes it: fp32 scores and sums, P rounded to the dtype.
void head_same_precision(const Problem& p, std::int64_t b, const double* q, const double* k,
                         const double* v, double* o, double* lse, std::int64_t row_begin,
                         std::int64_t row_end) {
  const std::int64_t D = p.head_dim;
  const float scale = p.softmax_scale();
  std::vector<float> s(static_cast<std::size_t>(p.seq_kv));
  std::vector<float> acc(static_cast<std::size_t>(D));
  for (std::int64_t i = row_begin; i < row_end; ++i) {
    const std::int64_t end = p.kv_end(b, i);
    double* oi = o + i * D;
    if (end == 0) {
      std::fill(oi, oi + D, 0.0);
      lse[i] = kNegInf;
      continue;
    }
    float m = -std::numeric_limits<float>::infinity();
    for (std::int64_t j = 0; j < end; ++j) {
      float dot = 0;
      for (std::int64_t d = 0; d < D; ++d)
        dot += static_cast<float>(q[i * D + d]) * static_cast<float>(k[j * D + d]);
      s[j] = dot * scale;
      m = std::max(m, s[j]);
    }
    float l = 0;
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (std::int64_t j = 0; j < end; ++j) {
      const float pj = std::exp(s[j] - m);
      l += pj;
      const float pr = round_to(pj, p.dtype);  // P enters the second product in the dtype
      for (std::int64_t d = 0; d < D; ++d)
        acc[d] += pr * static_cast<float>(v[j * D + d]);
    }
    for (std::int64_t d = 0; d < D; ++d)
      oi[d] = round_to(acc[d] / l, p.dtype);
    lse[i] = static_cast<double>(m + std::log(l));
  }
}

template <class F>
void parallel_for(std::int64_t n, F&& f) {
  const std::int64_t workers =
      std::min<std::int64_t>(n, std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<std::int64_t> next{0};
  std::vector<std::thread> pool;
  for (std::int64_t w = 0; w < workers; ++w) {
    pool.emplace_back([&] {
      for (std::int64_t i = next++; i < n; i = next++)
        f(i);
    });
  }
  for (auto& t : pool)
    t.join();
}

// A paged K or V, [pages, H_kv, page_size, D], copied into [B, H_kv, Skv, D] through the block
// table: key j of sequence b is row j % page_size of page block_table[b][j / page_size].
std::vector<std::uint16_t> gather_pages(const HostInputs& in, const std::vector<std::uint16_t>& t) {
  const Problem& p = in.problem;
  const std::int64_t D = p.head_dim, hkv = p.kv_heads(), P = p.page_size;
  std::vector<std::uint16_t> out(static_cast<std::size_t>(p.batch * hkv * p.seq_kv * D));
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t j = 0; j < p.seq_kv; ++j) {
      const std::int64_t page = in.block_table.at(b * p.pages_per_seq() + j / P);
      if (page < 0 || page >= p.num_pages())
        throw std::invalid_argument("block_table[" + std::to_string(b) + "][" +
                                    std::to_string(j / P) + "] = " + std::to_string(page) +
                                    " is outside the pool's " + std::to_string(p.num_pages()) +
                                    " pages");
      for (std::int64_t h = 0; h < hkv; ++h) {
        const auto src = t.begin() + ((page * hkv + h) * P + j % P) * D;
        std::copy(src, src + D, out.begin() + ((b * hkv + h) * p.seq_kv + j) * D);
      }
    }
  return out;
}

}  // namespace

Reference reference_attention(const HostInputs& in, const std::vector<std::int64_t>& heads,
                              RefPrecision precision) {
  const Problem& p = in.problem;
  if (p.paged()) {  // pages first gathered into a contiguous cache, then as below
    HostInputs flat{in.problem, in.q, gather_pages(in, in.k), gather_pages(in, in.v), {}};
    flat.problem.page_size = 0;
    return reference_attention(flat, heads, precision);
  }
  const std::int64_t D = p.head_dim;
  const auto nh = static_cast<std::int64_t>(heads.size());
  Reference r;
  r.heads = heads;
  r.o.assign(nh * p.seq_q * D, 0.0);
  r.lse.assign(nh * p.seq_q, 0.0);
  // Decode each selected head's Q, K, V once, then spread (head, block of rows) over the cores:
  // a few heads of a long sequence keep every core busy. Query head h of sequence b reads K/V head
  // p.kv_head_of(h) of that sequence, and its first kv_len(b) keys only.
  std::vector<std::vector<double>> q(nh), k(nh), v(nh);
  parallel_for(nh, [&](std::int64_t idx) {
    auto decode = [&](const std::vector<std::uint16_t>& t, std::int64_t head, std::int64_t rows,
                      std::int64_t used) {
      std::vector<double> out(static_cast<std::size_t>(rows * D));
      const std::uint16_t* src = t.data() + head * rows * D;
      for (std::int64_t e = 0; e < used * D; ++e)
        out[e] = bits_to_float(src[e], p.dtype);
      return out;
    };
    const std::int64_t b = heads[idx] / p.heads, h = heads[idx] % p.heads;
    const std::int64_t kv_head = b * p.kv_heads() + p.kv_head_of(h);
    q[idx] = decode(in.q, heads[idx], p.seq_q, p.seq_q);
    k[idx] = decode(in.k, kv_head, p.seq_kv, p.kv_len(b));
    v[idx] = decode(in.v, kv_head, p.seq_kv, p.kv_len(b));
  });
  constexpr std::int64_t kRowsPerTask = 32;
  const std::int64_t blocks = (p.seq_q + kRowsPerTask - 1) / kRowsPerTask;
  parallel_for(nh * blocks, [&](std::int64_t task) {
    const std::int64_t idx = task / blocks;
    const std::int64_t begin = (task % blocks) * kRowsPerTask;
    const std::int64_t end = std::min(begin + kRowsPerTask, p.seq_q);
    double* o = r.o.data() + idx * p.seq_q * D;
    double* lse = r.lse.data() + idx * p.seq_q;
    const std::int64_t b = heads[idx] / p.heads;
    if (precision == RefPrecision::exact)
      head_exact(p, b, q[idx].data(), k[idx].data(), v[idx].data(), o, lse, begin, end);
    else
      head_same_precision(p, b, q[idx].data(), k[idx].data(), v[idx].data(), o, lse, begin, end);
  });
  return r;
}

Tolerance default_tolerance(const Problem& p, const Reference& exact) {
  double max_abs = 1.0;
  for (double x : exact.o)
    max_abs = std::max(max_abs, std::abs(x));
  return {unit_roundoff(p.dtype) * max_abs, 1e-5};
}

namespace {

// Calls f(h, i, ref_row, gpu_row) for query row i of every head h the reference holds: ref_row
// indexes the reference's rows, gpu_row the full GPU output's.
template <class F>
void for_each_row(const Problem& p, const Reference& exact, F&& f) {
  for (std::size_t idx = 0; idx < exact.heads.size(); ++idx) {
    const std::int64_t h = exact.heads[idx];
    for (std::int64_t i = 0; i < p.seq_q; ++i)
      f(h, i, static_cast<std::int64_t>(idx) * p.seq_q + i, h * p.seq_q + i);
  }
}

// "0-63, 128-191" from the sorted distinct block indices of width `w` (the last clipped at `n`).
std::string ranges(const std::set<std::int64_t>& blocks, std::int64_t w, std::int64_t n) {
  std::ostringstream os;
  bool open = false;
  std::int64_t first = 0, last = 0;
  auto flush = [&] {
    os << (os.tellp() > 0 ? ", " : "") << first * w << "-" << std::min((last + 1) * w, n) - 1;
  };
  for (std::int64_t b : blocks) {
    if (open && b == last + 1) {
      last = b;
      continue;
    }
    if (open) flush();
    open = true;
    first = last = b;
  }
  if (open) flush();
  return os.str();
}

// Where a failed check's errors live (CheckResult::triage). An element of O is wrong when it is
// not finite or its error exceeds the bound; a row's LSE when its -inf-ness differs from the
// reference or its error exceeds the LSE bound. Query rows are grouped in blocks of 64 (the tile
// height of the fused stages' blocks and consumers) and D in groups of 16 (one MMA fragment).
std::string triage(const Problem& p, const Reference& exact, const std::vector<std::uint16_t>& o,
                   const std::vector<float>& lse, const CheckResult& c) {
  constexpr std::int64_t kRowBlock = 64, kColGroup = 16;
  const std::int64_t D = p.head_dim;
  std::set<std::int64_t> heads, row_blocks, col_groups;
  std::int64_t wrong = 0, nan = 0, inf = 0, lse_wrong = 0;
  std::ostringstream first;
  for_each_row(
      p, exact, [&](std::int64_t h, std::int64_t i, std::int64_t ref_row, std::int64_t gpu_row) {
        for (std::int64_t d = 0; d < D; ++d) {
          const double ref = exact.o[ref_row * D + d];
          const double got = bits_to_float(o[gpu_row * D + d], p.dtype);
          nan += std::isnan(got) ? 1 : 0;
          inf += std::isinf(got) ? 1 : 0;
          if (std::isfinite(got) && std::abs(got - ref) <= c.o_bound) continue;
          if (wrong++ == 0) {
            first.precision(6);
            first << "first wrong: head " << h << " row " << i << " d " << d << ": " << got
                  << " (reference " << ref << ")";
          }
          heads.insert(h);
          row_blocks.insert(i / kRowBlock);
          col_groups.insert(d / kColGroup);
        }
        const double lref = exact.lse[ref_row], lgot = lse[gpu_row];
        const bool both_minus_inf = std::isinf(lref) && lref < 0 && std::isinf(lgot) && lgot < 0;
        if (!both_minus_inf &&
            (!std::isfinite(lgot) || !std::isfinite(lref) || std::abs(lgot - lref) > c.lse_bound)) {
          ++lse_wrong;
          heads.insert(h);
          row_blocks.insert(i / kRowBlock);
        }
      });
  std::ostringstream os;
  os << "triage: " << wrong << " wrong O elements";
  if (!heads.empty()) {
    os << " in heads {";
    int shown = 0;
    for (std::int64_t h : heads) {
      if (shown++ == 8) {
        os << ", ...";
        break;
      }
      os << (shown > 1 ? ", " : "") << h;
    }
    os << "}, query rows " << ranges(row_blocks, kRowBlock, p.seq_q);
    if (!col_groups.empty()) os << ", D columns " << ranges(col_groups, kColGroup, D);
  }
  os << "; "
     << (lse_wrong ? std::to_string(lse_wrong) + " rows of LSE wrong"
                   : std::string("LSE right, only O wrong"));
  os << "; " << nan << " NaN (poison or computed), " << inf << " inf";
  if (wrong) os << "; " << first.str();
  return os.str();
}

}  // namespace

CheckResult check_attention(const Problem& p, const Reference& exact, const Reference& same,
                            const std::vector<std::uint16_t>& o, const std::vector<float>& lse,
                            const Tolerance& tol) {
  CheckResult c;
  const std::int64_t D = p.head_dim;
  double sum_err = 0;
  std::int64_t count = 0;
  double lse_same_max = 0, lse_scale = 1.0;
  for_each_row(
      p, exact, [&](std::int64_t, std::int64_t, std::int64_t ref_row, std::int64_t gpu_row) {
        for (std::int64_t d = 0; d < D; ++d) {
          const double ref = exact.o[ref_row * D + d];
          const double got = bits_to_float(o[gpu_row * D + d], p.dtype);
          if (!std::isfinite(got)) {
            ++c.nan_count;
            continue;
          }
          const double err = std::abs(got - ref);
          sum_err += err;
          ++count;
          if (err > c.o_max_err) {
            c.o_max_err = err;
            c.worst_row = gpu_row;
          }
          c.o_same_max_err = std::max(c.o_same_max_err, std::abs(same.o[ref_row * D + d] - ref));
        }
        const double lref = exact.lse[ref_row];
        const double lgot = lse[gpu_row];
        const double lsame = same.lse[ref_row];
        if (std::isinf(lref) || std::isinf(lgot) || std::isnan(lgot)) {
          // A row that sees no key must give exactly -inf; any other row must be finite.
          if (!(std::isinf(lref) && lref < 0 && std::isinf(lgot) && lgot < 0)) ++c.lse_mismatch;
          return;
        }
        c.lse_max_err = std::max(c.lse_max_err, std::abs(lgot - lref));
        lse_same_max = std::max(lse_same_max, std::abs(lsame - lref));
        lse_scale = std::max(lse_scale, std::abs(lref));
      });
  c.o_mean_err = count ? sum_err / static_cast<double>(count) : 0.0;
  c.o_bound = 2.0 * c.o_same_max_err + tol.o_floor;
  c.lse_bound = 2.0 * lse_same_max + tol.lse_rel_floor * lse_scale;
  c.pass = c.nan_count == 0 && c.lse_mismatch == 0 && c.o_max_err <= c.o_bound &&
           c.lse_max_err <= c.lse_bound;
  std::ostringstream s;
  s.precision(3);
  s << std::scientific << "O max err " << c.o_max_err << " (mean " << c.o_mean_err << ", bound "
    << c.o_bound << " = 2*" << c.o_same_max_err << " + " << tol.o_floor << "), LSE max err "
    << c.lse_max_err << " (bound " << c.lse_bound << ")";
  if (c.nan_count) s << ", " << c.nan_count << " non-finite outputs (unwritten or NaN)";
  if (c.lse_mismatch) s << ", " << c.lse_mismatch << " LSE rows wrongly (non-)infinite";
  if (c.worst_row >= 0 && !c.pass) {
    s << ", worst at head " << c.worst_row / p.seq_q << " row " << c.worst_row % p.seq_q;
  }
  s << " on " << p.name() << " over " << exact.heads.size() << " of " << p.batch_heads()
    << " heads: " << (c.pass ? "PASS" : "FAIL");
  if (!c.pass) {
    c.triage = triage(p, exact, o, lse, c);
    s << "\n  " << c.triage;
  }
  c.summary = s.str();
  return c;
}

// ---- The backward pass ----------------------------------------------------------------------

BackwardInputs make_backward_inputs(const Problem& p, std::uint64_t seed) {
  if (p.grouped() || p.paged() || !p.cache_seqlens.empty())
    throw std::invalid_argument(
        "the backward references take K/V of H heads, contiguous, of Skv "
        "keys each: " +
        p.name() + " has a KV cache's layout");
  BackwardInputs in{make_inputs(p, seed), {}, {}, {}};
  std::vector<std::int64_t> all(static_cast<std::size_t>(p.batch_heads()));
  for (std::int64_t h = 0; h < p.batch_heads(); ++h)
    all[h] = h;
  const Reference fwd = reference_attention(in.fwd, all, RefPrecision::exact);
  in.o.resize(fwd.o.size());
  for (std::size_t e = 0; e < fwd.o.size(); ++e)
    in.o[e] = float_to_bits(static_cast<float>(fwd.o[e]), p.dtype);
  in.lse.resize(fwd.lse.size());
  for (std::size_t r = 0; r < fwd.lse.size(); ++r)
    in.lse[r] = static_cast<float>(fwd.lse[r]);
  // dO: zero mean (a loss's gradient has no preferred sign), its own stream of the seed.
  std::mt19937_64 rng(seed ^ 0xd0d0d0d0d0d0d0d0ULL);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  in.dout.resize(static_cast<std::size_t>(p.o_elems()));
  for (auto& x : in.dout)
    x = float_to_bits(u(rng), p.dtype);
  return in;
}

namespace {

// One head's tensors decoded to double: q, o, dout [Sq, D]; k, v [Skv, D]; lse [Sq].
struct HeadInputs {
  std::vector<double> q, k, v, o, dout, lse;
};

HeadInputs decode_head(const BackwardInputs& in, std::int64_t h) {
  const Problem& p = in.fwd.problem;
  const std::int64_t D = p.head_dim;
  auto decode = [&](const std::vector<std::uint16_t>& t, std::int64_t rows) {
    std::vector<double> out(static_cast<std::size_t>(rows * D));
    const std::uint16_t* src = t.data() + h * rows * D;
    for (std::int64_t e = 0; e < rows * D; ++e)
      out[e] = bits_to_float(src[e], p.dtype);
    return out;
  };
  HeadInputs x;
  x.q = decode(in.fwd.q, p.seq_q);
  x.k = decode(in.fwd.k, p.seq_kv);
  x.v = decode(in.fwd.v, p.seq_kv);
  x.o = decode(in.o, p.seq_q);
  x.dout = decode(in.dout, p.seq_q);
  x.lse.assign(in.lse.begin() + h * p.seq_q, in.lse.begin() + (h + 1) * p.seq_q);
  return x;
}

// One head, exact: the gradient of softmax(scale Q Kᵀ) V in double, row by row. For row i:
//   P_ij = softmax_j(S_ij),  dP_ij = dO_i · V_j,  D_i = Σ_j P_ij dP_ij,  dS_ij = P_ij (dP_ij - D_i)
//   dQ_i = scale Σ_j dS_ij K_j,  dK_j += scale dS_ij Q_i,  dV_j += P_ij dO_i.
void head_backward_exact(const Problem& p, const HeadInputs& x, double* dq, double* dk,
                         double* dv) {
  const std::int64_t D = p.head_dim;
  const double scale = p.softmax_scale();
  std::vector<double> s(static_cast<std::size_t>(p.seq_kv)), dp(s.size());
  for (std::int64_t i = 0; i < p.seq_q; ++i) {
    const std::int64_t end = p.kv_end(i);
    double* dqi = dq + i * D;
    std::fill(dqi, dqi + D, 0.0);
    if (end == 0) continue;  // a row that sees no key has no gradient
    double m = kNegInf;
    for (std::int64_t j = 0; j < end; ++j) {
      double acc = 0, dacc = 0;
      for (std::int64_t d = 0; d < D; ++d) {
        acc += x.q[i * D + d] * x.k[j * D + d];
        dacc += x.dout[i * D + d] * x.v[j * D + d];
      }
      s[j] = acc * scale;
      dp[j] = dacc;
      m = std::max(m, s[j]);
    }
    double l = 0;
    for (std::int64_t j = 0; j < end; ++j) {
      s[j] = std::exp(s[j] - m);
      l += s[j];
    }
    double di = 0;
    for (std::int64_t j = 0; j < end; ++j) {
      s[j] /= l;  // P_ij
      di += s[j] * dp[j];
    }
    for (std::int64_t j = 0; j < end; ++j) {
      const double ds = s[j] * (dp[j] - di);
      for (std::int64_t d = 0; d < D; ++d) {
        dqi[d] += scale * ds * x.k[j * D + d];
        dk[j * D + d] += scale * ds * x.q[i * D + d];
        dv[j * D + d] += s[j] * x.dout[i * D + d];
      }
    }
  }
}

// One head, as a careful fp32 kernel computes it from the inputs it is given (O, LSE included).
void head_backward_same_precision(const Problem& p, const HeadInputs& x, double* dq, double* dk,
                                  double* dv) {
  const std::int64_t D = p.head_dim;
  const float scale = p.softmax_scale();
  const DType t = p.dtype;
  std::vector<float> acc_dk(static_cast<std::size_t>(p.seq_kv * D), 0.0f), acc_dv(acc_dk.size());
  std::vector<float> acc_dq(static_cast<std::size_t>(D));
  for (std::int64_t i = 0; i < p.seq_q; ++i) {
    const std::int64_t end = p.kv_end(i);
    std::fill(acc_dq.begin(), acc_dq.end(), 0.0f);
    float di = 0;  // D_i = rowsum(dO_i ∘ O_i), from the given O
    for (std::int64_t d = 0; d < D; ++d)
      di += static_cast<float>(x.dout[i * D + d]) * static_cast<float>(x.o[i * D + d]);
    const float lse = static_cast<float>(x.lse[i]);
    for (std::int64_t j = 0; j < end; ++j) {
      float dot = 0, dpj = 0;
      for (std::int64_t d = 0; d < D; ++d) {
        dot += static_cast<float>(x.q[i * D + d]) * static_cast<float>(x.k[j * D + d]);
        dpj += static_cast<float>(x.dout[i * D + d]) * static_cast<float>(x.v[j * D + d]);
      }
      const float pij = std::exp(dot * scale - lse);
      const float pr = round_to(pij, t);               // P enters dV = Pᵀ dO in the dtype
      const float ds = round_to(pij * (dpj - di), t);  // dS enters dQ and dK in the dtype
      for (std::int64_t d = 0; d < D; ++d) {
        acc_dq[d] += ds * static_cast<float>(x.k[j * D + d]);
        acc_dk[j * D + d] += ds * static_cast<float>(x.q[i * D + d]);
        acc_dv[j * D + d] += pr * static_cast<float>(x.dout[i * D + d]);
      }
    }
    for (std::int64_t d = 0; d < D; ++d)
      dq[i * D + d] = round_to(acc_dq[d] * scale, t);
  }
  for (std::size_t e = 0; e < acc_dk.size(); ++e) {
    dk[e] = round_to(acc_dk[e] * scale, t);
    dv[e] = round_to(acc_dv[e], t);
  }
}

}  // namespace

BackwardReference reference_attention_backward(const BackwardInputs& in,
                                               const std::vector<std::int64_t>& heads,
                                               RefPrecision precision) {
  const Problem& p = in.fwd.problem;
  const std::int64_t D = p.head_dim;
  const auto nh = static_cast<std::int64_t>(heads.size());
  BackwardReference r;
  r.heads = heads;
  r.dq.assign(nh * p.seq_q * D, 0.0);
  r.dk.assign(nh * p.seq_kv * D, 0.0);
  r.dv.assign(nh * p.seq_kv * D, 0.0);
  // dK and dV sum over every query row, so a head is one task.
  parallel_for(nh, [&](std::int64_t idx) {
    const HeadInputs x = decode_head(in, heads[idx]);
    double* dq = r.dq.data() + idx * p.seq_q * D;
    double* dk = r.dk.data() + idx * p.seq_kv * D;
    double* dv = r.dv.data() + idx * p.seq_kv * D;
    if (precision == RefPrecision::exact)
      head_backward_exact(p, x, dq, dk, dv);
    else
      head_backward_same_precision(p, x, dq, dk, dv);
  });
  return r;
}

namespace {

// One gradient against both references; `first` gets its first wrong element, if any.
GradientCheck check_gradient(const Problem& p, const char* name, std::int64_t rows,
                             const std::vector<std::int64_t>& heads,
                             const std::vector<double>& exact, const std::vector<double>& same,
                             const std::vector<std::uint16_t>& got, std::string* first) {
  const std::int64_t D = p.head_dim;
  GradientCheck g;
  double max_ref = 0;
  for (std::size_t e = 0; e < exact.size(); ++e) {
    max_ref = std::max(max_ref, std::abs(exact[e]));
    g.same_max_err = std::max(g.same_max_err, std::abs(same[e] - exact[e]));
  }
  g.floor = unit_roundoff(p.dtype) * max_ref;
  g.bound = 2.0 * g.same_max_err + g.floor;
  for (std::size_t idx = 0; idx < heads.size(); ++idx) {
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t d = 0; d < D; ++d) {
        const std::int64_t e = (static_cast<std::int64_t>(idx) * rows + r) * D + d;
        const double ref = exact[e];
        const double x = bits_to_float(got[(heads[idx] * rows + r) * D + d], p.dtype);
        const bool finite = std::isfinite(x);
        if (finite) g.max_err = std::max(g.max_err, std::abs(x - ref));
        g.nonfinite += finite ? 0 : 1;
        if (finite && std::abs(x - ref) <= g.bound) continue;
        if (g.wrong++ == 0) {
          std::ostringstream os;
          os.precision(6);
          os << "first wrong " << name << ": head " << heads[idx] << " row " << r << " d " << d
             << ": " << x << " (reference " << ref << ")";
          *first = os.str();
        }
      }
    }
  }
  g.pass = g.wrong == 0;
  return g;
}

}  // namespace

BackwardCheckResult check_attention_backward(const Problem& p, const BackwardReference& exact,
                                             const BackwardReference& same,
                                             const std::vector<std::uint16_t>& dq,
                                             const std::vector<std::uint16_t>& dk,
                                             const std::vector<std::uint16_t>& dv) {
  BackwardCheckResult c;
  std::string first[3];
  c.dq = check_gradient(p, "dQ", p.seq_q, exact.heads, exact.dq, same.dq, dq, &first[0]);
  c.dk = check_gradient(p, "dK", p.seq_kv, exact.heads, exact.dk, same.dk, dk, &first[1]);
  c.dv = check_gradient(p, "dV", p.seq_kv, exact.heads, exact.dv, same.dv, dv, &first[2]);
  c.pass = c.dq.pass && c.dk.pass && c.dv.pass;
  std::ostringstream s;
  s.precision(3);
  s << std::scientific;
  const std::pair<const char*, const GradientCheck*> parts[] = {
      {"dQ", &c.dq}, {"dK", &c.dk}, {"dV", &c.dv}};
  for (const auto& [name, g] : parts) {
    s << name << " max err " << g->max_err << " (bound " << g->bound << " = 2*" << g->same_max_err
      << " + " << g->floor << ")";
    if (g->nonfinite) s << " " << g->nonfinite << " non-finite (unwritten or NaN)";
    s << (g->pass ? " ok" : " FAIL") << " | ";
  }
  s << "on " << p.name() << " over " << exact.heads.size() << " of " << p.batch_heads()
    << " heads: " << (c.pass ? "PASS" : "FAIL");
  if (!c.pass) {
    std::ostringstream t;
    t << "triage: wrong elements dQ " << c.dq.wrong << ", dK " << c.dk.wrong << ", dV "
      << c.dv.wrong;
    for (const std::string& f : first)
      if (!f.empty()) t << "; " << f;
    c.triage = t.str();
    s << "\n  " << c.triage;
  }
  c.summary = s.str();
  return c;
}

}  // namespace flashsteps
