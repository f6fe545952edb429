// stages/05_warp_specialized/launcher.cu — the warp-specialized stage as a flashsteps::Stage. What
// every fused stage shares (limits, shared-memory opt-in, dispatch, launch) is
// flashsteps/fused_stage.cuh; this stage's decision is the tile per head dim and device.
#include <cstdint>
#include <string>

#include "flashsteps/fused_stage.cuh"
#include "kernels.cuh"

namespace flashsteps {
namespace {

using warp_specialized::TileD128;
using warp_specialized::TileD128Narrow;
using warp_specialized::TileD64;

//! [pick_tile]
/// D = 128 runs stage 03's Bc = 64 when the device's opt-in limit holds its ring (sm_80, sm_90),
/// else Bc = 32 (sm_86, sm_89: 99 KiB). kernels.cuh has the table.
bool wide_d128_fits(const DeviceInfo& dev) {
  return static_cast<std::int64_t>(TileD128::kSmemBytes) <= dev.smem_optin_per_block;
}
//! [pick_tile]

class WarpSpecializedStage final
    : public FusedStage<WarpSpecializedStage, warp_specialized::Kernel> {
 public:
  std::string_view name() const override { return FLASHSTEPS_STAGE_NAME; }
  std::string_view title() const override { return FLASHSTEPS_STAGE_TITLE; }

  using HeadDims = warp_specialized::SupportedHeadDims;
  static constexpr const char* kKernelName = "fused_attention_ws";
  static constexpr const char* kSmemHolds = "a ring of 2 K/V stages and its barriers";

  /// D = 64 has one tile; D = 128 the wide one where the device holds it (pick_tile above).
  template <class F>
  static decltype(auto) with_tile(std::int64_t head_dim, const DeviceInfo& dev, F&& f) {
    if (head_dim == 64) return f.template operator()<TileD64>();
    if (wide_d128_fits(dev)) return f.template operator()<TileD128>();
    return f.template operator()<TileD128Narrow>();
  }
  template <class Tile>
  static std::string tile_tag() {
    return FusedStage::tile_tag<Tile>() + "," + std::to_string(Tile::kProducers) + "producer";
  }
};

}  // namespace

std::unique_ptr<Stage> make_stage() {
  return std::make_unique<WarpSpecializedStage>();
}

}  // namespace flashsteps
