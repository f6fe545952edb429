// bench/peaks.cpp — the measured ceilings every "% of peak" refers to, as Google Benchmark JSON:
//   peak_gemm/fp16, peak_gemm/bf16   a large cuBLAS GEMM (M = N = K = 8192), counter FLOP/s
//   peak_copy/d2d                    a 1 GiB device-to-device copy, counter bytes_per_second
//                                    (bytes read + bytes written)
// Timed exactly like the stages (events, L2 flushed before each launch, median).
#include <cublas_v2.h>

#include <iostream>

#include "flashsteps/cuda_check.hpp"
#include "flashsteps/device_fill.hpp"
#include "harness.hpp"

int main(int argc, char** argv) {
  using namespace flashsteps;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  std::string why;
  const auto dev = query_device(0, &why);
  if (!dev) {
    std::cerr << "bench_peaks: " << why << " — benchmarks need a GPU\n";
    return 3;
  }
  try {
    bench::add_context(*dev, argc, argv);
    benchmark::AddCustomContext("flashsteps_stage", "peaks");
    L2Flusher flusher(*dev);
    constexpr int n = 8192;
    for (DType t : {DType::fp16, DType::bf16}) {
      benchmark::RegisterBenchmark(
          ("peak_gemm/" + std::string(to_string(t))).c_str(),
          [&, t](benchmark::State& st) {
            const std::size_t elems = std::size_t{n} * n;
            DeviceBuffer<std::uint16_t> a(elems), b(elems), c(elems);
            fill_random_device(a.get(), elems, t, 1, nullptr);
            fill_random_device(b.get(), elems, t, 2, nullptr);
            cublasHandle_t h;
            FS_CUBLAS_CHECK(cublasCreate(&h));
            const cudaDataType_t dt = t == DType::fp16 ? CUDA_R_16F : CUDA_R_16BF;
            const float one = 1.0f, zero = 0.0f;
            bench::timed_loop(
                st,
                [&](cudaStream_t s) {
                  FS_CUBLAS_CHECK(cublasSetStream(h, s));
                  FS_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.get(),
                                               dt, n, b.get(), dt, n, &zero, c.get(), dt, n,
                                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
                },
                nullptr, flusher, 2.0 * n * double(n) * n, 0);
            FS_CUBLAS_CHECK(cublasDestroy(h));
          })
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Iterations(50);
    }
    benchmark::RegisterBenchmark(
        "peak_copy/d2d",
        [&](benchmark::State& st) {
          const std::size_t bytes = std::size_t{1} << 30;
          DeviceBuffer<unsigned char> src(bytes), dst(bytes);
          fill_random_device(src.get(), bytes / 2, DType::fp16, 3, nullptr);
          bench::timed_loop(
              st,
              [&](cudaStream_t s) {
                FS_CUDA_CHECK(
                    cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, s));
              },
              nullptr, flusher, 0, 2.0 * bytes);
        })
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->Iterations(50);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
  } catch (const std::exception& e) {
    std::cerr << "bench_peaks: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
