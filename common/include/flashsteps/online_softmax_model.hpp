// flashsteps/online_softmax_model.hpp — the tiled online-softmax recurrence of FlashAttention-2,
// executed on the host: the executable specification of stage 03.
//
// It walks the same tiles in the same order as the fused kernel (stages/03_online_softmax), with
// the same names (Tr, Tc, Br, Bc, m, l, alpha, the exp2 form with log2 e folded into the scale,
// the m = -inf guard), but in double arithmetic and with Br and Bc as runtime parameters. Since
// the recurrence is exact for every tiling (book chapter "Attention", "Why it is exact"), its
// result must agree with the exact reference (reference.hpp) to double rounding — for any Br and
// Bc, ragged or not, causal or not. The CPU tests check that; a kernel bug that the model does
// not share is then a bug in the translation to CUDA, not in the algorithm.
#pragma once

#include <cstdint>
#include <vector>

#include "flashsteps/host_tensors.hpp"
#include "flashsteps/reference.hpp"

namespace flashsteps {

/// The tiling, and one switch that breaks the algorithm on purpose.
struct OnlineSoftmaxTiling {
  std::int64_t br = 64;  ///< Br: query rows per block (>= 1; larger than Sq is fine)
  std::int64_t bc = 64;  ///< Bc: key/value rows per tile (>= 1; larger than Skv is fine)
  /// false drops the correction alpha = exp2(m_old - m_new): l and the O accumulator then mix
  /// terms relative to different maxima. Wrong whenever a row's maximum grows after its first
  /// tile; it exists so that the tests show they can tell.
  bool rescale = true;
};

/// What the walk did, summed over the heads: how many (Q block, K/V tile) pairs it visited and
/// how many it skipped as entirely above the causal diagonal.
struct OnlineSoftmaxStats {
  std::int64_t tiles_visited = 0;
  std::int64_t tiles_skipped = 0;
};

/// O and LSE of `heads` (flat index b*H + h) by the tiled recurrence, in the layout of
/// reference_attention(). Throws std::invalid_argument when Br or Bc is below 1.
Reference online_softmax_model(const HostInputs& in, const std::vector<std::int64_t>& heads,
                               const OnlineSoftmaxTiling& tiling,
                               OnlineSoftmaxStats* stats = nullptr);

}  // namespace flashsteps
