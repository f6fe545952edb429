#include "flashsteps/device_tensors.hpp"

#include "flashsteps/device_fill.hpp"

namespace flashsteps {

DeviceTensors::DeviceTensors(const Problem& p, std::int64_t workspace_bytes)
    : p_(p),
      q_(static_cast<std::size_t>(p.q_elems())),
      k_(static_cast<std::size_t>(p.kv_elems())),
      v_(static_cast<std::size_t>(p.kv_elems())),
      o_(static_cast<std::size_t>(p.o_elems())),
      lse_(static_cast<std::size_t>(p.lse_elems())),
      workspace_(static_cast<std::size_t>(workspace_bytes)) {}

void DeviceTensors::upload(const HostInputs& in) {
  q_.upload(in.q.data(), in.q.size());
  k_.upload(in.k.data(), in.k.size());
  v_.upload(in.v.data(), in.v.size());
}

void DeviceTensors::fill_random(std::uint64_t seed, cudaStream_t stream) {
  fill_random_device(q_.get(), p_.q_elems(), p_.dtype, 3 * seed, 0.25f, stream);
  fill_random_device(k_.get(), p_.kv_elems(), p_.dtype, 3 * seed + 1, 0.25f, stream);
  fill_random_device(v_.get(), p_.kv_elems(), p_.dtype, 3 * seed + 2, 0.5f, stream);
}

void DeviceTensors::poison(cudaStream_t stream) {
  o_.fill_bytes(0xFF, stream);
  lse_.fill_bytes(0xFF, stream);
}

AttentionArgs DeviceTensors::args() const {
  return {q_.get(), k_.get(), v_.get(), o_.get(), lse_.get(), workspace_.get()};
}

std::vector<std::uint16_t> DeviceTensors::download_o() const {
  std::vector<std::uint16_t> o(o_.size());
  o_.download(o.data(), o.size());
  return o;
}

std::vector<float> DeviceTensors::download_lse() const {
  std::vector<float> lse(lse_.size());
  lse_.download(lse.data(), lse.size());
  return lse;
}

}  // namespace flashsteps
