#include "flashsteps/timing.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace flashsteps {

TimingStats summarize(std::vector<double> ms) {
  TimingStats t;
  t.samples = static_cast<int>(ms.size());
  if (ms.empty()) return t;
  std::sort(ms.begin(), ms.end());
  auto rank = [&](double q) {
    const auto i = static_cast<std::size_t>(std::ceil(q * static_cast<double>(ms.size()))) - 1;
    return ms[std::min(ms.size() - 1, std::max<std::size_t>(i, 0))];
  };
  const std::size_t n = ms.size();
  t.median_ms = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
  t.p10_ms = rank(0.10);
  t.p90_ms = rank(0.90);
  t.min_ms = ms.front();
  t.mean_ms = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(n);
  return t;
}

L2Flusher::L2Flusher(const DeviceInfo& dev)
    : buf_(static_cast<std::size_t>(std::max<std::int64_t>(2 * dev.l2_bytes, 64ll << 20))) {}

void L2Flusher::flush(cudaStream_t stream) {
  value_ = (value_ + 1) & 0x7F;  // a different value each time, so nothing can skip the write
  buf_.fill_bytes(value_, stream);
}

EventTimer::EventTimer() {
  FS_CUDA_CHECK(cudaEventCreate(&start_));
  FS_CUDA_CHECK(cudaEventCreate(&stop_));
}

EventTimer::~EventTimer() {
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
}

float EventTimer::time_ms(const std::function<void(cudaStream_t)>& launch, cudaStream_t stream) {
  FS_CUDA_CHECK(cudaEventRecord(start_, stream));
  launch(stream);
  FS_CUDA_CHECK(cudaEventRecord(stop_, stream));
  FS_CUDA_CHECK(cudaEventSynchronize(stop_));
  float ms = 0;
  FS_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
  return ms;
}

std::vector<double> time_launches(const std::function<void(cudaStream_t)>& launch,
                                  cudaStream_t stream, L2Flusher& flusher, int warmup, int iters) {
  for (int i = 0; i < warmup; ++i)
    launch(stream);
  FS_CUDA_CHECK(cudaStreamSynchronize(stream));
  EventTimer timer;
  std::vector<double> ms;
  ms.reserve(static_cast<std::size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    flusher.flush(stream);
    ms.push_back(timer.time_ms(launch, stream));
  }
  return ms;
}

}  // namespace flashsteps
