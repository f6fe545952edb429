#include "flashsteps/host_tensors.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <bit>
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
  HostInputs in{p, {}, {}, {}};
  in.q = random_tensor(p.q_elems(), 0.25f, p.dtype, rng);
  in.k = random_tensor(p.kv_elems(), 0.25f, p.dtype, rng);
  in.v = random_tensor(p.kv_elems(), 0.5f, p.dtype, rng);
  return in;
}

}  // namespace flashsteps
