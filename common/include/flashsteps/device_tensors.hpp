// flashsteps/device_tensors.hpp — the device side of one problem: Q, K, V, O, LSE and the
// stage's workspace, allocated once, outside any timed region.
#pragma once

#include <cstdint>
#include <vector>

#include "flashsteps/device_buffer.hpp"
#include "flashsteps/host_tensors.hpp"
#include "flashsteps/stage.hpp"

namespace flashsteps {

class DeviceTensors {
 public:
  DeviceTensors(const Problem& p, std::int64_t workspace_bytes);

  void upload(const HostInputs& in);
  /// Random inputs generated on the device, with the offsets of make_inputs() (Q, K around 0.25,
  /// V around 0.5) but another generator: for timing large shapes, where filling on the host
  /// would take longer than the measurement. Never zeros.
  void fill_random(std::uint64_t seed, cudaStream_t stream);
  /// Fills O and LSE with 0xFF bytes (NaN in fp16, bf16 and fp32): an element the stage does
  /// not write stays NaN and fails the check.
  void poison(cudaStream_t stream);
  AttentionArgs args() const;
  std::vector<std::uint16_t> download_o() const;
  std::vector<float> download_lse() const;

 private:
  Problem p_;
  DeviceBuffer<std::uint16_t> q_, k_, v_, o_;
  DeviceBuffer<float> lse_;
  DeviceBuffer<unsigned char> workspace_;
};

}  // namespace flashsteps
