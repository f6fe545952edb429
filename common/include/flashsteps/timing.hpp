// flashsteps/timing.hpp — how every latency in this project is measured.
//
// CUDA events around each launch, warm-up first, the L2 cache flushed (a write of a buffer at
// least twice its size) before every timed launch so each launch reads its inputs from DRAM as
// it would in a model, and the median over many launches reported with p10 and p90.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "flashsteps/device_buffer.hpp"
#include "flashsteps/device_info.hpp"

namespace flashsteps {

struct TimingStats {
  double median_ms = 0, p10_ms = 0, p90_ms = 0, mean_ms = 0, min_ms = 0;
  int samples = 0;
};

/// Median and percentiles (nearest rank on the sorted samples). Pure host code, tested on the CPU.
TimingStats summarize(std::vector<double> ms);

/// Owns a buffer of max(2 * L2, 64 MiB) bytes; flush() overwrites it on the stream.
class L2Flusher {
 public:
  explicit L2Flusher(const DeviceInfo& dev);
  void flush(cudaStream_t stream);

 private:
  DeviceBuffer<unsigned char> buf_;
  int value_ = 0;
};

/// A pair of events around the launch on `stream`; returns milliseconds.
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  float time_ms(const std::function<void(cudaStream_t)>& launch, cudaStream_t stream);

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

/// `warmup` untimed launches, then `iters` timed ones, each preceded by an L2 flush.
std::vector<double> time_launches(const std::function<void(cudaStream_t)>& launch,
                                  cudaStream_t stream, L2Flusher& flusher, int warmup, int iters);

}  // namespace flashsteps
