// stages/10a_kv_cache/launcher.cu — the KV-cache stage as a flashsteps::Stage. What every fused
// stage shares (limits, shared-memory opt-in, dispatch, launch) is flashsteps/fused_stage.cuh; this
// stage's decisions are 06c's tiles, the KV cache features it reads (kv_cache()), the two fields
// its Shape adds (complete_shape()) and the lengths its launch passes (launch_variant()).
#include <cstdint>

#include "flashsteps/fused_stage.cuh"
#include "kernels.cuh"

namespace flashsteps {
namespace {

class KvCacheStage final : public FusedStage<KvCacheStage, kv_cache::Kernel> {
 public:
  std::string_view name() const override { return FLASHSTEPS_STAGE_NAME; }
  std::string_view title() const override { return FLASHSTEPS_STAGE_TITLE; }
  // mma.sync.m16n8k16 with bf16 operands, ldmatrix and cp.async all need sm_80.
  int min_compute_capability() const override { return 80; }
  // Its kernels address mma.sync's fragments lane by lane: `--emulate --layout` prints them.
  std::vector<FragmentLayout> fragment_layouts() const override {
    return {FragmentLayout::mma_m16n8k16};
  }
  //! [kv_cache_support]
  // K/V by groups and one length per sequence; a paged cache is 10d's.
  KvCacheSupport kv_cache() const override { return {.grouped = true, .cache_seqlens = true}; }
  //! [kv_cache_support]

  using HeadDims = kv_cache::SupportedHeadDims;
  static constexpr const char* kKernelName = "fused_attention_kv_cache";
  static constexpr const char* kSmemHolds = "Q and a ring of 2 K/V stages";

  /// One tile per head dim, the same on every device.
  template <int kD>
  using TileFor = kv_cache::TileFor<kD>;

  /// H and the group size H / H_kv, which the kernel needs to find a block's sequence and K/V head.
  static void complete_shape(Shape& sh, const Problem& p) {
    sh.heads = static_cast<int>(p.heads);
    sh.group = static_cast<int>(p.heads / p.kv_heads());
  }
  /// 06c's launch, with the lengths (null without cache_seqlens: every sequence holds Skv keys).
  template <class T, class Tile, bool kCausal>
  static cudaError_t launch_variant(const Shape& sh, const AttentionArgs& a, cudaStream_t stream) {
    return launch_kernel(kv_cache::Kernel::template of<T, Tile, kCausal>(), grid(sh),
                         Tile::kThreads, Tile::kSmemBytes, stream, static_cast<const T*>(a.q),
                         static_cast<const T*>(a.k), static_cast<const T*>(a.v),
                         static_cast<T*>(a.o), a.lse, a.cache_seqlens, sh);
  }
};

}  // namespace

std::unique_ptr<Stage> make_stage() {
  return std::make_unique<KvCacheStage>();
}

}  // namespace flashsteps
