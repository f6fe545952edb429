// stages/08c_d64_tile/launcher.cu — stage 08c as a flashsteps::Stage: 08b's launcher, whose tiles
// (kernels.cuh) now differ per head dim in their consumer warpgroups, so in Br, the threads of a
// block and Tr (FusedStage computes Tr from the tile it dispatches). What every fused stage
// shares (limits, shared-memory opt-in, dispatch) is flashsteps/fused_stage.cuh, and what it
// shares with stage 08a (compute capability 9.0 only, the four TMA tensor maps, the check of the
// setmaxnreg budgets) flashsteps/hopper_tma_stage.cuh. This stage decides, besides one tile per
// head dim (kernels.cuh), the persistent grid and the schedule (scheduler.cuh), once per launch:
//   grid      one block per SM (at most one per work item); FLASHSTEPS_PERSISTENT_BLOCKS=N sets N
//             blocks instead, any N >= 1, more than the work items too (the tests' exactly-once
//             sweep; read once, in setup())
//   schedule  causal: dynamic (an atomic counter in the 4-byte workspace, zeroed before each
//             launch); non-causal: static (every item costs the same); FLASHSTEPS_TILE_SCHEDULER=
//             static | dynamic sets one for both (the bench times either)
#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "flashsteps/hopper_tma_stage.cuh"
#include "kernels.cuh"
#include "scheduler.cuh"

namespace flashsteps {
namespace {

/// The schedule a launch uses: the default (dynamic when causal), or one FLASHSTEPS_TILE_SCHEDULER
/// forces.
enum class ScheduleChoice { kDefault, kStatic, kDynamic };

class PersistentStage final : public HopperTmaStage<PersistentStage, hopper::Kernel> {
  using Base = HopperTmaStage<PersistentStage, hopper::Kernel>;

 public:
  std::string_view name() const override { return FLASHSTEPS_STAGE_NAME; }
  std::string_view title() const override { return FLASHSTEPS_STAGE_TITLE; }

  using HeadDims = hopper::SupportedHeadDims;
  static constexpr const char* kKernelName = "fused_attention_persistent";

  /// One tile per head dim, the same on every device.
  template <int kD>
  using TileFor = hopper::TileFor<kD>;

  /// The dynamic schedule's counter (allocated for both: the choice is made at launch).
  std::int64_t workspace_bytes(const Problem&) const override { return sizeof(int); }

  /// 08a's setup, then the grid size and the schedule (the environment is read here, once).
  void setup(const DeviceInfo& dev) override {
    Base::setup(dev);
    sm_count_ = dev.sm_count;
    blocks_override_ = 0;
    if (const char* v = std::getenv("FLASHSTEPS_PERSISTENT_BLOCKS"); v && *v) {
      char* end = nullptr;
      const long n = std::strtol(v, &end, 10);
      if (*end != '\0' || n < 1 || n > kMaxFusedBlocks)
        throw std::invalid_argument(std::string(name()) +
                                    ": FLASHSTEPS_PERSISTENT_BLOCKS must be a number of blocks "
                                    "from 1 to 2^31 - 1, not '" +
                                    v + "'");
      blocks_override_ = static_cast<int>(n);
    }
    choice_ = ScheduleChoice::kDefault;
    if (const char* v = std::getenv("FLASHSTEPS_TILE_SCHEDULER"); v && *v) {
      const std::string s(v);
      if (s == "static") {
        choice_ = ScheduleChoice::kStatic;
      } else if (s == "dynamic") {
        choice_ = ScheduleChoice::kDynamic;
      } else {
        throw std::invalid_argument(std::string(name()) +
                                    ": FLASHSTEPS_TILE_SCHEDULER must be 'static' or 'dynamic', "
                                    "not '" +
                                    s + "'");
      }
    }
  }

  //! [launch]
  /// The persistent launch: G blocks, and the dynamic schedule's counter (zeroed in the stream
  /// first) or nullptr for the static one.
  template <class T, class Tile, bool kCausal>
  static cudaError_t launch_variant(const Shape& sh, const AttentionArgs& a, cudaStream_t stream) {
    const CUtensorMap tm_q = make_tensor_map<T>(a.q, sh.bh, sh.sq, Tile::D, Tile::Br);
    const CUtensorMap tm_k = make_tensor_map<T>(a.k, sh.bh, sh.skv, Tile::D, Tile::Bc);
    const CUtensorMap tm_v = make_tensor_map<T>(a.v, sh.bh, sh.skv, Tile::D, Tile::Bc);
    const CUtensorMap tm_o = make_tensor_map<T>(a.o, sh.bh, sh.sq, Tile::D, Tile::kConsumerRows);
    const std::int64_t items = sh.bh * sh.tr;  // T work items (FusedStage::supports(): < 2^31)
    const int blocks =
        blocks_override_ > 0
            ? blocks_override_
            : static_cast<int>(std::min<std::int64_t>(std::max(sm_count_, 1), items));
    const hopper::Schedule schedule = choice_ == ScheduleChoice::kStatic ? hopper::Schedule::kStatic
                                      : choice_ == ScheduleChoice::kDynamic
                                          ? hopper::Schedule::kDynamic
                                      : kCausal ? hopper::Schedule::kDynamic
                                                : hopper::Schedule::kStatic;
    int* counter = nullptr;
    if (schedule == hopper::Schedule::kDynamic) {
      if (a.workspace == nullptr)
        throw std::invalid_argument(std::string(FLASHSTEPS_STAGE_NAME) +
                                    ": the dynamic schedule needs the stage's " +
                                    std::to_string(sizeof(int)) + "-byte workspace");
      counter = static_cast<int*>(a.workspace);
      if (cudaError_t err = cudaMemsetAsync(counter, 0, sizeof(int), stream); err != cudaSuccess)
        return err;
    }
    return launch_kernel(hopper::Kernel::template of<T, Tile, kCausal>(),
                         dim3(static_cast<unsigned>(blocks)), Tile::kThreads, Tile::kSmemBytes,
                         stream, tm_q, tm_k, tm_v, tm_o, a.lse, counter, sh);
  }
  //! [launch]

 private:
  static inline int sm_count_ = 0;         // the device's, from setup()
  static inline int blocks_override_ = 0;  // FLASHSTEPS_PERSISTENT_BLOCKS, 0: one per SM
  static inline ScheduleChoice choice_ = ScheduleChoice::kDefault;
};

}  // namespace

std::unique_ptr<Stage> make_stage() {
  return std::make_unique<PersistentStage>();
}

}  // namespace flashsteps
