// bench/baselines/cublas/launcher.cu — the unfused cuBLAS baseline as a flashsteps::Stage, so the
// shared GPU suite checks it and the shared bench times it like any stage.
#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/cuda_check.hpp"
#include "kernels.cuh"

namespace flashsteps {
namespace {

class CublasBaseline final : public Stage {
 public:
  ~CublasBaseline() override {
    if (handle_) cublasDestroy(handle_);
  }
  std::string_view name() const override { return FLASHSTEPS_STAGE_NAME; }
  std::string_view title() const override { return FLASHSTEPS_STAGE_TITLE; }

  // Any D up to the project limit and B*H within cuBLAS's 32-bit batch count (flashsteps::validate
  // refuses B*H >= 2^31); the device limit is memory for S and P, checked by check_runnable().
  Support supports(const Problem&, const DeviceInfo&) const override { return Support::yes(); }

  // S in fp32, then P in the dtype from the next 256-byte boundary (cuBLAS's preferred alignment),
  // both with rows padded to cublas_baseline::score_pitch.
  std::int64_t workspace_bytes(const Problem& p) const override {
    return cublas_baseline::p_offset_bytes(p) +
           2 * p.batch_heads() * p.seq_q * cublas_baseline::score_pitch(p);
  }

  void setup(const DeviceInfo&) override {
    if (!handle_) FS_CUBLAS_CHECK(cublasCreate(&handle_));
  }

  void launch(const Problem& p, const AttentionArgs& args, cudaStream_t stream) const override {
    if (!handle_) throw CudaError("baseline_cublas: launch() before setup()");
    dispatch_dtype(p.dtype, [&]<class T>() {
      dispatch_bool(p.causal, [&]<bool kCausal>() {
        cublas_baseline::enqueue<T, kCausal>(handle_, p, args, stream);
      });
    });
  }

  std::vector<KernelLaunchInfo> kernels(const Problem& p) const override {
    return dispatch_dtype(p.dtype, [&]<class T>() {
      return dispatch_bool(
          p.causal, [&]<bool kCausal>() { return cublas_baseline::kernel_list<T, kCausal>(); });
    });
  }

 private:
  cublasHandle_t handle_ = nullptr;
};

}  // namespace

std::unique_ptr<Stage> make_stage() {
  return std::make_unique<CublasBaseline>();
}

}  // namespace flashsteps
