// stages/02_wmma/launcher.cu — the WMMA stage as a flashsteps::Stage: limits (head dims, shared
// memory, alignment), workspace, and the one place the runtime head dim, dtype and causal flag
// become template arguments.
#include <stdexcept>
#include <string>

#include "flashsteps/cuda/dtype.cuh"
#include "kernels.cuh"

namespace flashsteps {
namespace {

class WmmaStage final : public Stage {
 public:
  std::string_view name() const override { return FLASHSTEPS_STAGE_NAME; }
  std::string_view title() const override { return FLASHSTEPS_STAGE_TITLE; }

  Support supports_problem(const Problem& p) const override {
    if (std::string why = wmma_stage::SupportedHeadDims::why_not(p.head_dim); !why.empty())
      return Support::no(why);
    return Support::yes();
  }

  Support supports(const Problem& p, const DeviceInfo& dev) const override {
    return fits_shared_memory(wmma_stage::smem_bytes(static_cast<int>(p.head_dim)),
                              "D " + std::to_string(p.head_dim), dev);
  }

  // fp32 S, then P in the dtype (rows padded to 8 elements) from the next 256-byte boundary.
  std::int64_t workspace_bytes(const Problem& p) const override {
    return wmma_stage::p_offset_bytes(p.batch_heads(), p.seq_q, p.seq_kv) +
           2 * p.batch_heads() * p.seq_q * wmma_stage::p_row_pitch(p.seq_kv);
  }

  void setup(const DeviceInfo& dev) override { wmma_stage::configure_kernels(dev); }

  void launch(const Problem& p, const AttentionArgs& args, cudaStream_t stream) const override {
    // The kernels load Q, K and V and store O in 16-byte pieces (8 elements). A view into the
    // middle of a tensor may not start on such a boundary, and a misaligned access would kill the
    // CUDA context.
    require_aligned(name(), args, 16);
    wmma_stage::SupportedHeadDims::dispatch(p.head_dim, [&]<int D>() {
      dispatch_dtype(p.dtype, [&]<class T>() {
        dispatch_bool(p.causal, [&]<bool kCausal>() {
          wmma_stage::enqueue<T, D, kCausal>(shape(p), args, stream);
        });
      });
    });
  }

  std::vector<KernelLaunchInfo> kernels(const Problem& p) const override {
    return wmma_stage::SupportedHeadDims::dispatch(p.head_dim, [&]<int D>() {
      return dispatch_dtype(p.dtype, [&]<class T>() {
        return dispatch_bool(p.causal, [&]<bool kCausal>() {
          return wmma_stage::kernel_list<T, D, kCausal>(shape(p));
        });
      });
    });
  }

 private:
  static wmma_stage::Shape shape(const Problem& p) {
    return {p.batch_heads(), p.seq_q, p.seq_kv, wmma_stage::p_row_pitch(p.seq_kv),
            p.softmax_scale()};
  }
};

}  // namespace

std::unique_ptr<Stage> make_stage() {
  return std::make_unique<WmmaStage>();
}

}  // namespace flashsteps
