// stages/10c_gqa_pack/launcher.cu — the GQA-packing stage as a flashsteps::Stage. What every fused
// stage shares (limits, shared-memory opt-in, dispatch, launch) is flashsteps/fused_stage.cuh; this
// stage's decisions are 10b's, on the packed grid: B * H_kv block rows of ceil(group * Sq / Br)
// packed query tiles (complete_shape()), and what a split of the keys adds, once per launch:
//   splits     the rule of split_rule.hpp on this device's SMs; FLASHSTEPS_KV_SPLITS=N forces N
//              splits instead, 1 to 128, more than the key tiles too (the tests' sweep; read once,
//              in setup())
//   workspace  with more than one split, the partial O (fp32) and LSE of every split
//   launches   the attention kernel on a grid of (B*H_kv*Tr, splits), then, with more than one
//   split,
//              the combine kernel
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "flashsteps/fused_stage.cuh"
#include "kernels.cuh"
#include "split_rule.hpp"

namespace flashsteps {
namespace {

class GqaPackStage final : public FusedStage<GqaPackStage, gqa_pack::Kernel> {
  using Base = FusedStage<GqaPackStage, gqa_pack::Kernel>;

 public:
  std::string_view name() const override { return FLASHSTEPS_STAGE_NAME; }
  std::string_view title() const override { return FLASHSTEPS_STAGE_TITLE; }
  // mma.sync.m16n8k16 with bf16 operands, ldmatrix and cp.async all need sm_80.
  int min_compute_capability() const override { return 80; }
  // Its kernels address mma.sync's fragments lane by lane: `--emulate --layout` prints them.
  std::vector<FragmentLayout> fragment_layouts() const override {
    return {FragmentLayout::mma_m16n8k16};
  }
  // K/V by groups and one length per sequence, as 10b; a paged cache is 10d's.
  KvCacheSupport kv_cache() const override { return {.grouped = true, .cache_seqlens = true}; }

  using HeadDims = gqa_pack::SupportedHeadDims;
  static constexpr const char* kKernelName = "fused_attention_gqa_pack";
  static constexpr const char* kSmemHolds = "Q and a ring of 2 K/V stages";

  /// One tile per head dim, the same on every device.
  template <int kD>
  using TileFor = gqa_pack::TileFor<kD>;

  /// 10b's setup: 10a's, then the device's SM count and a forced split count (the environment is
  /// read here, once).
  void setup(const DeviceInfo& dev) override {
    Base::setup(dev);
    sm_count_ = dev.sm_count;
    forced_splits_ = 0;
    if (const char* v = std::getenv("FLASHSTEPS_KV_SPLITS"); v && *v) {
      char* end = nullptr;
      const long n = std::strtol(v, &end, 10);
      if (*end != '\0' || n < 1 || n > split_kv::kMaxSplits)
        throw std::invalid_argument(std::string(name()) +
                                    ": FLASHSTEPS_KV_SPLITS must be a split count from 1 to " +
                                    std::to_string(split_kv::kMaxSplits) + ", not '" + v + "'");
      forced_splits_ = static_cast<int>(n);
    }
  }

  //! [choose_splits]
  /// The splits of a launch: FLASHSTEPS_KV_SPLITS, or the rule with this device's slots (SMs x
  /// the kernel's 2 blocks per SM), the packed grid of B*H_kv*ceil(group*Sq/Br) blocks and the
  /// cache's key tiles.
  static int splits_of(const Problem& p) {
    if (forced_splits_ > 0) return forced_splits_;
    const std::int64_t group = p.heads / p.kv_heads();
    return with_tile(p.head_dim, DeviceInfo{}, [&]<class Tile>() {
      return split_kv::num_splits_rule(p.batch * p.kv_heads() * ceil_div(group * p.seq_q, Tile::Br),
                                       std::int64_t{sm_count_} * Tile::kMinBlocksPerSm,
                                       ceil_div(p.seq_kv, Tile::Bc));
    });
  }
  //! [choose_splits]

  /// The partial outputs of every split, fp32: O [splits, B*H*Sq, D] then LSE [splits, B*H*Sq];
  /// none with one split. The count needs the device's SMs, which setup() records: before it (the
  /// runner's memory check) a device of 0 SMs, for which the rule takes 1 split.
  std::int64_t workspace_bytes(const Problem& p) const override {
    if (!HeadDims::contains(p.head_dim)) return 0;
    const int splits = splits_of(p);
    if (splits == 1) return 0;
    return std::int64_t{splits} * p.lse_elems() * (p.head_dim + 1) *
           static_cast<std::int64_t>(sizeof(float));
  }

  /// H and the group; new: the packed query tiles of a block row. Then the split count and the
  /// key tiles of each split.
  static void complete_shape(Shape& sh, const Problem& p) {
    sh.heads = static_cast<int>(p.heads);
    sh.group = static_cast<int>(p.heads / p.kv_heads());
    with_tile(p.head_dim, DeviceInfo{}, [&]<class Tile>() {
      sh.tr = static_cast<int>(ceil_div(std::int64_t{sh.group} * p.seq_q, Tile::Br));
    });
    sh.splits = splits_of(p);
    with_tile(p.head_dim, DeviceInfo{}, [&]<class Tile>() {
      sh.split_tiles = split_kv::tiles_per_split(ceil_div(p.seq_kv, Tile::Bc), sh.splits);
    });
  }

  //! [launch]
  /// The attention kernel on (B*H_kv*Tr, splits) blocks; with several splits it writes the partials
  /// into the workspace and the combine kernel writes O and LSE from them.
  template <class T, class Tile, bool kCausal>
  static cudaError_t launch_variant(const Shape& sh, const AttentionArgs& a, cudaStream_t stream) {
    const std::int64_t rows = sh.bh * sh.sq;
    float* o_part = nullptr;
    float* lse_part = nullptr;
    if (sh.splits > 1) {
      if (a.workspace == nullptr)
        throw std::invalid_argument(std::string(FLASHSTEPS_STAGE_NAME) + ": " +
                                    std::to_string(sh.splits) +
                                    " splits need the stage's workspace (workspace_bytes())");
      o_part = static_cast<float*>(a.workspace);
      lse_part = o_part + sh.splits * rows * Tile::D;
    }
    const dim3 grid(static_cast<unsigned>(sh.bh / sh.group * sh.tr),
                    static_cast<unsigned>(sh.splits));
    cudaError_t err = launch_kernel(
        gqa_pack::Kernel::template of<T, Tile, kCausal>(), grid, Tile::kThreads, Tile::kSmemBytes,
        stream, static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v),
        static_cast<T*>(a.o), a.lse, a.cache_seqlens, o_part, lse_part, sh);
    if (err != cudaSuccess || sh.splits == 1) return err;
    const auto blocks = static_cast<unsigned>(ceil_div(rows, gqa_pack::kCombineRows));
    return launch_kernel(gqa_pack::Combine::template of<T, Tile::D>(), dim3(blocks),
                         32 * gqa_pack::kCombineRows, 0, stream, static_cast<const float*>(o_part),
                         static_cast<const float*>(lse_part), static_cast<T*>(a.o), a.lse, rows,
                         sh.splits);
  }
  //! [launch]

  /// 10a's kernel, and the combine when the problem takes more than one split.
  std::vector<KernelLaunchInfo> kernels(const Problem& p) const override {
    std::vector<KernelLaunchInfo> out = Base::kernels(p);
    if (out.empty() || splits_of(p) == 1) return out;
    HeadDims::dispatch(p.head_dim, [&]<int kD>() {
      dispatch_dtype(p.dtype, [&]<class T>() {
        out.push_back({"combine_splits<d" + std::to_string(kD) + "," + dtype_name<T>() + ">",
                       reinterpret_cast<const void*>(gqa_pack::Combine::template of<T, kD>()),
                       32 * gqa_pack::kCombineRows, 0});
      });
    });
    return out;
  }

 private:
  static inline int sm_count_ = 0;       // the device's, from setup()
  static inline int forced_splits_ = 0;  // FLASHSTEPS_KV_SPLITS, 0: the rule
};

}  // namespace

std::unique_ptr<Stage> make_stage() {
  return std::make_unique<GqaPackStage>();
}

}  // namespace flashsteps
