#include "flashsteps/stage.hpp"

#include <cstdint>
#include <stdexcept>

namespace flashsteps {

std::string refusal(std::string_view who, std::string_view reason) {
  return std::string(who) + ": cannot run: " + std::string(reason);
}

std::string no_device_reason(const Stage& s, std::string_view why) {
  return std::string(why) + "; this stage needs " + s.gpu_requirement();
}

Support supports_device(const Stage& s, const DeviceInfo& dev) {
  if (dev.compute_capability() >= s.min_compute_capability()) return Support::yes();
  return Support::no("needs " + s.gpu_requirement() + "; " + dev.name + " is sm_" +
                     std::to_string(dev.compute_capability()));
}

Support fits_shared_memory(std::int64_t bytes, const std::string& what, const DeviceInfo& dev) {
  if (bytes <= dev.smem_optin_per_block) return Support::yes();
  return Support::no("needs " + std::to_string(bytes) + " bytes of shared memory per block (" +
                     what + "), but " + dev.name + " allows at most " +
                     std::to_string(dev.smem_optin_per_block) + " (opt-in limit)");
}

Support fits_grid(std::int64_t blocks, std::int64_t max_blocks, const std::string& count) {
  if (blocks <= max_blocks) return Support::yes();
  return Support::no(count + " = " + std::to_string(blocks) +
                     " thread blocks exceed the grid limit of " + std::to_string(max_blocks));
}

void require_aligned(std::string_view stage, const AttentionArgs& args, std::size_t bytes) {
  for (const void* ptr : {args.q, args.k, args.v, static_cast<const void*>(args.o)}) {
    if (reinterpret_cast<std::uintptr_t>(ptr) % bytes != 0) {
      throw std::invalid_argument(std::string(stage) + ": Q, K, V and O must be " +
                                  std::to_string(bytes) + "-byte aligned");
    }
  }
}

Support supports_kv_cache(const Stage& s, const Problem& p) {
  const KvCacheSupport k = s.kv_cache();
  const std::string stage(s.name());
  if (p.grouped() && !k.grouped) {
    return Support::no(stage + " reads K/V with as many heads as Q (heads_kv = heads); heads = " +
                       std::to_string(p.heads) +
                       " over heads_kv = " + std::to_string(p.kv_heads()) +
                       " (GQA/MQA) needs a stage that reads K/V " + "by groups");
  }
  if (!p.cache_seqlens.empty() && !k.cache_seqlens) {
    return Support::no(stage +
                       " runs every sequence over all seq_kv = " + std::to_string(p.seq_kv) +
                       " keys; per-sequence cache_seqlens need a stage that reads a KV cache");
  }
  if (p.paged() && !k.paged) {
    return Support::no(stage + " reads K/V contiguous; a paged cache (page_size = " +
                       std::to_string(p.page_size) + ") needs a stage that reads a block table");
  }
  if (p.paged() && p.page_size % k.page_multiple != 0) {
    return Support::no("page_size = " + std::to_string(p.page_size) + ": " + stage +
                       " takes pages of a multiple of " + std::to_string(k.page_multiple) +
                       " keys");
  }
  return Support::yes();
}

Support supports_problem_of(const Stage& s, const Problem& p) {
  if (Support sup = supports_kv_cache(s, p); !sup) return sup;
  return s.supports_problem(p);
}

Support check_runnable(const Stage& s, const Problem& p, const DeviceInfo& dev) {
  if (std::string why = validate(p); !why.empty()) return Support::no(why);
  if (Support sup = supports_problem_of(s, p); !sup) return sup;
  if (Support sup = supports_device(s, dev); !sup) return sup;
  if (Support sup = s.supports(p, dev); !sup) return sup;
  if (std::string why = check_fits_memory(p, s.workspace_bytes(p), free_device_memory(), s.kind());
      !why.empty()) {
    return Support::no(why);
  }
  return Support::yes();
}

}  // namespace flashsteps
