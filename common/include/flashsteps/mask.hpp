// flashsteps/mask.hpp — the causal mask, one definition for host references and kernels.
#pragma once

#if defined(__CUDACC__)
#define FS_HOST_DEVICE __host__ __device__
#else
#define FS_HOST_DEVICE
#endif

namespace flashsteps {

/// Bottom-right aligned causal mask (FlashAttention-2): query row i sees keys j <= i + Skv - Sq,
/// so keys [0, causal_kv_end) are visible. 0 means the row sees no key (O = 0, LSE = -inf).
FS_HOST_DEVICE inline long long causal_kv_end(long long i, long long sq, long long skv,
                                              bool causal) {
  if (!causal) return skv;
  const long long last = i + skv - sq;
  return last < 0 ? 0 : (last + 1 < skv ? last + 1 : skv);
}

}  // namespace flashsteps
