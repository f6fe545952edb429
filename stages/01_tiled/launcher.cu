// stages/01_tiled/launcher.cu — the tiled stage as a flashsteps::Stage: limits (head dims,
// alignment), workspace, and the one place the runtime head dim, dtype and causal flag become
// template arguments.
#include <stdexcept>
#include <string>

#include "flashsteps/cuda/dtype.cuh"
#include "kernels.cuh"

namespace flashsteps {
namespace {

class TiledStage final : public Stage {
 public:
  std::string_view name() const override { return FLASHSTEPS_STAGE_NAME; }
  std::string_view title() const override { return FLASHSTEPS_STAGE_TITLE; }

  Support supports_problem(const Problem& p) const override {
    if (std::string why = tiled::SupportedHeadDims::why_not(p.head_dim); !why.empty())
      return Support::no(why);
    return Support::yes();
  }
  Support supports(const Problem&, const DeviceInfo&) const override { return Support::yes(); }

  // S (then P, in place) in fp32: 4 bytes per score.
  std::int64_t workspace_bytes(const Problem& p) const override {
    return 4 * p.batch_heads() * p.seq_q * p.seq_kv;
  }

  void launch(const Problem& p, const AttentionArgs& args, cudaStream_t stream) const override {
    // The kernels load Q, K and V in 8-byte pieces (4 elements). A view into the middle of a
    // tensor may not start on such a boundary, and a misaligned load would kill the CUDA context.
    require_aligned(name(), args, 8);
    tiled::SupportedHeadDims::dispatch(p.head_dim, [&]<int D>() {
      dispatch_dtype(p.dtype, [&]<class T>() {
        dispatch_bool(p.causal, [&]<bool kCausal>() {
          tiled::enqueue<T, D, kCausal>(shape(p), args, stream);
        });
      });
    });
  }

  std::vector<KernelLaunchInfo> kernels(const Problem& p) const override {
    return tiled::SupportedHeadDims::dispatch(p.head_dim, [&]<int D>() {
      return dispatch_dtype(p.dtype, [&]<class T>() {
        return dispatch_bool(
            p.causal, [&]<bool kCausal>() { return tiled::kernel_list<T, D, kCausal>(shape(p)); });
      });
    });
  }

 private:
  static tiled::Shape shape(const Problem& p) {
    return {p.batch_heads(), p.seq_q, p.seq_kv, p.softmax_scale()};
  }
};

}  // namespace

std::unique_ptr<Stage> make_stage() {
  return std::make_unique<TiledStage>();
}

}  // namespace flashsteps
