// flashsteps/hopper_tma_stage.cuh — what the launchers of the Hopper stages with a TMA producer
// warpgroup and setmaxnreg budgets (07c_roles, 07d_overlap) decide alike, on top of what every
// fused stage shares (fused_stage.cuh): compute capability 9.0 only, the kernel's four TMA tensor
// maps (cuda/tensor_map.cuh), and a check in setup() that the compiled kernel holds the registers
// its setmaxnreg budgets move. Such a stage's launcher then says only its name, its kernel and its
// tiles. Host code only.
#pragma once

#include <cuda.h>  // CUtensorMap
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "flashsteps/cuda/tensor_map.cuh"
#include "flashsteps/fused_stage.cuh"

namespace flashsteps {

/// A fused stage `S` whose kernel takes (tm_q, tm_k, tm_v, tm_o, lse, shape) and whose tiles
/// declare Br, Bc, D, kThreads, kConsumerRows, kSmemBytes and the setmaxnreg budgets
/// (kProducerRegs, kConsumerRegs, kWarpgroupThreads, kConsumerThreads). S provides what FusedStage
/// asks for except kSmemHolds.
template <class S, class Kernel>
class HopperTmaStage : public FusedStage<S, Kernel> {
  using Base = FusedStage<S, Kernel>;

 public:
  using typename Base::Shape;

  // wgmma and setmaxnreg exist only in the sm_90a target; TMA and mbarrier expect_tx need sm_90.
  int min_compute_capability() const override { return 90; }
  std::string gpu_requirement() const override { return "sm_90a (H100/H200)"; }
  // "At least 9.0" is not enough: sm_90a machine code (wgmma, setmaxnreg) runs on compute
  // capability 9.0 alone, and FusedStage refuses every other device (supports(), setup()).
  static constexpr int kOnlyComputeCapability = 90;
  // P is repacked from wgmma's D fragment into mma.sync's A layout: `--emulate --layout` prints
  // both.
  std::vector<FragmentLayout> fragment_layouts() const override {
    return {FragmentLayout::mma_m16n8k16, FragmentLayout::wgmma_m64nNk16};
  }
  static constexpr const char* kSmemHolds = "Q and a ring of K/V stages";

  /// The kernel reads and writes through tensor maps: host-side encoding only (no allocation, no
  /// synchronization), four 128-byte kernel parameters. (The grid limit supports() checks,
  /// B*H*Tr < 2^31, also keeps B*H a valid int32 TMA coordinate.)
  template <class T, class Tile, bool kCausal>
  static cudaError_t launch_variant(const Shape& sh, const AttentionArgs& a, cudaStream_t stream) {
    const CUtensorMap tm_q = make_tensor_map<T>(a.q, sh.bh, sh.sq, Tile::D, Tile::Br);
    const CUtensorMap tm_k = make_tensor_map<T>(a.k, sh.bh, sh.skv, Tile::D, Tile::Bc);
    const CUtensorMap tm_v = make_tensor_map<T>(a.v, sh.bh, sh.skv, Tile::D, Tile::Bc);
    const CUtensorMap tm_o = make_tensor_map<T>(a.o, sh.bh, sh.sq, Tile::D, Tile::kConsumerRows);
    return launch_kernel(Kernel::template of<T, Tile, kCausal>(), Base::grid(sh), Tile::kThreads,
                         Tile::kSmemBytes, stream, tm_q, tm_k, tm_v, tm_o, a.lse, sh);
  }

  /// setmaxnreg only moves registers the block already holds: the consumers' .inc waits until the
  /// producer's .dec has returned enough, so a build that allocated fewer registers per thread
  /// than the budgets add up to would hang at the first launch. Refuse it here instead.
  /// (Not under the CPU emulator: it has no register file and reports 0 registers; its
  /// setmaxnreg checks the counts it is given against each other instead.)
  template <class T, class Tile, bool kCausal>
  static void check_kernel() {
#if !defined(FLASHSTEPS_EMULATE)
    cudaFuncAttributes attr{};
    FS_CUDA_CHECK(cudaFuncGetAttributes(
        &attr, reinterpret_cast<const void*>(Kernel::template of<T, Tile, kCausal>())));
    constexpr int kBudget = Tile::kProducerRegs * Tile::kWarpgroupThreads +
                            Tile::kConsumerRegs * Tile::kConsumerThreads;
    if (attr.numRegs * Tile::kThreads < kBudget) {
      throw CudaError(std::string(S::kKernelName) + ": the kernel was compiled with " +
                      std::to_string(attr.numRegs) +
                      " registers per thread, fewer than the setmaxnreg budgets need (" +
                      std::to_string(kBudget) + " per block)");
    }
#endif
  }
};

}  // namespace flashsteps
