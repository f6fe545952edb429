// flashsteps/problem.hpp — the attention problem every stage solves, and its validation.
//
// Shapes follow PyTorch's SDPA: Q [B,H,Sq,D], K/V [B,H,Skv,D], O [B,H,Sq,D] contiguous in the
// input dtype, LSE [B,H,Sq] fp32 (natural log). Causal masking is bottom-right aligned
// (FlashAttention-2): query i sees key j iff j <= i + Skv - Sq.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace flashsteps {

enum class DType { fp16, bf16 };

/// What a stage computes (its manifest's KIND): the forward pass (Q, K, V -> O, LSE) or the
/// backward pass (Q, K, V, O, dO, LSE -> dQ, dK, dV). The harness picks the suite, the reference,
/// the FLOP count and the tensors from it.
enum class StageKind { forward, backward };
std::string_view to_string(StageKind k);

std::string_view to_string(DType t);
std::optional<DType> parse_dtype(std::string_view s);
constexpr std::int64_t dtype_bytes(DType) {
  return 2;
}

/// Largest head dimension any stage of this project may support.
inline constexpr std::int64_t kMaxHeadDim = 256;
/// Row indices inside kernels are 32-bit; offsets into tensors are 64-bit.
inline constexpr std::int64_t kMaxSeqLen = std::int64_t{1} << 30;

struct Problem {
  std::int64_t batch = 1;
  std::int64_t heads = 1;
  std::int64_t seq_q = 1;
  std::int64_t seq_kv = 1;
  std::int64_t head_dim = 64;
  DType dtype = DType::fp16;
  bool causal = false;
  float scale = 0.0f;  ///< 0 selects the default 1/sqrt(head_dim)

  float softmax_scale() const;
  std::int64_t batch_heads() const { return batch * heads; }
  std::int64_t q_elems() const { return batch * heads * seq_q * head_dim; }
  std::int64_t kv_elems() const { return batch * heads * seq_kv * head_dim; }
  std::int64_t o_elems() const { return q_elems(); }
  std::int64_t lse_elems() const { return batch * heads * seq_q; }
  /// The fewest bytes any implementation must move through DRAM: Q, K, V, O and LSE forward;
  /// Q, K, V, O, dO, LSE, dQ, dK and dV backward.
  std::int64_t min_dram_bytes(StageKind kind = StageKind::forward) const;
  /// FlashAttention's count: 4*B*H*Sq*Skv*D (two products), halved when causal; the backward
  /// counts 2.5 times that (five products of the same size; FlashAttention's
  /// benchmarks/benchmark_flash_attention.py, flops(mode="bwd")).
  double flops(StageKind kind = StageKind::forward) const;
  /// Last key index visible to query row i, exclusive: keys [0, kv_end(i)) are visible.
  std::int64_t kv_end(std::int64_t i) const;
  /// The benchmark/shape name: b<B>_h<H>_sq<Sq>_skv<Skv>_d<D>_<dtype>[_causal].
  std::string name() const;
};

/// Checks what holds for every stage and device: sizes >= 1, D <= kMaxHeadDim, sequence lengths
/// under the 32-bit row-index limit, element counts that do not overflow 64-bit offsets.
/// Returns an empty string when valid, otherwise a message naming the violated limit.
std::string validate(const Problem& p);

/// Checks that inputs, outputs (those of `kind`) and a stage's workspace fit in `free_bytes` of
/// device memory.
std::string check_fits_memory(const Problem& p, std::int64_t workspace_bytes,
                              std::int64_t free_bytes, StageKind kind = StageKind::forward);

/// Parses a benchmark name produced by Problem::name() (the part after "<stage>/").
std::optional<Problem> parse_problem_name(std::string_view name);

}  // namespace flashsteps
