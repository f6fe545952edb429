// flashsteps/device_tensors.hpp — the device side of one problem: Q, K, V, O, LSE and the
// stage's workspace, and for a backward stage dO, dQ, dK and dV, allocated once, outside any
// timed region.
#pragma once

#include <cstdint>
#include <vector>

#include "flashsteps/device_buffer.hpp"
#include "flashsteps/host_tensors.hpp"
#include "flashsteps/reference.hpp"
#include "flashsteps/stage.hpp"

namespace flashsteps {

class DeviceTensors {
 public:
  /// A backward stage's tensors (dO, dQ, dK, dV) are allocated only for `kind` backward.
  DeviceTensors(const Problem& p, std::int64_t workspace_bytes,
                StageKind kind = StageKind::forward);

  void upload(const HostInputs& in);
  /// A backward stage's inputs: Q, K, V, O, LSE and dO.
  void upload(const BackwardInputs& in);
  /// Random inputs generated on the device, with the offsets of make_inputs() (Q, K around 0.25,
  /// V around 0.5) but another generator: for timing large shapes, where filling on the host
  /// would take longer than the measurement. Never zeros. For a backward stage also O (as V)
  /// and dO (around 0), and LSE a constant per row: log(Skv) plus the scores' mean, so that
  /// P = exp(S - LSE) is about 1/Skv, as the forward's would be (timing only; the values are not
  /// a forward's).
  void fill_random(std::uint64_t seed, cudaStream_t stream);
  /// Fills the outputs with 0xFF bytes (NaN in fp16, bf16 and fp32): O and LSE forward, dQ, dK
  /// and dV backward. An element the stage does not write stays NaN and fails the check.
  void poison(cudaStream_t stream);
  AttentionArgs args() const;
  std::vector<std::uint16_t> download_o() const;
  std::vector<float> download_lse() const;
  std::vector<std::uint16_t> download_dq() const;
  std::vector<std::uint16_t> download_dk() const;
  std::vector<std::uint16_t> download_dv() const;

 private:
  Problem p_;
  StageKind kind_;
  DeviceBuffer<std::uint16_t> q_, k_, v_, o_;
  DeviceBuffer<float> lse_;
  DeviceBuffer<unsigned char> workspace_;
  DeviceBuffer<std::uint16_t> dout_, dq_, dk_, dv_;  // empty for a forward stage
  DeviceBuffer<std::int32_t> cache_seqlens_;         // the problem's, uploaded by the constructor
  DeviceBuffer<std::int32_t> block_table_;  // paged only: upload() or fill_random() fills it
};

}  // namespace flashsteps
