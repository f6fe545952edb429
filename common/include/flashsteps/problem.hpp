// flashsteps/problem.hpp — the attention problem every stage solves, and its validation.
//
// Shapes follow PyTorch's SDPA: Q [B,H,Sq,D], K/V [B,H_kv,Skv,D], O [B,H,Sq,D] contiguous in the
// input dtype, LSE [B,H,Sq] fp32 (natural log). Causal masking is bottom-right aligned
// (FlashAttention-2): query i sees key j iff j <= i + Skv - Sq.
//
// A KV cache (FlashAttention's flash_attn_with_kvcache) adds three things, each optional:
//  * heads_kv: K/V have H_kv heads, H a multiple of it; query head h reads K/V head
//    h / (H / H_kv) (GQA; H_kv = 1 is MQA). 0, the default, means H_kv = H.
//  * cache_seqlens [B]: sequence b holds its first cache_seqlens[b] keys of the Skv the cache has
//    room for; the rest of its K/V rows are not part of the problem. Row i of sequence b sees keys
//    [0, causal_kv_end(i, Sq, L_b, causal)), L_b = cache_seqlens[b]: causal stays bottom-right
//    aligned, to L_b. A row that sees no key (L_b = 0, or causal with i + L_b < Sq) has O = 0 and
//    LSE = -inf, as everywhere.
//  * page_size: K/V live in a pool of pages, each [H_kv, page_size, D] (K [P, H_kv, page_size, D]),
//    and key j of sequence b is row j % page_size of page block_table[b, j / page_size]. The
//    table, [B, ceil(Skv / page_size)] int32, is an input (HostInputs::block_table); the pool has
//    B * ceil(Skv / page_size) pages.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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
  float scale = 0.0f;         ///< 0 selects the default 1/sqrt(head_dim)
  std::int64_t heads_kv = 0;  ///< K/V heads H_kv (GQA, MQA); 0 means H. H % H_kv == 0.
  /// Keys held by each sequence's cache, [B], each in [0, Skv]; empty: every sequence holds Skv.
  std::vector<std::int32_t> cache_seqlens;
  std::int64_t page_size = 0;  ///< keys per page of a paged K/V cache; 0: K/V contiguous

  float softmax_scale() const;
  std::int64_t batch_heads() const { return batch * heads; }
  /// H_kv: heads_kv, or H when it is 0.
  std::int64_t kv_heads() const { return heads_kv != 0 ? heads_kv : heads; }
  /// Whether K/V have fewer heads than Q.
  bool grouped() const { return kv_heads() != heads; }
  bool paged() const { return page_size != 0; }
  /// The K/V head query head h (0..H-1) reads: h / (H / H_kv).
  std::int64_t kv_head_of(std::int64_t h) const { return h / (heads / kv_heads()); }
  /// Keys sequence b holds: cache_seqlens[b], or Skv.
  std::int64_t kv_len(std::int64_t b) const {
    return cache_seqlens.empty() ? seq_kv : cache_seqlens[static_cast<std::size_t>(b)];
  }
  /// Pages per sequence in the block table, ceil(Skv / page_size), and in the pool (B times that).
  std::int64_t pages_per_seq() const { return paged() ? (seq_kv + page_size - 1) / page_size : 0; }
  std::int64_t num_pages() const { return batch * pages_per_seq(); }
  std::int64_t q_elems() const { return batch * heads * seq_q * head_dim; }
  /// Elements of K (and of V) as stored: B*H_kv*Skv*D, or the page pool's P*H_kv*page_size*D.
  std::int64_t kv_elems() const {
    return paged() ? num_pages() * kv_heads() * page_size * head_dim
                   : batch * kv_heads() * seq_kv * head_dim;
  }
  std::int64_t o_elems() const { return q_elems(); }
  std::int64_t lse_elems() const { return batch * heads * seq_q; }
  /// The fewest bytes any implementation must move through DRAM: Q, K, V, O and LSE forward;
  /// Q, K, V, O, dO, LSE, dQ, dK and dV backward. K and V count the keys each sequence holds
  /// (kv_len), once per K/V head; the block table and the lengths are not counted.
  std::int64_t min_dram_bytes(StageKind kind = StageKind::forward) const;
  /// What the tensors take in device memory: Q, K, V, O, LSE (and the backward's), K and V as
  /// stored (kv_elems), the lengths and the block table.
  std::int64_t device_bytes(StageKind kind = StageKind::forward) const;
  /// FlashAttention's count: 4*B*H*Sq*Skv*D (two products), halved when causal; the backward
  /// counts 2.5 times that (five products of the same size; FlashAttention's
  /// benchmarks/benchmark_flash_attention.py, flops(mode="bwd")).
  double flops(StageKind kind = StageKind::forward) const;
  /// Last key index visible to query row i, exclusive: keys [0, kv_end(i)) are visible.
  /// Of sequence 0 (every sequence, without cache_seqlens).
  std::int64_t kv_end(std::int64_t i) const;
  /// The same for query row i of sequence b: aligned to kv_len(b).
  std::int64_t kv_end(std::int64_t b, std::int64_t i) const;
  /// The benchmark/shape name: b<B>_h<H>_sq<Sq>_skv<Skv>_d<D>_<dtype>[_causal], then
  /// [_hkv<H_kv>] when H_kv != H, [_page<page_size>] when paged and [_lens<L0>-<L1>-...] with
  /// cache_seqlens: a problem without them keeps the name it always had.
  std::string name() const;
};

/// Checks what holds for every stage and device: sizes >= 1, D <= kMaxHeadDim, sequence lengths
/// under the 32-bit row-index limit, element counts that do not overflow 64-bit offsets; H a
/// multiple of H_kv, B cache lengths each in [0, Skv], a page size in [1, kMaxSeqLen].
/// Returns an empty string when valid, otherwise a message naming the violated limit.
std::string validate(const Problem& p);

/// Checks that inputs, outputs (those of `kind`) and a stage's workspace fit in `free_bytes` of
/// device memory.
std::string check_fits_memory(const Problem& p, std::int64_t workspace_bytes,
                              std::int64_t free_bytes, StageKind kind = StageKind::forward);

/// Parses a benchmark name produced by Problem::name() (the part after "<stage>/").
std::optional<Problem> parse_problem_name(std::string_view name);

/// A ragged batch: `batch` lengths drawn uniformly from [0, seq_kv] with `seed` (the runner's
/// --cache-lens seeded:<seed>). Same seed, same lengths.
std::vector<std::int32_t> draw_cache_seqlens(std::int64_t batch, std::int64_t seq_kv,
                                             std::uint64_t seed);

}  // namespace flashsteps
