// flashsteps/stage.hpp — the contract every stage implements, and how a binary finds its stage.
//
// A stage is a class derived from Stage, defined in stages/NN_name/launcher.cu, plus one free
// function `flashsteps::make_stage()` that returns it. Each runner, test and bench binary links
// exactly one stage library, so that one function is the registry: the CMake function
// flashsteps_add_stage() wires the binaries, and nothing is copied per stage.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "flashsteps/device_info.hpp"
#include "flashsteps/problem.hpp"

namespace flashsteps {

/// Device pointers of one attention call. Q, K, V, O, dO, dQ, dK, dV are in the problem's dtype
/// (raw 16-bit storage), LSE is fp32. `workspace` has at least Stage::workspace_bytes() bytes.
/// A forward stage reads Q, K, V and writes O and LSE; the gradients are null. A backward stage
/// (Stage::kind()) reads Q, K, V, the forward's O and LSE and dO, and writes dQ, dK and dV.
/// A KV cache's tensors (Problem: heads_kv, cache_seqlens, page_size) are K/V of H_kv heads, paged
/// or not, and the two int32 tables, null when the problem has none.
struct AttentionArgs {
  const void* q = nullptr;  // [B,H,Sq,D]
  const void* k = nullptr;  // [B,H_kv,Skv,D], or paged [P,H_kv,page_size,D]
  const void* v = nullptr;  // as K
  void* o = nullptr;        // [B,H,Sq,D]
  float* lse = nullptr;     // [B,H,Sq]
  void* workspace = nullptr;
  const void* dout = nullptr;                   // [B,H,Sq,D]  dO = dLoss/dO, backward only
  void* dq = nullptr;                           // [B,H,Sq,D]  backward only
  void* dk = nullptr;                           // [B,H,Skv,D] backward only
  void* dv = nullptr;                           // [B,H,Skv,D] backward only
  const std::int32_t* cache_seqlens = nullptr;  // [B], with Problem::cache_seqlens
  const std::int32_t* block_table = nullptr;    // [B, pages_per_seq], paged only
  bool deterministic = false;  // ask for bitwise-reproducible outputs (Stage::deterministic_mode())
};

/// What of a KV cache's layout a stage's kernels read (Stage::kv_cache()); all false by default.
/// The harness refuses a problem that uses more (supports_kv_cache()), naming the stage and the
/// feature, before the stage's own supports_problem() is asked.
struct KvCacheSupport {
  bool grouped = false;            ///< H_kv < H: K/V head h / (H / H_kv) for query head h
  bool cache_seqlens = false;      ///< per-sequence key counts, causal aligned to each
  bool paged = false;              ///< K/V in pages through a block table
  std::int64_t page_multiple = 1;  ///< with paged: the page sizes it takes are multiples of this
};

/// Whether a stage can run a problem on a device; `reason` names the limit when it cannot.
struct Support {
  bool ok = true;
  std::string reason;
  static Support yes() { return {}; }
  static Support no(std::string why) { return {false, std::move(why)}; }
  explicit operator bool() const { return ok; }
};

/// One kernel a stage launches for a problem: what the runner's resource report and the
/// occupancy API need.
struct KernelLaunchInfo {
  std::string name;        ///< readable, e.g. "scores<d64,fp16,causal>"
  const void* func;        ///< the __global__ function, as passed to cudaFuncGetAttributes
  int block_threads;       ///< threads per block
  std::size_t smem_bytes;  ///< dynamic shared memory per block
};

/// A tensor-core fragment layout a stage's kernels address lane by lane (which lane holds which
/// element of a fragment). WMMA keeps its layout opaque, so a stage that reaches the tensor cores
/// through WMMA only addresses none.
enum class FragmentLayout {
  mma_m16n8k16,    ///< mma.sync.m16n8k16's A, B and C/D fragments
  wgmma_m64nNk16,  ///< wgmma.mma_async.m64nNk16's D fragment
};

class Stage {
 public:
  virtual ~Stage() = default;

  /// Folder name, e.g. "00_scalar"; also the benchmark-name prefix.
  virtual std::string_view name() const = 0;
  /// The book chapter's title.
  virtual std::string_view title() const = 0;
  /// Forward or backward: its manifest's KIND, which a backward launcher returns as
  /// FLASHSTEPS_STAGE_KIND (the build defines it from the manifest, as it does the name).
  virtual StageKind kind() const { return StageKind::forward; }
  /// Minimum compute capability as major*10+minor (80 = sm_80).
  virtual int min_compute_capability() const { return 80; }
  /// The GPUs the stage runs on, in the words of a refusal: "sm_80 or newer" by default; a stage
  /// built for one architecture only names it and its cards.
  virtual std::string gpu_requirement() const {
    return "sm_" + std::to_string(min_compute_capability()) + " or newer";
  }
  /// The fragment layouts the stage's lesson is about: `--emulate --layout` prints them.
  virtual std::vector<FragmentLayout> fragment_layouts() const { return {}; }
  /// Whether two launches on the same inputs give bitwise the same outputs (the GPU suite checks
  /// it). A stage that sums with atomics in an order the hardware picks (a fused backward's dQ)
  /// returns false, and the suite checks each of the two runs against the references instead.
  virtual bool deterministic() const { return true; }
  /// Whether a stage that is not deterministic() has a mode, chosen at launch by
  /// AttentionArgs::deterministic, in which it is (a fixed order of its adds, at some cost); off
  /// by default. A stage without one ignores the field; the runner and the suite refuse to ask it.
  virtual bool deterministic_mode() const { return false; }
  /// Largest sequence length the bench harness times (slow teaching stages cap it).
  virtual std::int64_t bench_max_seq() const { return std::int64_t{1} << 30; }
  /// The KV cache's features its kernels read; the harness refuses the others for it.
  virtual KvCacheSupport kv_cache() const { return {}; }

  /// The stage's limits that hold on any device (head dims, dtypes). Checked before a device is
  /// even opened, so a shape the stage cannot run is refused the same way on every machine.
  /// Generic validation (flashsteps::validate) has passed already.
  virtual Support supports_problem(const Problem&) const { return Support::yes(); }
  /// The limits that depend on the device (shared memory per block, grid size), once
  /// supports_problem() has passed.
  virtual Support supports(const Problem& p, const DeviceInfo& dev) const = 0;
  /// Device scratch the caller allocates for `p` (unfused stages keep S here).
  virtual std::int64_t workspace_bytes(const Problem&) const { return 0; }
  /// One-time setup outside any timed region (handles, function attributes).
  virtual void setup(const DeviceInfo&) {}
  /// Enqueues the computation on `stream`. No allocation, no synchronization. Checks each launch.
  virtual void launch(const Problem& p, const AttentionArgs& args, cudaStream_t stream) const = 0;
  /// The kernels launch() runs for `p`, for resource and occupancy reports.
  virtual std::vector<KernelLaunchInfo> kernels(const Problem& p) const = 0;
};

/// The one shape in which every binary refuses to run: "<who>: cannot run: <reason>", where `who`
/// is the stage (or the test or bench binary) and `reason` names the limit and what to look at.
std::string refusal(std::string_view who, std::string_view reason);
/// The reason to give when query_device() found no GPU to use (`why`): that, and the GPUs the
/// stage needs.
std::string no_device_reason(const Stage& s, std::string_view why);
/// Refuses a device whose compute capability the stage's code does not run on, naming the GPUs
/// the stage needs and what the device is.
Support supports_device(const Stage& s, const DeviceInfo& dev);

/// Refuses a block that needs more dynamic shared memory than the device's opt-in limit, naming
/// both numbers and the device; `what` says what the bytes hold ("D 128, a ring of 2 K/V stages").
Support fits_shared_memory(std::int64_t bytes, const std::string& what, const DeviceInfo& dev);
/// Refuses a grid of more than `max_blocks` blocks; `count` says how the number was made.
Support fits_grid(std::int64_t blocks, std::int64_t max_blocks, const std::string& count);

/// FlashAttention's FLOP count of the stage's pass on `p` (Problem::flops of its kind).
inline double stage_flops(const Stage& s, const Problem& p) {
  return p.flops(s.kind());
}

/// Throws std::invalid_argument naming the stage unless Q, K, V and O are `bytes`-aligned (kernels
/// that move 16-byte pieces, cp.async and TMA need it; cudaMalloc gives 256 bytes, but a view into
/// the middle of a tensor may not).
void require_aligned(std::string_view stage, const AttentionArgs& args, std::size_t bytes);

/// Defined once per stage library (stages/NN_name/launcher.cu).
std::unique_ptr<Stage> make_stage();

/// The one check of a problem's KV cache layout against Stage::kv_cache(): K/V heads fewer than
/// Q's, per-sequence lengths, pages and their size, each refused with the limit when the stage
/// does not read it.
Support supports_kv_cache(const Stage& s, const Problem& p);
/// What holds on any device: supports_kv_cache(), then the stage's own supports_problem(). Every
/// binary asks this, never supports_problem() alone.
Support supports_problem_of(const Stage& s, const Problem& p);

/// Everything a runner, test or bench binary checks before launching: generic validation, the
/// KV cache layout, the device's compute capability, the stage's own limits, and free device
/// memory.
Support check_runnable(const Stage& s, const Problem& p, const DeviceInfo& dev);

}  // namespace flashsteps
