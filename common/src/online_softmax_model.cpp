#include "flashsteps/online_softmax_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "flashsteps/mask.hpp"

namespace flashsteps {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr double kLog2e = 1.44269504088896340736;  // log2(e)
constexpr double kLn2 = 0.69314718055994530942;    // ln(2) = 1 / log2(e)

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// The rows [0, rows) of one head of a [B*H, rows, D] dtype tensor, decoded to doubles.
std::vector<double> decode_head(const std::vector<std::uint16_t>& t, std::int64_t head,
                                std::int64_t rows, std::int64_t D, DType dtype) {
  std::vector<double> out(static_cast<std::size_t>(rows * D));
  const std::uint16_t* src = t.data() + head * rows * D;
  for (std::int64_t e = 0; e < rows * D; ++e)
    out[e] = bits_to_float(src[e], dtype);
  return out;
}

// One head. Each iteration of the outer loop is what one thread block of the stage-03 kernel does
// for its query block Q_i; the names are the kernel's.
void head_model(const Problem& p, const double* q, const double* k, const double* v, double* o,
                double* lse, const OnlineSoftmaxTiling& tiling, OnlineSoftmaxStats& stats) {
  const std::int64_t Sq = p.seq_q, Skv = p.seq_kv, D = p.head_dim;
  const std::int64_t Br = tiling.br, Bc = tiling.bc;
  const std::int64_t Tr = ceil_div(Sq, Br);   // query blocks: the kernel's grid, per head
  const std::int64_t Tc = ceil_div(Skv, Bc);  // key/value tiles a block would walk without a mask
  // exp(tau * (s - m)) = exp2(tau * log2(e) * (s - m)): m is the maximum of the raw scores
  // s = q . k, and the scale (tau) and log2(e) are folded into one factor, as in the kernel.
  const double scale_log2 = static_cast<double>(p.softmax_scale()) * kLog2e;

  std::vector<double> S(static_cast<std::size_t>(Br * Bc));          // (Br, Bc) S_ij, then P_ij
  std::vector<double> acc(static_cast<std::size_t>(Br * D));         // (Br, D) unnormalised O_i
  std::vector<double> m(static_cast<std::size_t>(Br)), l(m.size());  // (Br) running max and sum

  for (std::int64_t i = 0; i < Tr; ++i) {
    const std::int64_t row0 = i * Br;
    const std::int64_t rows = std::min(Br, Sq - row0);  // the last block may be ragged
    std::fill(m.begin(), m.end(), kNegInf);
    std::fill(l.begin(), l.end(), 0.0);
    std::fill(acc.begin(), acc.end(), 0.0);

    // The block's last row sees the most keys (the mask is monotone in the row), so the tiles
    // past its last visible key are entirely masked for every row of the block: skip them.
    const std::int64_t kv_stop = causal_kv_end(row0 + rows - 1, Sq, Skv, p.causal);
    const std::int64_t Tc_i = ceil_div(kv_stop, Bc);  // 0 when no row of the block sees a key
    stats.tiles_visited += Tc_i;
    stats.tiles_skipped += Tc - Tc_i;

    for (std::int64_t j = 0; j < Tc_i; ++j) {
      const std::int64_t kv0 = j * Bc;
      // S_ij = Q_i K_j^T, raw (unscaled). A column a row does not see — past the causal diagonal
      // or past Skv in a ragged last tile — is -inf, so it contributes exp2(-inf) = 0.
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t kv_end = causal_kv_end(row0 + r, Sq, Skv, p.causal);
        for (std::int64_t c = 0; c < Bc; ++c) {
          const std::int64_t col = kv0 + c;
          double s = kNegInf;
          if (col < kv_end) {
            s = 0;
            for (std::int64_t d = 0; d < D; ++d)
              s += q[(row0 + r) * D + d] * k[col * D + d];
          }
          S[r * Bc + c] = s;
        }
      }
      //! [model_online_softmax]
      // The online softmax, row by row.
      for (std::int64_t r = 0; r < rows; ++r) {
        double tile_max = kNegInf;
        for (std::int64_t c = 0; c < Bc; ++c)
          tile_max = std::max(tile_max, S[r * Bc + c]);
        const double m_new = std::max(m[r], tile_max);
        // A row that has seen no key yet keeps m = -inf; subtracting a safe 0 instead keeps
        // exp2(-inf - -inf) = NaN out: alpha and every p are then exp2(-inf) = 0.
        const double m_safe = m_new == kNegInf ? 0.0 : m_new;
        const double m_scaled = m_safe * scale_log2;
        const double alpha = tiling.rescale ? std::exp2(m[r] * scale_log2 - m_scaled) : 1.0;
        double row_sum = 0;
        for (std::int64_t c = 0; c < Bc; ++c) {
          const double pc = std::exp2(S[r * Bc + c] * scale_log2 - m_scaled);  // P_ij
          S[r * Bc + c] = pc;
          row_sum += pc;
        }
        l[r] = alpha * l[r] + row_sum;
        // O_i = alpha * O_i + P_ij V_j (only the visible columns: the others have p = 0).
        double* acc_r = acc.data() + r * D;
        for (std::int64_t d = 0; d < D; ++d)
          acc_r[d] *= alpha;
        for (std::int64_t c = 0; c < Bc && kv0 + c < Skv; ++c) {
          const double pc = S[r * Bc + c];
          for (std::int64_t d = 0; d < D; ++d)
            acc_r[d] += pc * v[(kv0 + c) * D + d];
        }
        m[r] = m_new;
      }
      //! [model_online_softmax]
    }

    // Epilogue: O_i = acc / l and LSE_i = tau * m + ln(l) = ln(2) * (tau2 * m + log2(l)). A row
    // that saw no key has l = 0: O = 0 and LSE = -inf by the contract, not 0/0.
    for (std::int64_t r = 0; r < rows; ++r) {
      double* o_r = o + (row0 + r) * D;
      const double inv_l = l[r] > 0 ? 1.0 / l[r] : 0.0;
      for (std::int64_t d = 0; d < D; ++d)
        o_r[d] = acc[r * D + d] * inv_l;
      lse[row0 + r] = l[r] > 0 ? kLn2 * (m[r] * scale_log2 + std::log2(l[r])) : kNegInf;
    }
  }
}

}  // namespace

Reference online_softmax_model(const HostInputs& in, const std::vector<std::int64_t>& heads,
                               const OnlineSoftmaxTiling& tiling, OnlineSoftmaxStats* stats) {
  if (tiling.br < 1 || tiling.bc < 1) {
    throw std::invalid_argument("online_softmax_model: Br = " + std::to_string(tiling.br) +
                                " and Bc = " + std::to_string(tiling.bc) + " must be >= 1");
  }
  const Problem& p = in.problem;
  const std::int64_t D = p.head_dim;
  Reference r;
  r.heads = heads;
  r.o.assign(heads.size() * p.seq_q * D, 0.0);
  r.lse.assign(heads.size() * p.seq_q, 0.0);
  OnlineSoftmaxStats local;
  for (std::size_t idx = 0; idx < heads.size(); ++idx) {
    const std::int64_t h = heads[idx];
    const auto q = decode_head(in.q, h, p.seq_q, D, p.dtype);
    const auto k = decode_head(in.k, h, p.seq_kv, D, p.dtype);
    const auto v = decode_head(in.v, h, p.seq_kv, D, p.dtype);
    head_model(p, q.data(), k.data(), v.data(), r.o.data() + idx * p.seq_q * D,
               r.lse.data() + idx * p.seq_q, tiling, local);
  }
  if (stats) *stats = local;
  return r;
}

}  // namespace flashsteps
