// emu/include/fsemu/ptx.hpp — what flashsteps/cuda/ptx.cuh's wrappers run under the emulator:
// each is the instruction of the same name, executed by the instruction models (emu/src/model)
// as a warp- or warpgroup-collective operation.
#pragma once

#include <cstdint>

#include "fsemu/scheduler.hpp"

namespace fsemu::ptx {

/// ldmatrix.sync.aligned.m8n8.x{count}{.trans}.shared.b16 r, [addr]
void ldmatrix(int count, bool trans, std::uint32_t* r, std::uint32_t addr);
/// mma.sync.aligned.m16n8k16.row.col.f32.{f16|bf16}.{f16|bf16}.f32 acc, a, b, acc
void mma_m16n8k16(bool bf16, float* acc, const std::uint32_t* a, const std::uint32_t* b);
/// ex2.approx.ftz.f32
float ex2_approx_ftz(float x);
/// wgmma.fence / commit_group / wait_group
void wgmma_fence();
void wgmma_commit_group();
void wgmma_wait_group(int n);
/// wgmma.mma_async.sync.aligned.m64n{n}k16.f32.T.T d, (a-desc | {a regs}), b-desc, scale-d, 1, 1,
/// [tnsp-a = 0,] tnsp-b: A from shared memory when a_regs is null (K-major), else from registers.
void wgmma(bool bf16, int n, float* d, std::uint64_t desc_a, const std::uint32_t* a_regs,
           std::uint64_t desc_b, bool tnsp_b, int scale_d);
/// setmaxnreg.{inc|dec}.sync.aligned.u32 regs
void setmaxnreg(bool inc, int regs);

}  // namespace fsemu::ptx
