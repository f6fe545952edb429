// bench/harness.hpp — the timing loop every Google Benchmark binary of this project shares.
#pragma once

#include <benchmark/benchmark.h>

#include <functional>
#include <memory>
#include <string>

#include "flashsteps/device_info.hpp"
#include "flashsteps/stage.hpp"
#include "flashsteps/timing.hpp"

namespace flashsteps::bench {

/// Times `launch` once per benchmark iteration (L2 flushed before each, CUDA events, manual
/// time) and sets the counters every result file carries: median_ms, p10_ms, p90_ms and, when
/// `flops` > 0, FLOP/s; when `bytes` > 0, bytes_per_second. Both rates use the median.
void timed_loop(benchmark::State& state, const std::function<void(cudaStream_t)>& launch,
                cudaStream_t stream, L2Flusher& flusher, double flops, double bytes);

/// Adds the provenance keys (GPU, SMs, compute capability, clocks, driver, runtime, git commit,
/// command line) to Google Benchmark's JSON context.
void add_context(const DeviceInfo& dev, int argc, char** argv);

/// The bench of `stage`: its own flags and Google Benchmark's (bench/harness.cpp); what main() of
/// a bench_<stage> binary returns (bench/stage_main.cpp).
int bench_main(int argc, char** argv, std::unique_ptr<Stage> stage);

}  // namespace flashsteps::bench
