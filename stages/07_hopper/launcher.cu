// stages/07_hopper/launcher.cu — the Hopper stage as a flashsteps::Stage: its limits (exactly
// compute capability 9.0, head dims, shared memory, grid size, TMA's alignment), the one-time
// shared-memory opt-in, and the one place the runtime dtype, head dim and causal flag become
// template arguments.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "flashsteps/cuda/dtype.cuh"
#include "kernels.cuh"

namespace flashsteps {
namespace {

using hopper::SupportedHeadDims;
using hopper::TileFor;

/// Calls f.template operator()<T, kD, kCausal>() for the problem's dtype, head dim and mask.
/// `head_dim` must be one of SupportedHeadDims (supports_problem() has refused the others).
template <class F>
decltype(auto) dispatch_variant(DType dtype, std::int64_t head_dim, bool causal, F&& f) {
  return dispatch_dtype(dtype, [&]<class T>() -> decltype(auto) {
    return dispatch_bool(causal, [&]<bool kCausal>() -> decltype(auto) {
      return SupportedHeadDims::dispatch(head_dim, [&]<int kD>() -> decltype(auto) {
        return f.template operator()<T, kD, kCausal>();
      });
    });
  });
}

std::size_t smem_bytes(std::int64_t head_dim) {
  return SupportedHeadDims::dispatch(head_dim, [&]<int kD>() { return TileFor<kD>::kSmemBytes; });
}

class HopperStage final : public Stage {
 public:
  std::string_view name() const override { return "07_hopper"; }
  std::string_view title() const override {
    return "Hopper: TMA, mbarriers, wgmma and warpgroup specialization";
  }
  // wgmma and setmaxnreg exist only in the sm_90a target; TMA and mbarrier expect_tx need sm_90.
  int min_compute_capability() const override { return 90; }
  std::string gpu_requirement() const override { return "sm_90a (H100/H200)"; }

  Support supports_problem(const Problem& p) const override {
    if (std::string why = SupportedHeadDims::why_not(p.head_dim); !why.empty())
      return Support::no(why);
    return Support::yes();
  }

  Support supports(const Problem& p, const DeviceInfo& dev) const override {
    // "At least 9.0" is not enough: sm_90a machine code (the "a" = arch-specific features wgmma,
    // setmaxnreg) runs on compute capability 9.0 only, and its compute_90a PTX cannot be
    // JIT-compiled for any other GPU either.
    if (dev.compute_capability() != 90) {
      return Support::no("needs " + gpu_requirement() +
                         ": its wgmma and setmaxnreg do not run on later architectures (sm_100+ "
                         "has tcgen05 instead); " +
                         dev.name + " is sm_" + std::to_string(dev.compute_capability()));
    }
    const auto smem = static_cast<std::int64_t>(smem_bytes(p.head_dim));
    if (Support s = fits_shared_memory(
            smem, "D " + std::to_string(p.head_dim) + ", Q and a ring of K/V stages", dev);
        !s)
      return s;
    return fits_grid(p.batch_heads() * tiles_q(p), hopper::kMaxBlocks,
                     "B*H*ceil(Sq/" + std::to_string(hopper::TileD64::Br) + ")");
  }

  // Raise the dynamic shared-memory limit of every instantiation the device can hold; supports()
  // refuses the others (and every device that is not sm_90) before they are ever launched.
  void setup(const DeviceInfo& dev) override {
    if (dev.compute_capability() != 90) return;
    SupportedHeadDims::for_each([&]<int kD>() {
      if (static_cast<std::int64_t>(TileFor<kD>::kSmemBytes) > dev.smem_optin_per_block) return;
      for (DType t : {DType::fp16, DType::bf16})
        for (bool causal : {false, true})
          dispatch_variant(t, kD, causal, [&]<class T, int kD2, bool kCausal>() {
            hopper::set_smem_limit<T, kD2, kCausal>();
          });
    });
  }

  void launch(const Problem& p, const AttentionArgs& args, cudaStream_t stream) const override {
    // TMA's tensor maps need 16-byte aligned base addresses (row strides D * 2 bytes are
    // multiples of 16 for every supported D). cudaMalloc gives 256 bytes.
    require_aligned(name(), args, 16);
    dispatch_variant(p.dtype, p.head_dim, p.causal, [&]<class T, int kD, bool kCausal>() {
      hopper::enqueue<T, kD, kCausal>(shape(p), args, stream);
    });
  }

  std::vector<KernelLaunchInfo> kernels(const Problem& p) const override {
    return dispatch_variant(p.dtype, p.head_dim, p.causal, [&]<class T, int kD, bool kCausal>() {
      return hopper::kernel_list<T, kD, kCausal>(shape(p));
    });
  }

 private:
  static std::int64_t tiles_q(const Problem& p) {
    constexpr std::int64_t Br = hopper::TileD64::Br;  // == TileD128::Br (kernels.cuh)
    return ceil_div(p.seq_q, Br);
  }
  static hopper::Shape shape(const Problem& p) {
    return {p.batch_heads(), static_cast<int>(p.seq_q), static_cast<int>(p.seq_kv),
            static_cast<int>(tiles_q(p)), p.softmax_scale() * kLog2e};
  }
};

}  // namespace

std::unique_ptr<Stage> make_stage() {
  return std::make_unique<HopperStage>();
}

}  // namespace flashsteps
