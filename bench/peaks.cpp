// bench/peaks.cpp — the measured ceilings every "% of peak" refers to, as Google Benchmark JSON:
//   peak_gemm/fp16, peak_gemm/bf16   a large cuBLAS GEMM (M = N = K = 8192), counter FLOP/s
//   peak_copy/d2d                    a 1 GiB device-to-device copy, counter bytes_per_second
//                                    (bytes read + bytes written)
// Timed exactly like the stages (events, L2 flushed before each launch, median).
#include <iostream>

#include "flashsteps/cuda_check.hpp"
#include "flashsteps/peaks.hpp"
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
    for (DType t : {DType::fp16, DType::bf16}) {
      const std::string name = "peak_gemm/" + std::string(to_string(t));
      benchmark::RegisterBenchmark(name.c_str(),
                                   [&, t](benchmark::State& st) {
                                     GemmPeak gemm(t, 8192);
                                     bench::timed_loop(
                                         st, [&](cudaStream_t s) { gemm.launch(s); }, nullptr,
                                         flusher, gemm.flops(), 0);
                                   })
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Iterations(50);
    }
    benchmark::RegisterBenchmark("peak_copy/d2d",
                                 [&](benchmark::State& st) {
                                   CopyPeak copy(std::int64_t{1} << 30);
                                   bench::timed_loop(
                                       st, [&](cudaStream_t s) { copy.launch(s); }, nullptr,
                                       flusher, 0, copy.bytes_moved());
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
