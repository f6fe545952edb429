// stages/07a_wgmma/launcher.cu — the wgmma stage as a flashsteps::Stage. What every fused stage
// shares (limits, shared-memory opt-in, dispatch, launch) is flashsteps/fused_stage.cuh; this stage
// decides one tile per head dim (kernels.cuh) and runs on compute capability 9.0 only.
#include "flashsteps/fused_stage.cuh"
#include "kernels.cuh"

namespace flashsteps {
namespace {

class WgmmaStage final : public FusedStage<WgmmaStage, wgmma::Kernel> {
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

  using HeadDims = wgmma::SupportedHeadDims;
  static constexpr const char* kKernelName = "fused_attention_wgmma";
  static constexpr const char* kSmemHolds = "Q and a ring of 3 K/V stages";

  /// One tile per head dim, the same on every device.
  template <int kD>
  using TileFor = wgmma::TileFor<kD>;
};

}  // namespace

std::unique_ptr<Stage> make_stage() {
  return std::make_unique<WgmmaStage>();
}

}  // namespace flashsteps
