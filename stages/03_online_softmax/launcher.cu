// stages/03_online_softmax/launcher.cu — the fused stage as a flashsteps::Stage. What every fused
// stage shares (limits, shared-memory opt-in, dispatch, launch) is flashsteps/fused_stage.cuh;
// this stage's decision is one tile per head dim.
#include <cstdint>
#include <string>

#include "flashsteps/fused_stage.cuh"
#include "kernels.cuh"

namespace flashsteps {
namespace {

class OnlineSoftmaxStage final : public FusedStage<OnlineSoftmaxStage, online_softmax::Kernel> {
 public:
  std::string_view name() const override { return FLASHSTEPS_STAGE_NAME; }
  std::string_view title() const override { return FLASHSTEPS_STAGE_TITLE; }

  using HeadDims = online_softmax::SupportedHeadDims;
  static constexpr const char* kKernelName = "fused_attention";
  static constexpr const char* kSmemHolds = "";

  /// One tile per head dim, the same on every device.
  template <int kD>
  using TileFor = online_softmax::OnlineSoftmaxTraits<kD>;
  template <class Tile>
  static std::string tile_tag() {
    return std::string("d") + std::to_string(Tile::D);
  }
};

}  // namespace

std::unique_ptr<Stage> make_stage() {
  return std::make_unique<OnlineSoftmaxStage>();
}

}  // namespace flashsteps
