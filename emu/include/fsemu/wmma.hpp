// emu/include/fsemu/wmma.hpp — the emulator's WMMA m16n16k16 (see emu/shim/mma.h for the layout
// and the rules checked). Fragments are passed as their element arrays.
#pragma once

namespace fsemu::wmma {

inline constexpr int kPerLane = 8;  // 256 elements of a 16 x 16 fragment over 32 lanes
enum class Use { a, b, acc };
enum class Type { f16, bf16, f32 };

/// load_matrix_sync: the fragment's logical matrix from `p` (row-major unless col_major).
void load(Use use, Type type, bool col_major, void* x, const void* p, unsigned ldm);
/// store_matrix_sync of an accumulator.
void store(Type type, bool col_major, const void* x, void* p, unsigned ldm);
/// mma_sync: d = a * b + c (fp32 accumulators; d may alias c).
void mma(Type ab, const void* a, const void* b, const float* c, float* d);

}  // namespace fsemu::wmma
