#include "flashsteps/device_tensors.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "flashsteps/device_fill.hpp"

namespace flashsteps {

namespace {
std::size_t count_if(bool backward, std::int64_t n) {
  return backward ? static_cast<std::size_t>(n) : 0;
}
}  // namespace

DeviceTensors::DeviceTensors(const Problem& p, std::int64_t workspace_bytes, StageKind kind)
    : p_(p),
      kind_(kind),
      q_(static_cast<std::size_t>(p.q_elems())),
      k_(static_cast<std::size_t>(p.kv_elems())),
      v_(static_cast<std::size_t>(p.kv_elems())),
      o_(static_cast<std::size_t>(p.o_elems())),
      lse_(static_cast<std::size_t>(p.lse_elems())),
      workspace_(static_cast<std::size_t>(workspace_bytes)),
      dout_(count_if(kind == StageKind::backward, p.o_elems())),
      dq_(count_if(kind == StageKind::backward, p.q_elems())),
      dk_(count_if(kind == StageKind::backward, p.kv_elems())),
      dv_(count_if(kind == StageKind::backward, p.kv_elems())),
      cache_seqlens_(p.cache_seqlens.size()),
      block_table_(static_cast<std::size_t>(p.num_pages())) {
  if (!p.cache_seqlens.empty())
    cache_seqlens_.upload(p.cache_seqlens.data(), p.cache_seqlens.size());
}

void DeviceTensors::upload(const HostInputs& in) {
  q_.upload(in.q.data(), in.q.size());
  k_.upload(in.k.data(), in.k.size());
  v_.upload(in.v.data(), in.v.size());
  if (!in.block_table.empty()) block_table_.upload(in.block_table.data(), in.block_table.size());
}

void DeviceTensors::upload(const BackwardInputs& in) {
  upload(in.fwd);
  o_.upload(in.o.data(), in.o.size());
  lse_.upload(in.lse.data(), in.lse.size());
  dout_.upload(in.dout.data(), in.dout.size());
}

void DeviceTensors::fill_random(std::uint64_t seed, cudaStream_t stream) {
  fill_random_device(q_.get(), p_.q_elems(), p_.dtype, 3 * seed, 0.25f, stream);
  fill_random_device(k_.get(), p_.kv_elems(), p_.dtype, 3 * seed + 1, 0.25f, stream);
  fill_random_device(v_.get(), p_.kv_elems(), p_.dtype, 3 * seed + 2, 0.5f, stream);
  if (p_.paged()) {  // a shuffled table, as make_inputs() draws one: no sequence's pages in order
    std::vector<std::int32_t> table(block_table_.size());
    std::iota(table.begin(), table.end(), 0);
    std::mt19937_64 rng(seed);
    std::shuffle(table.begin(), table.end(), rng);
    block_table_.upload(table.data(), table.size());
  }
  if (kind_ != StageKind::backward) return;
  fill_random_device(o_.get(), p_.o_elems(), p_.dtype, 3 * seed + 3, 0.5f, stream);
  fill_random_device(dout_.get(), p_.o_elems(), p_.dtype, 3 * seed + 4, 0.0f, stream);
  // E[S] = scale * D * 0.25 * 0.25 for Q and K around 0.25.
  const float lse = std::log(static_cast<float>(p_.seq_kv)) +
                    p_.softmax_scale() * static_cast<float>(p_.head_dim) / 16.0f;
  const std::vector<float> rows(lse_.size(), lse);
  FS_CUDA_CHECK(cudaStreamSynchronize(stream));
  lse_.upload(rows.data(), rows.size());
}

void DeviceTensors::poison(cudaStream_t stream) {
  if (kind_ == StageKind::backward) {
    dq_.fill_bytes(0xFF, stream);
    dk_.fill_bytes(0xFF, stream);
    dv_.fill_bytes(0xFF, stream);
    return;
  }
  o_.fill_bytes(0xFF, stream);
  lse_.fill_bytes(0xFF, stream);
}

AttentionArgs DeviceTensors::args() const {
  return {q_.get(),    k_.get(),  v_.get(),  o_.get(),  lse_.get(),           workspace_.get(),
          dout_.get(), dq_.get(), dk_.get(), dv_.get(), cache_seqlens_.get(), block_table_.get()};
}

namespace {
std::vector<std::uint16_t> download(const DeviceBuffer<std::uint16_t>& b) {
  std::vector<std::uint16_t> out(b.size());
  b.download(out.data(), out.size());
  return out;
}
}  // namespace

std::vector<std::uint16_t> DeviceTensors::download_o() const {
  return download(o_);
}

std::vector<float> DeviceTensors::download_lse() const {
  std::vector<float> lse(lse_.size());
  lse_.download(lse.data(), lse.size());
  return lse;
}

std::vector<std::uint16_t> DeviceTensors::download_dq() const {
  return download(dq_);
}
std::vector<std::uint16_t> DeviceTensors::download_dk() const {
  return download(dk_);
}
std::vector<std::uint16_t> DeviceTensors::download_dv() const {
  return download(dv_);
}

}  // namespace flashsteps
