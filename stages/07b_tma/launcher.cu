// stages/07b_tma/launcher.cu — the TMA stage as a flashsteps::Stage. What every fused stage shares
// (limits, shared-memory opt-in, dispatch, launch) is flashsteps/fused_stage.cuh; this stage
// decides one tile per head dim (kernels.cuh), runs on compute capability 9.0 only, and encodes
// the tensor maps its kernel reads Q, K and V through (flashsteps/cuda/tensor_map.cuh).
#include "flashsteps/cuda/tensor_map.cuh"
#include "flashsteps/fused_stage.cuh"
#include "kernels.cuh"

namespace flashsteps {
namespace {

class TmaStage final : public FusedStage<TmaStage, tma::Kernel> {
 public:
  std::string_view name() const override { return FLASHSTEPS_STAGE_NAME; }
  std::string_view title() const override { return FLASHSTEPS_STAGE_TITLE; }
  // wgmma exists only in the sm_90a target, whose machine code runs on compute capability 9.0
  // alone: FusedStage refuses every other device (kOnlyComputeCapability).
  int min_compute_capability() const override { return 90; }
  std::string gpu_requirement() const override { return "sm_90a (H100/H200)"; }
  static constexpr int kOnlyComputeCapability = 90;
  // P is repacked from wgmma's D fragment into mma.sync's A layout: `--emulate --layout` prints
  // both.
  std::vector<FragmentLayout> fragment_layouts() const override {
    return {FragmentLayout::mma_m16n8k16, FragmentLayout::wgmma_m64nNk16};
  }

  using HeadDims = tma::SupportedHeadDims;
  static constexpr const char* kKernelName = "fused_attention_tma";
  static constexpr const char* kSmemHolds = "Q and a ring of 3 K/V stages";

  /// One tile per head dim, the same on every device.
  template <int kD>
  using TileFor = tma::TileFor<kD>;

  /// The kernel reads Q, K and V through tensor maps (host-side encoding only: no allocation, no
  /// synchronization) and writes O through its pointer. (The grid limit supports() checks,
  /// B*H*Tr < 2^31, also keeps B*H a valid int32 TMA coordinate.)
  template <class T, class Tile, bool kCausal>
  static cudaError_t launch_variant(const Shape& sh, const AttentionArgs& a, cudaStream_t stream) {
    const CUtensorMap tm_q = make_tensor_map<T>(a.q, sh.bh, sh.sq, Tile::D, Tile::Br);
    const CUtensorMap tm_k = make_tensor_map<T>(a.k, sh.bh, sh.skv, Tile::D, Tile::Bc);
    const CUtensorMap tm_v = make_tensor_map<T>(a.v, sh.bh, sh.skv, Tile::D, Tile::Bc);
    return launch_kernel(tma::Kernel::template of<T, Tile, kCausal>(), grid(sh), Tile::kThreads,
                         Tile::kSmemBytes, stream, tm_q, tm_k, tm_v, static_cast<T*>(a.o), a.lse,
                         sh);
  }
};

}  // namespace

std::unique_ptr<Stage> make_stage() {
  return std::make_unique<TmaStage>();
}

}  // namespace flashsteps
