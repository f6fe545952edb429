// stages/08c_d64_tile/kernels.cuh — what the persistent Hopper stage's kernel file exports to its
// launcher: the tile traits (sizes, warpgroup roles and register budgets, the TMA ring, the
// scheduler's slots, the assumptions behind them), the tile each head dim runs (three consumer
// warpgroups at D = 64, two at D = 128), and the kernel itself (struct Kernel: one variant per
// dtype, tile and causal flag; the schedule is a kernel argument, scheduler.cuh).
#pragma once

#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/fused_stage.cuh"

namespace flashsteps::hopper {

/// Head dimensions the kernel is instantiated for.
using SupportedHeadDims = HeadDims<64, 128>;

/// Tiles of the Hopper kernel for head dimension kD, kBc keys per tile, a ring of kStages
/// shared-memory stages and kConsumers consumer warpgroups. A persistent thread block computes one
/// query block Q_i of Br = 64 kConsumers rows of one head after another (the work items
/// scheduler.cuh hands it), and runs 1 + kConsumers warpgroups (4 consecutive warps each, starting
/// at warp 0, 4, 8, 12):
///
///   warpgroup 0      producer   one thread issues every TMA copy (Q_i once, then K_j, V_j into
///                               the ring); the warpgroup drops to kProducerRegs registers per
///                               thread
///   warpgroup 1 + c  consumer c owns Q_i rows 64 c .. 64 c + 63: S, P, O strips (64, *) in its
///                               registers (c = 0 .. kConsumers - 1)
///
/// Shared memory (offsets from a 1024-byte aligned base; every region a whole number of 1 KiB
/// swizzle atoms, as TMA's 128-byte swizzle and the wgmma descriptors need):
///   Q      (Br, D)  as D/64 column blocks (Br, 64), each row 128 B, 128B-swizzled (TMA); reused
///                   at the end to stage O_i / l for the TMA store
///   K ring kStages x (Bc, D) as D/64 column blocks (Bc, 64), 128B-swizzled
///   V ring kStages x (Bc, D) likewise
///   bars   q_full, k_full[kStages], v_full[kStages], empty[kStages], q_empty, item_full[2]:
///          8-byte mbarriers
///   anchor one fp32 word per consumer thread (512 B per consumer), written each tile, never read
///          (kernels.cu)
///   items  2 work items (int): the producer's slots that tell the consumers what comes next
///
///   D    Br   Bc   kStages  bytes                        sm_90 opt-in (227 KiB = 232,448 B)
///   64   192  128  4        24 K + 4 x 32 K + 2,696 =  158,344 B   yes, 1 block/SM (registers)
///   128  128  128  3        32 K + 3 x 64 K + 2,160 =  231,536 B   yes, 1 block/SM (912 B spare)
/// Why: a consumer warpgroup holds S (64, Bc) fp32 = Bc/2 registers per thread, P (64, Bc) 16-bit
/// = Bc/4 and O (64, D) fp32 = D/2: 64 + 32 + 64 = 160 at D = 128, Bc = 128 — inside the 240 that
/// setmaxnreg gives each of two consumers; 64 + 32 + 32 = 128 at D = 64, which fits the 160 that
/// each of three consumers can have (the register arithmetic: kProducerRegs, kConsumerRegs). A
/// third consumer at D = 128 would get the same 160 and need 160 for its tiles alone: it stays at
/// two. Bc = 128 is also wgmma's sweet spot (m64n128k16 for S). The ring is as deep as shared
/// memory allows: three stages at D = 128 (FA3 uses two with Bc = 176), four at D = 64 (more would
/// not be waited on: the producer is 1-2 tiles ahead at steady state).
//! [register_budget]
/// The SM's register file: 65,536 32-bit registers (sm_90), for the one block an SM runs.
inline constexpr int kRegisterFile = 65536;
/// Registers per thread a block of `threads` starts with: ptxas's cap from
/// __launch_bounds__(threads, 1), the register file over the threads rounded down to a multiple
/// of 8 — 168 for 384 threads, 128 for 512.
constexpr int launch_registers(int threads) {
  return kRegisterFile / threads / 8 * 8;
}
/// Registers per thread each of `consumers` consumer warpgroups can take with setmaxnreg once the
/// producer warpgroup has given back down to `producer`: what is left of the register file over
/// the consumers' threads, rounded down to a multiple of 8 (setmaxnreg's step) — with a producer
/// at 24, 240 for two consumers and 160 for three: FA3's values (hopper/flash_fwd_kernel_sm90.h,
/// whose producer keeps 32 with three consumers, which leaves the same 160).
constexpr int consumer_registers(int consumers, int producer) {
  return (kRegisterFile - producer * 128) / (consumers * 128) / 8 * 8;
}
//! [register_budget]

//! [traits]
template <int kD, int kBc, int kStages, int kConsumerWarpgroups>
struct HopperTraits {
  static constexpr int D = kD;
  static constexpr int kConsumers = kConsumerWarpgroups;  // consumer warpgroups, 64 rows each
  static constexpr int Br = 64 * kConsumers;              // query rows per thread block: 128 or 192
  static constexpr int Bc = kBc;                          // key/value rows per tile
  static constexpr int Stages = kStages;                  // (K_j, V_j) pairs in the ring
  static constexpr int kWarpgroupThreads = 128;
  static constexpr int kConsumerRows = Br / kConsumers;                  // 64: wgmma's m
  static constexpr int kThreads = (1 + kConsumers) * kWarpgroupThreads;  // 384 or 512
  static constexpr int kConsumerThreads = kConsumers * kWarpgroupThreads;
  // setmaxnreg budgets (register_budget, above): 168 at launch for 384 threads, 128 for 512; the
  // producer gives back down to 24, each consumer takes 240 of two, 160 of three.
  static constexpr int kLaunchRegs = launch_registers(kThreads);
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = consumer_registers(kConsumers, kProducerRegs);
  static constexpr int kElem = 2;  // bytes of fp16 and bf16
  static constexpr int kSwizzleBytes = 128;
  static constexpr int kBlockCols = kSwizzleBytes / kElem;  // 64 columns per 128-byte swizzled row
  static constexpr int kColBlocks = D / kBlockCols;         // column blocks of Q, K, V, O
  static constexpr int kAtomBytes = 8 * kSwizzleBytes;      // 1024: one swizzle atom (8 rows)

  // wgmma counts per consumer warpgroup and tile.
  static constexpr int kQK = D / 16;     // m64n{Bc}k16 for S = Q K^T
  static constexpr int kPV = Bc / 16;    // m64n{D}k16 for O += P V (A = P from registers)
  static constexpr int kSRegs = Bc / 2;  // S accumulator (64, Bc) fp32, per thread
  static constexpr int kORegs = D / 2;   // O accumulator (64, D) fp32, per thread

  static constexpr std::size_t kQBytes = std::size_t{Br} * D * kElem;
  static constexpr std::size_t kQBlockBytes = std::size_t{Br} * kSwizzleBytes;  // one col block
  static constexpr std::size_t kKVBytes = std::size_t{Bc} * D * kElem;          // K_j or V_j
  static constexpr std::size_t kKVBlockBytes = std::size_t{Bc} * kSwizzleBytes;
  static constexpr std::size_t kOffQ = 0;
  static constexpr std::size_t kOffK = kOffQ + kQBytes;            // stage s: + s * kKVBytes
  static constexpr std::size_t kOffV = kOffK + Stages * kKVBytes;  // stage s: + s * kKVBytes
  static constexpr std::size_t kOffBar = kOffV + Stages * kKVBytes;
  // q_full, k_full[], v_full[], empty[], then the persistent loop's: q_empty, item_full[2]
  static constexpr int kItemSlots = 2;
  static constexpr int kBarriers = 1 + 3 * Stages + 1 + kItemSlots;
  static constexpr std::size_t kBarBytes = kBarriers * sizeof(std::uint64_t);
  /// One fp32 word per consumer thread, written once per tile and never read: the store that
  /// holds the wait for P V below the softmax in the compiled code (kernels.cu, "anchor").
  static constexpr std::size_t kOffAnchor = kOffBar + kBarBytes;
  static constexpr std::size_t kAnchorBytes = std::size_t{kConsumerThreads} * sizeof(float);
  static constexpr std::size_t kOffItems = kOffAnchor + kAnchorBytes;  // int items[kItemSlots]
  static constexpr std::size_t kItemBytes = kItemSlots * sizeof(int);
  /// The runtime does not promise more than 16-byte alignment of dynamic shared memory; the kernel
  /// rounds its base up to 1024 and reserves the slack.
  static constexpr std::size_t kAlignSlack = 1024;
  /// Dynamic shared memory per block (the table above).
  static constexpr std::size_t kSmemBytes = kOffItems + kItemBytes + kAlignSlack;

  static_assert(D == 64 || D == 128, "stage 08c instantiates D = 64 and D = 128 only");
  static_assert(sizeof(__half) == kElem && sizeof(__nv_bfloat16) == kElem,
                "fp16 and bf16 are both 2-byte types");
  static_assert(kConsumerRows == 64, "a consumer warpgroup owns one wgmma m64 strip of Q_i");
  static_assert(kConsumers == 2 || kConsumers == 3,
                "one producer and two or three consumer warpgroups (kernels.cu has a turn and a "
                "store barrier for each of at most three consumers)");
  static_assert(kConsumerRegs >= kSRegs + kPV * 4 + kORegs + 32,
                "a consumer's registers hold S, P and O with 32 to spare (addresses, softmax "
                "state, loop counters)");
  static_assert(kConsumerRegs <= 256 && kLaunchRegs >= kProducerRegs,
                "setmaxnreg sets at most 256 registers, and the producer only gives back");
  static_assert(D % kBlockCols == 0,
                "TMA's 128B swizzle copies boxes at most 128 bytes wide: D is whole 64-column "
                "blocks");
  static_assert(Bc == 128, "S = Q K^T is one m64n128k16 wgmma per k16 step (ptx.cuh has n128)");
  static_assert(D == 64 || D == 128, "O += P V is m64n64k16 or m64n128k16 (ptx.cuh has both)");
  // The producer copies Q_i as one (Br, 64) box per column block (kernels.cu, [tma]): the box
  // has Br rows, not a consumer's 64.
  static_assert(Bc <= 256 && Br <= 256,
                "a TMA box has at most 256 rows: K_j and V_j are (Bc, 64) "
                "boxes, Q_i is one (Br, 64) box per column block");
  static_assert(kQBlockBytes % kAtomBytes == 0 && kKVBlockBytes % kAtomBytes == 0 &&
                    (std::size_t{kConsumerRows} * kSwizzleBytes) % kAtomBytes == 0,
                "every column block and every consumer's 64 rows of Q start on a 1024-byte "
                "swizzle atom: the wgmma descriptors' base offset field stays 0");
  static_assert(kKVBlockBytes / 16 < (1u << 14),
                "the V descriptor's leading byte offset (next 64 columns) fits 14 bits of 16 B");
  static_assert(kKVBytes < (1u << 20),
                "mbarrier expect_tx counts at most 2^20 - 1 bytes per phase");
  static_assert(Stages >= 2, "with one stage the copy of K_{j+1} could only start after tile j");
  static_assert(kItemSlots == 2,
                "the producer publishes item k+1 while the consumers may still read item k; item "
                "k+2 waits for q_empty of item k+1, by which every consumer has read item k");
  static_assert(kProducerRegs * kWarpgroupThreads + kConsumerRegs * kConsumerThreads <=
                    kLaunchRegs * kThreads,
                "the setmaxnreg budgets move only the registers the block was launched with");
  static_assert(kSmemBytes <= 227 * 1024, "fits sm_90's 227 KiB opt-in limit");
};
//! [traits]

//! [configs]
using TileD64 = HopperTraits<64, 128, 4, 3>;    // 155 KiB; Br = 192: 3 consumers at 160 registers
using TileD128 = HopperTraits<128, 128, 3, 2>;  // 225 KiB; Br = 128: 2 consumers at 240 registers
/// The tile head dim kD runs.
template <int kD>
using TileFor = std::conditional_t<kD == 64, TileD64, TileD128>;
//! [configs]
static_assert(TileD64::kConsumerRegs == 160 && TileD128::kConsumerRegs == 240,
              "the register arithmetic above: 160 for three consumers, 240 for two");
static_assert(TileD128::kSRegs + TileD128::kPV * 4 + TileD128::kORegs >
                  consumer_registers(3, TileD128::kProducerRegs) - 32,
              "why D = 128 keeps two consumers: with three, S, P and O alone would not leave a "
              "consumer its 32 spare registers");

/// The kernel's signature: the four tensor maps the launcher encodes (Q, K, V, O), LSE, the
/// dynamic schedule's counter (nullptr: the static schedule; scheduler.cuh), the shape.
template <class T, class Shape>
using PersistentKernel = void (*)(CUtensorMap, CUtensorMap, CUtensorMap, CUtensorMap, float*, int*,
                                  Shape);

/// What kernels.cu exports to the launcher (flashsteps/fused_stage.cuh): the launch's Shape and
/// the kernel's __global__ function for each variant <dtype, tile, causal> the launcher runs.
FS_FUSED_KERNEL_EXPORTS(PersistentKernel)

}  // namespace flashsteps::hopper
