// stages/06b_registers/launcher.cu — the register-resident stage as a flashsteps::Stage. What every
// fused stage shares (limits, shared-memory opt-in, dispatch, launch) is
// flashsteps/fused_stage.cuh; this stage's decision is one tile per head dim (kernels.cuh).
#include <cstdint>

#include "flashsteps/fused_stage.cuh"
#include "kernels.cuh"

namespace flashsteps {
namespace {

class RegistersStage final : public FusedStage<RegistersStage, registers_padded::Kernel> {
 public:
  std::string_view name() const override { return FLASHSTEPS_STAGE_NAME; }
  std::string_view title() const override { return FLASHSTEPS_STAGE_TITLE; }
  // mma.sync.m16n8k16 with bf16 operands, ldmatrix and cp.async all need sm_80.
  int min_compute_capability() const override { return 80; }
  // Its kernels address mma.sync's fragments lane by lane: `--emulate --layout` prints them.
  std::vector<FragmentLayout> fragment_layouts() const override {
    return {FragmentLayout::mma_m16n8k16};
  }

  using HeadDims = registers_padded::SupportedHeadDims;
  static constexpr const char* kKernelName = "fused_attention_registers_padded";
  static constexpr const char* kSmemHolds = "Q and a ring of 2 K/V stages";

  /// One tile per head dim, the same on every device.
  template <int kD>
  using TileFor = registers_padded::TileFor<kD>;
};

}  // namespace

std::unique_ptr<Stage> make_stage() {
  return std::make_unique<RegistersStage>();
}

}  // namespace flashsteps
