// stages/09g_bwd_tma_producer/launcher.cu — the TMA producer backward as a flashsteps::Stage of
// kind backward: limits (compute capability 9.0 only, TMA's coordinates), workspace, the
// shared-memory opt-in, the alignment its tensor maps need, and the one place the runtime dtype,
// head dim and causal flag become template arguments.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "flashsteps/cuda/dtype.cuh"
#include "kernels.cuh"

namespace flashsteps {
namespace {

using bwd_dq_writer::BwdDqWriterTraits;
using bwd_dq_writer::SupportedHeadDims;

// Keys per block, the same at both head dims: the grid is B*H*ceil(Skv/kBc) blocks.
constexpr int kBc = BwdDqWriterTraits<__half, 64>::Bc;
static_assert(BwdDqWriterTraits<__half, 128>::Bc == kBc &&
                  BwdDqWriterTraits<__nv_bfloat16, 64>::Bc == kBc &&
                  BwdDqWriterTraits<__nv_bfloat16, 128>::Bc == kBc,
              "one key tile size for every variant");

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

class BwdDqWriterStage final : public Stage {
 public:
  std::string_view name() const override { return FLASHSTEPS_STAGE_NAME; }
  std::string_view title() const override { return FLASHSTEPS_STAGE_TITLE; }
  StageKind kind() const override { return FLASHSTEPS_STAGE_KIND; }
  // dQ is summed by bulk reduce-adds in the order the blocks reach it: two runs on a GPU may
  // differ in the last bits, so the suite checks each run against the references instead of
  // bitwise.
  bool deterministic() const override { return false; }
  // wgmma exists only in the sm_90a target, whose machine code runs on compute capability 9.0
  // alone: supports() refuses every other device, as 07a's FusedStage does.
  int min_compute_capability() const override { return 90; }
  std::string gpu_requirement() const override { return "sm_90a (H100/H200)"; }
  // Pᵀ and dSᵀ go from wgmma's accumulator layout to its register A operand (09c's mma.sync
  // fragments, per warp): `--emulate --layout` prints both.
  std::vector<FragmentLayout> fragment_layouts() const override {
    return {FragmentLayout::mma_m16n8k16, FragmentLayout::wgmma_m64nNk16};
  }

  // D = 64 and 128; one block per (head, K/V tile of 64 keys), within the grid.x limit.
  Support supports(const Problem& p, const DeviceInfo& dev) const override {
    if (dev.compute_capability() != 90)
      return Support::no("needs " + gpu_requirement() +
                         ": wgmma runs on compute capability 9.0 only; " + dev.name + " is sm_" +
                         std::to_string(dev.compute_capability()));
    if (const std::string why = SupportedHeadDims::why_not(p.head_dim); !why.empty())
      return Support::no(why);
    const std::int64_t smem = SupportedHeadDims::dispatch(p.head_dim, [&]<int kD>() {
      return dispatch_dtype(p.dtype, [&]<class T>() {
        return static_cast<std::int64_t>(BwdDqWriterTraits<T, kD>::kSmemBytes);
      });
    });
    const std::string what =
        "K_j, V_j, dS_ij and a ring of " + std::to_string(BwdDqWriterTraits<__half, 64>::kStages) +
        " Q_i, dO_i slots, " + std::to_string(BwdDqWriterTraits<__half, 64>::kDqBufs) +
        " fp32 dQ buffers";
    if (Support s = fits_shared_memory(smem, what, dev); !s.ok) return s;
    return fits_grid(p.batch_heads() * ((p.seq_kv + kBc - 1) / kBc), 0x7fffffff,
                     "B*H*ceil(Skv/" + std::to_string(kBc) + ")");
  }

  // Above 48 KiB of dynamic shared memory the fused kernel must opt in (both head dims).
  void setup(const DeviceInfo&) override { bwd_dq_writer::configure_kernels(); }

  std::int64_t workspace_bytes(const Problem& p) const override {
    return bwd_dq_writer::workspace_bytes(shape(p), p.head_dim);
  }

  void launch(const Problem& p, const AttentionArgs& args, cudaStream_t stream) const override {
    // Q, K, V and dO are read through tensor maps: 16-byte aligned bases (TMA's rule).
    require_aligned(name(), args, 16);
    if (reinterpret_cast<std::uintptr_t>(args.dout) % 16 != 0)
      throw std::invalid_argument(std::string(name()) + ": dO must be 16-byte aligned");
    dispatch(p, [&]<class T, int kD, bool kCausal>() {
      bwd_dq_writer::enqueue<T, kD, kCausal>(shape(p), args, stream);
    });
  }

  std::vector<KernelLaunchInfo> kernels(const Problem& p) const override {
    return dispatch(p, [&]<class T, int kD, bool kCausal>() {
      return bwd_dq_writer::kernel_list<T, kD, kCausal>(shape(p));
    });
  }

 private:
  static bwd_dq_writer::Shape shape(const Problem& p) {
    return {p.batch_heads(), p.seq_q, p.seq_kv, p.softmax_scale()};
  }
};

}  // namespace

std::unique_ptr<Stage> make_stage() {
  return std::make_unique<BwdDqWriterStage>();
}

}  // namespace flashsteps
