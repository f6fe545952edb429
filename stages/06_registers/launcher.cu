// stages/06_registers/launcher.cu — the register-resident stage as a flashsteps::Stage: its limits
// (head dims, compute capability, shared memory, grid size, alignment), the one-time shared-memory
// opt-in, and the one place the runtime dtype, head dim and causal flag become template arguments.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "flashsteps/cuda/dtype.cuh"
#include "kernels.cuh"

namespace flashsteps {
namespace {

using registers::SupportedHeadDims;
using registers::TileFor;

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

class RegistersStage final : public Stage {
 public:
  std::string_view name() const override { return "06_registers"; }
  std::string_view title() const override {
    return "Registers: mma.sync, ldmatrix and P kept in registers";
  }
  // mma.sync.m16n8k16 with bf16 operands, ldmatrix and cp.async all need sm_80.
  int min_compute_capability() const override { return 80; }

  Support supports_problem(const Problem& p) const override {
    if (std::string why = SupportedHeadDims::why_not(p.head_dim); !why.empty())
      return Support::no(why);
    return Support::yes();
  }

  Support supports(const Problem& p, const DeviceInfo& dev) const override {
    const auto smem = static_cast<std::int64_t>(smem_bytes(p.head_dim));
    if (Support s = fits_shared_memory(
            smem, "D " + std::to_string(p.head_dim) + ", Q and a ring of 2 K/V stages", dev);
        !s)
      return s;
    return fits_grid(p.batch_heads() * tiles_q(p), registers::kMaxBlocks,
                     "B*H*ceil(Sq/" + std::to_string(registers::TileD64::Br) + ")");
  }

  // Raise the dynamic shared-memory limit of every instantiation the device can hold; supports()
  // refuses the others before they are ever launched.
  void setup(const DeviceInfo& dev) override {
    SupportedHeadDims::for_each([&]<int kD>() {
      if (static_cast<std::int64_t>(TileFor<kD>::kSmemBytes) > dev.smem_optin_per_block) return;
      for (DType t : {DType::fp16, DType::bf16})
        for (bool causal : {false, true})
          dispatch_variant(t, kD, causal, [&]<class T, int kD2, bool kCausal>() {
            registers::set_smem_limit<T, kD2, kCausal>();
          });
    });
  }

  void launch(const Problem& p, const AttentionArgs& args, cudaStream_t stream) const override {
    // The kernel copies Q, K, V and O in 16-byte pieces (cp.async needs 16-byte aligned sources;
    // cudaMalloc gives 256 bytes, a view into the middle of a tensor may not).
    require_aligned(name(), args, 16);
    dispatch_variant(p.dtype, p.head_dim, p.causal, [&]<class T, int kD, bool kCausal>() {
      registers::enqueue<T, kD, kCausal>(shape(p), args, stream);
    });
  }

  std::vector<KernelLaunchInfo> kernels(const Problem& p) const override {
    return dispatch_variant(p.dtype, p.head_dim, p.causal, [&]<class T, int kD, bool kCausal>() {
      return registers::kernel_list<T, kD, kCausal>(shape(p));
    });
  }

 private:
  static std::int64_t tiles_q(const Problem& p) {
    constexpr std::int64_t Br = registers::TileD64::Br;  // == TileD128::Br (kernels.cuh)
    return ceil_div(p.seq_q, Br);
  }
  static registers::Shape shape(const Problem& p) {
    return {p.batch_heads(), static_cast<int>(p.seq_q), static_cast<int>(p.seq_kv),
            static_cast<int>(tiles_q(p)), p.softmax_scale() * kLog2e};
  }
};

}  // namespace

std::unique_ptr<Stage> make_stage() {
  return std::make_unique<RegistersStage>();
}

}  // namespace flashsteps
