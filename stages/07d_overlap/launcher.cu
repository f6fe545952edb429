// stages/07d_overlap/launcher.cu — stage 07d as a flashsteps::Stage. What every fused stage shares
// (limits, shared-memory opt-in, dispatch, launch) is flashsteps/fused_stage.cuh, and what it
// shares with stage 07c (compute capability 9.0 only, the four TMA tensor maps, the check of the
// setmaxnreg budgets) flashsteps/hopper_tma_stage.cuh; this stage decides one tile per head dim
// (kernels.cuh).
#include "flashsteps/hopper_tma_stage.cuh"
#include "kernels.cuh"

namespace flashsteps {
namespace {

class OverlapStage final : public HopperTmaStage<OverlapStage, hopper::Kernel> {
 public:
  std::string_view name() const override { return FLASHSTEPS_STAGE_NAME; }
  std::string_view title() const override { return FLASHSTEPS_STAGE_TITLE; }

  using HeadDims = hopper::SupportedHeadDims;
  static constexpr const char* kKernelName = "fused_attention_hopper";

  /// One tile per head dim, the same on every device.
  template <int kD>
  using TileFor = hopper::TileFor<kD>;
};

}  // namespace

std::unique_ptr<Stage> make_stage() {
  return std::make_unique<OverlapStage>();
}

}  // namespace flashsteps
