// flashsteps/reference.hpp — the CPU references and FlashAttention's pass rule.
//
// Two references on the very inputs the GPU reads:
//  * exact: every product and sum in double; softmax in double. The "truth".
//  * same precision: what a careful fp32 GPU kernel computes — scores accumulated in fp32,
//    P rounded to the input dtype before P·V, fp32 accumulation, O rounded to the dtype.
// Its distance from the exact reference measures the error the dtype itself forces on any
// implementation; a stage may be at most twice as far off, plus a floor (the pass rule of
// FlashAttention's tests). The backward (reference_attention_backward) has the same two
// references for dQ, dK and dV and the same rule, as FlashAttention's tests bound the gradients.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashsteps/host_tensors.hpp"
#include "flashsteps/problem.hpp"

namespace flashsteps {

enum class RefPrecision { exact, same_precision };

/// O and LSE of a chosen subset of heads (flat index b*H + h), to keep large shapes checkable.
struct Reference {
  std::vector<std::int64_t> heads;
  std::vector<double> o;    // [heads.size(), Sq, D]
  std::vector<double> lse;  // [heads.size(), Sq]; -inf for rows that see no key
};

/// Up to `max_heads` flat head indices spread evenly over B*H, always the first and the last.
std::vector<std::int64_t> sample_heads(const Problem& p, std::int64_t max_heads);

/// Runs the reference over `heads` (in parallel over heads on all host cores).
Reference reference_attention(const HostInputs& in, const std::vector<std::int64_t>& heads,
                              RefPrecision precision);

struct Tolerance {
  double o_floor;        ///< added to twice the same-precision error: the output dtype's rounding
  double lse_rel_floor;  ///< LSE floor, relative to max(1, |LSE|)
};
/// unit_roundoff(dtype) * max(1, max|O_ref|) for O; 1e-5 relative for LSE (fp32 arithmetic).
Tolerance default_tolerance(const Problem& p, const Reference& exact);

struct CheckResult {
  bool pass = false;
  double o_max_err = 0, o_mean_err = 0, o_bound = 0, o_same_max_err = 0;
  double lse_max_err = 0, lse_bound = 0;
  std::int64_t nan_count = 0;     ///< NaN/Inf in O (unwritten poison shows up here)
  std::int64_t lse_mismatch = 0;  ///< rows whose -inf-ness differs from the reference
  std::int64_t worst_row = -1;    ///< flat row (head*Sq + i) of the largest O error
  std::string summary;            ///< one line: errors, bounds, PASS/FAIL, shape
  /// Empty on PASS; on FAIL, where the error lives: the heads, the 64-row blocks of queries and
  /// 16-column groups of D that hold wrong elements, whether LSE is wrong or only O, NaN and inf
  /// counts, and the first wrong element beside its reference. Also appended to `summary`.
  std::string triage;
};

/// The pass rule: max|O - O_ref| <= 2 * max|O_same - O_ref| + floor, LSE likewise, no NaN.
/// `o` and `lse` are the full GPU outputs ([B,H,Sq,D] dtype bits and [B,H,Sq] fp32).
CheckResult check_attention(const Problem& p, const Reference& exact, const Reference& same,
                            const std::vector<std::uint16_t>& o, const std::vector<float>& lse,
                            const Tolerance& tol);

// ---- The backward pass ----------------------------------------------------------------------

/// What a backward stage reads: Q, K, V; the forward's O and LSE, from the exact reference
/// forward (never from the stage under test), stored as a stage stores them (O rounded to the
/// dtype, LSE to fp32; -inf for rows that see no key); and dO, uniform in [-1, 1) rounded to the
/// dtype. Same seed, same tensors.
struct BackwardInputs {
  HostInputs fwd;                   // Q, K, V and the problem
  std::vector<std::uint16_t> o;     // [B,H,Sq,D]
  std::vector<float> lse;           // [B,H,Sq]
  std::vector<std::uint16_t> dout;  // [B,H,Sq,D]
};
BackwardInputs make_backward_inputs(const Problem& p, std::uint64_t seed);

/// dQ, dK and dV of a chosen subset of heads (flat index b*H + h).
struct BackwardReference {
  std::vector<std::int64_t> heads;
  std::vector<double> dq;  // [heads.size(), Sq, D]
  std::vector<double> dk;  // [heads.size(), Skv, D]
  std::vector<double> dv;  // [heads.size(), Skv, D]
};

/// exact: the gradient of exact attention in double, from Q, K, V and dO alone (P recomputed,
/// D_i = rowsum(P ∘ dP) = rowsum(dO ∘ O_exact)). same_precision: what a careful fp32 kernel
/// computes from the inputs it is given: P = exp(S - LSE) from fp32 scores and the given LSE,
/// D_i = rowsum(dO ∘ O) in fp32 from the given O, P and dS rounded to the dtype before the
/// products that take them as an operand (dV = Pᵀ dO; dQ = dS K, dK = dSᵀ Q), fp32
/// accumulation, dQ, dK, dV rounded to the dtype. Rows that see no key contribute nothing and
/// get dQ = 0.
BackwardReference reference_attention_backward(const BackwardInputs& in,
                                               const std::vector<std::int64_t>& heads,
                                               RefPrecision precision);

/// One gradient's part of the check.
struct GradientCheck {
  double max_err = 0, same_max_err = 0, floor = 0, bound = 0;
  std::int64_t nonfinite = 0;  ///< NaN/Inf (unwritten poison shows up here)
  std::int64_t wrong = 0;      ///< elements past the bound or not finite
  bool pass = false;
};

struct BackwardCheckResult {
  bool pass = false;
  GradientCheck dq, dk, dv;
  std::string summary;  ///< one line: each gradient's error, bound and verdict, PASS/FAIL, shape
  std::string triage;   ///< empty on PASS; on FAIL, the first wrong element of each gradient
};

/// The pass rule for gradients, per tensor X in {dQ, dK, dV}:
///   max|X - X_exact| <= 2 * max|X_same - X_exact| + unit_roundoff(dtype) * max|X_exact|,
/// and no NaN or infinity. `dq`, `dk`, `dv` are the full GPU outputs (dtype bits).
BackwardCheckResult check_attention_backward(const Problem& p, const BackwardReference& exact,
                                             const BackwardReference& same,
                                             const std::vector<std::uint16_t>& dq,
                                             const std::vector<std::uint16_t>& dk,
                                             const std::vector<std::uint16_t>& dv);

}  // namespace flashsteps
