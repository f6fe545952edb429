// stages/03_online_softmax/launcher.cu — the fused stage as a flashsteps::Stage: its limits (head
// dims, shared memory, grid size, alignment), the one-time shared-memory opt-in, and the one place
// the runtime dtype, head dim and causal flag become template arguments.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "flashsteps/cuda/dtype.cuh"
#include "kernels.cuh"

namespace flashsteps {
namespace {

using online_softmax::OnlineSoftmaxTraits;

/// Calls f.template operator()<T, kD, kCausal>() for the problem's dtype, head dim and mask.
/// `head_dim` must be one of SupportedHeadDims (supports_problem() has refused the others).
template <class F>
decltype(auto) dispatch_variant(DType dtype, std::int64_t head_dim, bool causal, F&& f) {
  return dispatch_dtype(dtype, [&]<class T>() -> decltype(auto) {
    return dispatch_bool(causal, [&]<bool kCausal>() -> decltype(auto) {
      return online_softmax::SupportedHeadDims::dispatch(head_dim, [&]<int kD>() -> decltype(auto) {
        return f.template operator()<T, kD, kCausal>();
      });
    });
  });
}

std::size_t smem_bytes(std::int64_t head_dim) {
  return online_softmax::SupportedHeadDims::dispatch(
      head_dim, [&]<int kD>() { return OnlineSoftmaxTraits<kD>::kSmemBytes; });
}

class OnlineSoftmaxStage final : public Stage {
 public:
  std::string_view name() const override { return "03_online_softmax"; }
  std::string_view title() const override { return "Online softmax: one fused kernel"; }

  Support supports_problem(const Problem& p) const override {
    if (std::string why = online_softmax::SupportedHeadDims::why_not(p.head_dim); !why.empty())
      return Support::no(why);
    return Support::yes();
  }

  Support supports(const Problem& p, const DeviceInfo& dev) const override {
    const auto smem = static_cast<std::int64_t>(smem_bytes(p.head_dim));
    if (Support s = fits_shared_memory(smem, "D " + std::to_string(p.head_dim), dev); !s) return s;
    return fits_grid(p.batch_heads() * tiles_q(p), online_softmax::kMaxBlocks,
                     "B*H*ceil(Sq/" + std::to_string(OnlineSoftmaxTraits<64>::Br) + ")");
  }

  // Raise the dynamic shared-memory limit of every instantiation the device can hold; supports()
  // refuses the others before they are ever launched.
  void setup(const DeviceInfo& dev) override {
    online_softmax::SupportedHeadDims::for_each([&]<int kD>() {
      if (static_cast<std::int64_t>(OnlineSoftmaxTraits<kD>::kSmemBytes) > dev.smem_optin_per_block)
        return;
      for (DType t : {DType::fp16, DType::bf16})
        for (bool causal : {false, true})
          dispatch_variant(t, kD, causal, [&]<class T, int kD2, bool kCausal>() {
            online_softmax::set_smem_limit<T, kD2, kCausal>();
          });
    });
  }

  void launch(const Problem& p, const AttentionArgs& args, cudaStream_t stream) const override {
    // The kernel moves Q, K, V and O in 16-byte pieces (cudaMalloc gives 256-byte alignment; a
    // view into the middle of a tensor may not have it).
    require_aligned(name(), args, 16);
    dispatch_variant(p.dtype, p.head_dim, p.causal, [&]<class T, int kD, bool kCausal>() {
      online_softmax::enqueue<T, kD, kCausal>(shape(p), args, stream);
    });
  }

  std::vector<KernelLaunchInfo> kernels(const Problem& p) const override {
    return dispatch_variant(p.dtype, p.head_dim, p.causal, [&]<class T, int kD, bool kCausal>() {
      return online_softmax::kernel_list<T, kD, kCausal>(shape(p));
    });
  }

 private:
  static std::int64_t tiles_q(const Problem& p) {
    constexpr std::int64_t Br = OnlineSoftmaxTraits<64>::Br;
    static_assert(OnlineSoftmaxTraits<64>::Br == OnlineSoftmaxTraits<128>::Br,
                  "Tr is computed once for every head dim");
    return ceil_div(p.seq_q, Br);
  }
  static online_softmax::Shape shape(const Problem& p) {
    return {p.batch_heads(), static_cast<int>(p.seq_q), static_cast<int>(p.seq_kv),
            static_cast<int>(tiles_q(p)), p.softmax_scale() * kLog2e};
  }
};

}  // namespace

std::unique_ptr<Stage> make_stage() {
  return std::make_unique<OnlineSoftmaxStage>();
}

}  // namespace flashsteps
