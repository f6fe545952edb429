#include "flashsteps/host_tensors.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <bit>
#include <numeric>
#include <random>

namespace flashsteps {

// The conversions are the CUDA toolkit's own host implementations, so host and device round alike.
std::uint16_t float_to_bits(float x, DType t) {
  if (t == DType::fp16) return std::bit_cast<std::uint16_t>(__float2half_rn(x));
  return std::bit_cast<std::uint16_t>(__float2bfloat16_rn(x));
}

float bits_to_float(std::uint16_t bits, DType t) {
  if (t == DType::fp16) return __half2float(std::bit_cast<__half>(bits));
  return __bfloat162float(std::bit_cast<__nv_bfloat16>(bits));
}

double unit_roundoff(DType t) {
  return t == DType::fp16 ? 0x1p-11 : 0x1p-8;
}

namespace {

std::vector<std::uint16_t> random_tensor(std::int64_t n, float mean, DType t,
                                         std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(mean - 1.0f, mean + 1.0f);
  std::vector<std::uint16_t> out(static_cast<std::size_t>(n));
  for (auto& x : out)
    x = float_to_bits(u(rng), t);
  return out;
}

}  // namespace

HostInputs make_inputs(const Problem& p, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  HostInputs in{p, {}, {}, {}, {}};
  // K and V contiguous first, [B,H_kv,Skv,D]: the same draws as ever for a problem without a cache.
  Problem flat = p;
  flat.page_size = 0;
  in.q = random_tensor(p.q_elems(), 0.25f, p.dtype, rng);
  in.k = random_tensor(flat.kv_elems(), 0.25f, p.dtype, rng);
  in.v = random_tensor(flat.kv_elems(), 0.5f, p.dtype, rng);
  const std::int64_t D = p.head_dim, hkv = p.kv_heads();
  if (!p.cache_seqlens.empty()) {
    for (std::int64_t b = 0; b < p.batch; ++b)
      for (std::int64_t h = 0; h < hkv; ++h)
        for (auto* t : {&in.k, &in.v}) {
          const auto head = t->begin() + (b * hkv + h) * p.seq_kv * D;
          std::fill(head + p.kv_len(b) * D, head + p.seq_kv * D, kUnusedKvBits);
        }
  }
  if (!p.paged()) return in;
  // Paged: a shuffled table, then row j of sequence b goes to row j % P of page table[b][j / P].
  const std::int64_t P = p.page_size, pages = p.pages_per_seq();
  in.block_table.resize(static_cast<std::size_t>(p.num_pages()));
  std::iota(in.block_table.begin(), in.block_table.end(), 0);
  std::shuffle(in.block_table.begin(), in.block_table.end(), rng);
  for (auto* t : {&in.k, &in.v}) {
    std::vector<std::uint16_t> pool(static_cast<std::size_t>(p.kv_elems()), kUnusedKvBits);
    for (std::int64_t b = 0; b < p.batch; ++b)
      for (std::int64_t h = 0; h < hkv; ++h)
        for (std::int64_t j = 0; j < p.seq_kv; ++j) {
          const std::int64_t page = in.block_table[b * pages + j / P];
          const auto src = t->begin() + ((b * hkv + h) * p.seq_kv + j) * D;
          std::copy(src, src + D, pool.begin() + ((page * hkv + h) * P + j % P) * D);
        }
    *t = std::move(pool);
  }
  return in;
}

}  // namespace flashsteps
