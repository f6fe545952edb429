// stages/09a_bwd_scalar/launcher.cu — the scalar backward as a flashsteps::Stage of kind backward:
// limits, workspace, and the one place the runtime dtype and causal flag become template
// arguments.
#include "flashsteps/cuda/dtype.cuh"
#include "kernels.cuh"

namespace flashsteps {
namespace {

class BwdScalarStage final : public Stage {
 public:
  std::string_view name() const override { return FLASHSTEPS_STAGE_NAME; }
  std::string_view title() const override { return FLASHSTEPS_STAGE_TITLE; }
  StageKind kind() const override { return FLASHSTEPS_STAGE_KIND; }
  // Beyond 4k one launch takes seconds and S, dS need tens of GiB; the bench stops there.
  std::int64_t bench_max_seq() const override { return 4096; }

  // Any D up to the project limit (flashsteps::validate), any dtype and shape: the only device
  // limit is memory for the workspace, which check_runnable() compares with free memory.
  Support supports(const Problem&, const DeviceInfo&) const override { return Support::yes(); }

  std::int64_t workspace_bytes(const Problem& p) const override {
    return bwd_scalar::workspace_bytes(shape(p));
  }

  void launch(const Problem& p, const AttentionArgs& args, cudaStream_t stream) const override {
    dispatch_dtype(p.dtype, [&]<class T>() {
      dispatch_bool(p.causal, [&]<bool kCausal>() {
        bwd_scalar::enqueue<T, kCausal>(shape(p), args, stream);
      });
    });
  }

  std::vector<KernelLaunchInfo> kernels(const Problem& p) const override {
    return dispatch_dtype(p.dtype, [&]<class T>() {
      return dispatch_bool(
          p.causal, [&]<bool kCausal>() { return bwd_scalar::kernel_list<T, kCausal>(shape(p)); });
    });
  }

 private:
  static bwd_scalar::Shape shape(const Problem& p) {
    return {p.batch_heads(), p.seq_q, p.seq_kv, p.head_dim, p.softmax_scale()};
  }
};

}  // namespace

std::unique_ptr<Stage> make_stage() {
  return std::make_unique<BwdScalarStage>();
}

}  // namespace flashsteps
