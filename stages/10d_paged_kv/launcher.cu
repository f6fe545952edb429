// stages/10d_paged_kv/launcher.cu — the paged-KV stage as a flashsteps::Stage. What every fused
// stage shares (limits, shared-memory opt-in, dispatch, launch) is flashsteps/fused_stage.cuh; this
// stage's decisions are 10b's (tiles, H and the group, the splits and their combine) and what a
// paged cache adds: pages of a multiple of 16 keys (kv_cache()), the page size and the table's row
// length in the Shape, the block table passed to the kernel. 10b's, once per launch:
//   splits     the rule of split_rule.hpp on this device's SMs; FLASHSTEPS_KV_SPLITS=N forces N
//              splits instead, 1 to 128, more than the key tiles too (the tests' sweep; read once,
//              in setup())
//   workspace  with more than one split, the partial O (fp32) and LSE of every split
//   launches   the attention kernel on a grid of (B*H*Tr, splits), then, with more than one split,
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

class PagedKvStage final : public FusedStage<PagedKvStage, paged_kv::Kernel> {
  using Base = FusedStage<PagedKvStage, paged_kv::Kernel>;

 public:
  std::string_view name() const override { return FLASHSTEPS_STAGE_NAME; }
  std::string_view title() const override { return FLASHSTEPS_STAGE_TITLE; }
  // mma.sync.m16n8k16 with bf16 operands, ldmatrix and cp.async all need sm_80.
  int min_compute_capability() const override { return 80; }
  // Its kernels address mma.sync's fragments lane by lane: `--emulate --layout` prints them.
  std::vector<FragmentLayout> fragment_layouts() const override {
    return {FragmentLayout::mma_m16n8k16};
  }
  //! [kv_cache]
  // K/V by groups and one length per sequence, as 10b, and new: K/V in pages of a multiple of 16
  // keys (kernels.cuh, kPageMultiple; a page size that is not is refused by check_runnable()).
  KvCacheSupport kv_cache() const override {
    return {.grouped = true,
            .cache_seqlens = true,
            .paged = true,
            .page_multiple = paged_kv::kPageMultiple};
  }
  //! [kv_cache]

  using HeadDims = paged_kv::SupportedHeadDims;
  static constexpr const char* kKernelName = "fused_attention_paged_kv";
  static constexpr const char* kSmemHolds = "Q and a ring of 2 K/V stages";

  /// One tile per head dim, the same on every device.
  template <int kD>
  using TileFor = paged_kv::TileFor<kD>;

  /// 10a's setup, then the device's SM count and a forced split count (the environment is read
  /// here, once).
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
  /// the kernel's 2 blocks per SM), the grid of B*H*Tr blocks and the cache's key tiles.
  static int splits_of(const Problem& p) {
    if (forced_splits_ > 0) return forced_splits_;
    return with_tile(p.head_dim, DeviceInfo{}, [&]<class Tile>() {
      return split_kv::num_splits_rule(p.batch_heads() * ceil_div(p.seq_q, Tile::Br),
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

  /// 10b's H, group, split count and key tiles of each split; new: the page size and the table's
  /// row length (a contiguous cache: one page of Skv keys per sequence).
  static void complete_shape(Shape& sh, const Problem& p) {
    sh.page_size = static_cast<int>(p.paged() ? p.page_size : p.seq_kv);
    sh.pages_per_seq = static_cast<int>(p.paged() ? p.pages_per_seq() : 1);
    sh.heads = static_cast<int>(p.heads);
    sh.group = static_cast<int>(p.heads / p.kv_heads());
    sh.splits = splits_of(p);
    with_tile(p.head_dim, DeviceInfo{}, [&]<class Tile>() {
      sh.split_tiles = split_kv::tiles_per_split(ceil_div(p.seq_kv, Tile::Bc), sh.splits);
    });
  }

  //! [launch]
  /// The attention kernel on (B*H*Tr, splits) blocks; with several splits it writes the partials
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
    const dim3 grid(static_cast<unsigned>(sh.bh * sh.tr), static_cast<unsigned>(sh.splits));
    cudaError_t err = launch_kernel(
        paged_kv::Kernel::template of<T, Tile, kCausal>(), grid, Tile::kThreads, Tile::kSmemBytes,
        stream, static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v),
        static_cast<T*>(a.o), a.lse, a.cache_seqlens, a.block_table, o_part, lse_part, sh);
    if (err != cudaSuccess || sh.splits == 1) return err;
    const auto blocks = static_cast<unsigned>(ceil_div(rows, paged_kv::kCombineRows));
    return launch_kernel(paged_kv::Combine::template of<T, Tile::D>(), dim3(blocks),
                         32 * paged_kv::kCombineRows, 0, stream, static_cast<const float*>(o_part),
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
                       reinterpret_cast<const void*>(paged_kv::Combine::template of<T, kD>()),
                       32 * paged_kv::kCombineRows, 0});
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
  return std::make_unique<PagedKvStage>();
}

}  // namespace flashsteps
