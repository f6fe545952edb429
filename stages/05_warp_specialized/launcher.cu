// stages/05_warp_specialized/launcher.cu — the warp-specialized stage as a flashsteps::Stage: its
// limits (head dims, shared memory, grid size, alignment), the tile it picks for the device, the
// one-time shared-memory opt-in, and the one place the runtime dtype, head dim and causal flag
// become template arguments.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "flashsteps/cuda/dtype.cuh"
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

/// Calls f.template operator()<T, Tile, kCausal>() for the problem's dtype, head dim and mask.
/// `head_dim` must be one of SupportedHeadDims (supports_problem() has refused the others).
template <class F>
decltype(auto) dispatch_variant(DType dtype, std::int64_t head_dim, bool wide_d128, bool causal,
                                F&& f) {
  return dispatch_dtype(dtype, [&]<class T>() -> decltype(auto) {
    return dispatch_bool(causal, [&]<bool kCausal>() -> decltype(auto) {
      if (head_dim == 64) return f.template operator()<T, TileD64, kCausal>();
      if (wide_d128) return f.template operator()<T, TileD128, kCausal>();
      return f.template operator()<T, TileD128Narrow, kCausal>();
    });
  });
}

std::size_t smem_bytes(std::int64_t head_dim, bool wide_d128) {
  if (head_dim == 64) return TileD64::kSmemBytes;
  return wide_d128 ? TileD128::kSmemBytes : TileD128Narrow::kSmemBytes;
}

class WarpSpecializedStage final : public Stage {
 public:
  std::string_view name() const override { return "05_warp_specialized"; }
  std::string_view title() const override {
    return "Warp specialization: producer and consumer warps";
  }

  Support supports_problem(const Problem& p) const override {
    if (std::string why = warp_specialized::SupportedHeadDims::why_not(p.head_dim); !why.empty())
      return Support::no(why);
    return Support::yes();
  }

  Support supports(const Problem& p, const DeviceInfo& dev) const override {
    const auto smem = static_cast<std::int64_t>(smem_bytes(p.head_dim, wide_d128_fits(dev)));
    if (Support s = fits_shared_memory(
            smem, "D " + std::to_string(p.head_dim) + ", a ring of 2 K/V stages and its barriers",
            dev);
        !s)
      return s;
    return fits_grid(p.batch_heads() * tiles_q(p), warp_specialized::kMaxBlocks,
                     "B*H*ceil(Sq/" + std::to_string(TileD64::Br) + ")");
  }

  // Picks the D = 128 tile for this device and raises the dynamic shared-memory limit of every
  // instantiation it can hold; supports() refuses the others before they are ever launched.
  void setup(const DeviceInfo& dev) override {
    wide_d128_ = wide_d128_fits(dev);
    warp_specialized::SupportedHeadDims::for_each([&]<int kD>() {
      for (DType t : {DType::fp16, DType::bf16})
        for (bool causal : {false, true}) {
          if (static_cast<std::int64_t>(smem_bytes(kD, wide_d128_)) > dev.smem_optin_per_block)
            continue;
          dispatch_variant(t, kD, wide_d128_, causal, [&]<class T, class Tile, bool kCausal>() {
            warp_specialized::set_smem_limit<T, Tile, kCausal>();
          });
        }
    });
  }

  void launch(const Problem& p, const AttentionArgs& args, cudaStream_t stream) const override {
    if (std::string why = warp_specialized::SupportedHeadDims::why_not(p.head_dim); !why.empty())
      throw std::invalid_argument(std::string(name()) + ": " + why);
    // The kernel copies Q, K, V and O in 16-byte pieces (cp.async needs 16-byte aligned sources;
    // cudaMalloc gives 256 bytes, a view into the middle of a tensor may not).
    require_aligned(name(), args, 16);
    dispatch_variant(p.dtype, p.head_dim, wide_d128_, p.causal,
                     [&]<class T, class Tile, bool kCausal>() {
                       warp_specialized::enqueue<T, Tile, kCausal>(shape(p), args, stream);
                     });
  }

  std::vector<KernelLaunchInfo> kernels(const Problem& p) const override {
    if (!warp_specialized::SupportedHeadDims::contains(p.head_dim)) return {};
    return dispatch_variant(p.dtype, p.head_dim, wide_d128_, p.causal,
                            [&]<class T, class Tile, bool kCausal>() {
                              return warp_specialized::kernel_list<T, Tile, kCausal>(shape(p));
                            });
  }

 private:
  // The D = 128 tile setup() picked for the device; the narrow one, which fits every sm_80+
  // device, until then.
  bool wide_d128_ = false;

  static std::int64_t tiles_q(const Problem& p) {
    constexpr std::int64_t Br = TileD64::Br;
    static_assert(TileD64::Br == TileD128::Br && TileD64::Br == TileD128Narrow::Br,
                  "Tr is computed once for every tile configuration");
    return ceil_div(p.seq_q, Br);
  }
  static warp_specialized::Shape shape(const Problem& p) {
    return {p.batch_heads(), static_cast<int>(p.seq_q), static_cast<int>(p.seq_kv),
            static_cast<int>(tiles_q(p)), p.softmax_scale() * kLog2e};
  }
};

}  // namespace

std::unique_ptr<Stage> make_stage() {
  return std::make_unique<WarpSpecializedStage>();
}

}  // namespace flashsteps
