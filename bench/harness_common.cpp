#include <cstdlib>
#include <sstream>

#include "flashsteps/cuda_check.hpp"
#include "harness.hpp"

#ifndef FLASHSTEPS_GIT_COMMIT
#define FLASHSTEPS_GIT_COMMIT "unknown"
#endif

namespace flashsteps::bench {

void timed_loop(benchmark::State& state, const std::function<void(cudaStream_t)>& launch,
                cudaStream_t stream, L2Flusher& flusher, double flops, double bytes) {
  for (int i = 0; i < 3; ++i)
    launch(stream);  // warm-up: module load, caches, clocks
  FS_CUDA_CHECK(cudaStreamSynchronize(stream));
  EventTimer timer;
  std::vector<double> ms;
  for (auto _ : state) {
    flusher.flush(stream);
    const double t = timer.time_ms(launch, stream);
    ms.push_back(t);
    state.SetIterationTime(t * 1e-3);
  }
  const TimingStats s = summarize(ms);
  state.counters["median_ms"] = s.median_ms;
  state.counters["p10_ms"] = s.p10_ms;
  state.counters["p90_ms"] = s.p90_ms;
  if (flops > 0) state.counters["FLOP/s"] = flops / (s.median_ms * 1e-3);
  if (bytes > 0) state.counters["bytes_per_second"] = bytes / (s.median_ms * 1e-3);
}

void add_context(const DeviceInfo& dev, int argc, char** argv) {
  benchmark::AddCustomContext("gpu_name", dev.name);
  benchmark::AddCustomContext("gpu_sm_count", std::to_string(dev.sm_count));
  benchmark::AddCustomContext("gpu_compute_capability",
                              std::to_string(dev.cc_major) + "." + std::to_string(dev.cc_minor));
  benchmark::AddCustomContext("gpu_sm_clock_mhz", std::to_string(dev.sm_clock_mhz));
  benchmark::AddCustomContext("gpu_mem_clock_mhz", std::to_string(dev.mem_clock_mhz));
  benchmark::AddCustomContext("gpu_l2_bytes", std::to_string(dev.l2_bytes));
  benchmark::AddCustomContext("driver_version", cuda_version_string(dev.driver_version));
  benchmark::AddCustomContext("runtime_version", cuda_version_string(dev.runtime_version));
  // The GPU check exports the commit it measures; a bare build falls back to configure time.
  const char* commit = std::getenv("FLASHSTEPS_GIT_COMMIT");
  benchmark::AddCustomContext("git_commit", commit ? commit : FLASHSTEPS_GIT_COMMIT);
  std::ostringstream cmd;
  for (int i = 0; i < argc; ++i)
    cmd << (i ? " " : "") << argv[i];
  benchmark::AddCustomContext("command_line", cmd.str());
}

}  // namespace flashsteps::bench
