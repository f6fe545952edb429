// flashsteps/host_tensors.hpp — inputs on the host: seeded, random, offset from zero mean.
//
// Tensors are kept as raw 16-bit storage (fp16 or bf16 bits), exactly what the GPU reads, so the
// CPU reference sees the same rounded values the kernels see.
#pragma once

#include <cstdint>
#include <vector>

#include "flashsteps/problem.hpp"

namespace flashsteps {

/// Round-to-nearest-even conversion of a float to the dtype's bits, and back.
std::uint16_t float_to_bits(float x, DType t);
float bits_to_float(std::uint16_t bits, DType t);
/// Rounds a value through the dtype (what storing it to a 16-bit tensor does).
inline float round_to(float x, DType t) {
  return bits_to_float(float_to_bits(x, t), t);
}
/// Unit roundoff of the dtype: 2^-11 for fp16, 2^-8 for bf16.
double unit_roundoff(DType t);

struct HostInputs {
  Problem problem;
  std::vector<std::uint16_t> q;           // [B,H,Sq,D]
  std::vector<std::uint16_t> k;           // [B,H_kv,Skv,D], or paged: [P,H_kv,page_size,D]
  std::vector<std::uint16_t> v;           // as K
  std::vector<std::int32_t> block_table;  // paged only: [B, pages_per_seq], pages of K and V
};

/// The bits every K/V row that is no part of the problem holds in make_inputs()' tensors: keys
/// past a sequence's cache_seqlens and the unused rows of its last page. NaN in fp16 and bf16, so
/// a stage that reads such a row into its sums fails the check.
inline constexpr std::uint16_t kUnusedKvBits = 0xFFFF;

/// Uniform values in [mean - 1, mean + 1), rounded to the dtype. Q and K are offset by +0.25 and
/// V by +0.5: a zero-mean V makes O small and relative error meaningless; a nonzero mean in Q and
/// K gives scores a nonzero mean, as real attention has. Same seed, same tensors. K/V rows past a
/// sequence's cache length hold kUnusedKvBits; a paged problem's block table is a seeded shuffle
/// of the pool's pages (so no sequence's pages are in order), and K/V are scattered into them.
HostInputs make_inputs(const Problem& p, std::uint64_t seed);

}  // namespace flashsteps
