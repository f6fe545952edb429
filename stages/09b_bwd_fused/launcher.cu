// stages/09b_bwd_fused/launcher.cu — the fused backward as a flashsteps::Stage of kind backward:
// limits, workspace, and the one place the runtime dtype, head dim and causal flag become template
// arguments.
#include <string>

#include "flashsteps/cuda/dtype.cuh"
#include "kernels.cuh"

namespace flashsteps {
namespace {

using bwd_fused::BwdFusedTraits;
using bwd_fused::SupportedHeadDims;

// The runtime dtype, head dim and causal flag, as template arguments: f<T, D, causal>().
template <class F>
decltype(auto) dispatch(const Problem& p, F&& f) {
  return dispatch_dtype(p.dtype, [&]<class T>() -> decltype(auto) {
    return SupportedHeadDims::dispatch(p.head_dim, [&]<int kD>() -> decltype(auto) {
      return dispatch_bool(p.causal, [&]<bool kCausal>() -> decltype(auto) {
        return f.template operator()<T, kD, kCausal>();
      });
    });
  });
}

class BwdFusedStage final : public Stage {
 public:
  std::string_view name() const override { return FLASHSTEPS_STAGE_NAME; }
  std::string_view title() const override { return FLASHSTEPS_STAGE_TITLE; }
  StageKind kind() const override { return FLASHSTEPS_STAGE_KIND; }
  // dQ is summed by atomicAdd in the order the blocks reach it: two runs on a GPU may differ in
  // the last bits, so the suite checks each run against the references instead of bitwise.
  bool deterministic() const override { return false; }

  // D = 64 and 128; one block per (head, K/V tile of 32 keys), within the grid.x limit.
  Support supports(const Problem& p, const DeviceInfo& dev) const override {
    if (const std::string why = SupportedHeadDims::why_not(p.head_dim); !why.empty())
      return Support::no(why);
    const std::int64_t smem = SupportedHeadDims::dispatch(p.head_dim, [&]<int kD>() {
      return dispatch_dtype(p.dtype, [&]<class T>() {
        return static_cast<std::int64_t>(BwdFusedTraits<T, kD>::kSmemBytes);
      });
    });
    if (Support s = fits_shared_memory(smem, "K_j, V_j, Q_i, dO_i, P_ij and dS_ij", dev); !s.ok)
      return s;
    return fits_grid(p.batch_heads() * ((p.seq_kv + 31) / 32), 0x7fffffff, "B*H*ceil(Skv/32)");
  }

  std::int64_t workspace_bytes(const Problem& p) const override {
    return bwd_fused::workspace_bytes(shape(p), p.head_dim);
  }

  void launch(const Problem& p, const AttentionArgs& args, cudaStream_t stream) const override {
    dispatch(p, [&]<class T, int kD, bool kCausal>() {
      bwd_fused::enqueue<T, kD, kCausal>(shape(p), args, stream);
    });
  }

  std::vector<KernelLaunchInfo> kernels(const Problem& p) const override {
    return dispatch(p, [&]<class T, int kD, bool kCausal>() {
      return bwd_fused::kernel_list<T, kD, kCausal>(shape(p));
    });
  }

 private:
  static bwd_fused::Shape shape(const Problem& p) {
    return {p.batch_heads(), p.seq_q, p.seq_kv, p.softmax_scale()};
  }
};

}  // namespace

std::unique_ptr<Stage> make_stage() {
  return std::make_unique<BwdFusedStage>();
}

}  // namespace flashsteps
