// emu/include/fsemu/model/tma.hpp — a pure model of TMA tensor maps and their tiled copies:
// cuTensorMapEncodeTiled (CUDA Driver API, "Tensor Map Object Managment") and
// cp.async.bulk.tensor in tile mode (PTX ISA, "Data Movement and Conversion Instructions:
// cp.async.bulk.tensor", with the "Tensor" sections of the state-space chapter). Global memory is
// host memory here: the map's global address is a host pointer the copies read and write.
//
// Modelled: interleave NONE, swizzle NONE / 32B / 64B / 128B, the element types of fixed size
// (every CUtensorMapDataType but the packed 16U4 / 16U6 ones), ranks 1 .. 5, element strides,
// zero and NaN out-of-bounds fill. encode_tiled refuses the rest with a message saying the
// emulator does not model it.
//
// Shared-memory layout of a box (what the copies write / read): the box's elements in row-major
// order, dimension 0 fastest, dense (the row pitch is boxDim[0] * element size, a multiple of
// 16 bytes), then each byte offset o relative to the box start goes through swizzle_offset().
// The swizzle is the XOR of the 16-byte chunk index (offset bits 4..) with the index of the
// 128-byte line inside the pattern's repeat (offset bits 7..): 1, 2 or 3 bits for 32B, 64B, 128B.
// It repeats every 256, 512 or 1024 bytes, which is also the alignment the copies require of the
// shared address with that swizzle (see tma_load_tile), so that the pattern, which the hardware
// takes from the shared address, is the same whether counted from the box start or from 0.
#pragma once

#include <cstdint>
#include <string>

#include "fsemu/model/fault.hpp"

namespace fsemu::model {

/// CUtensorMapDataType values (cuda.h), as the ints encode_tiled takes.
enum TensorMapDataType : int {
  kTmaUint8 = 0,
  kTmaUint16 = 1,
  kTmaUint32 = 2,
  kTmaInt32 = 3,
  kTmaUint64 = 4,
  kTmaInt64 = 5,
  kTmaFloat16 = 6,
  kTmaFloat32 = 7,
  kTmaFloat64 = 8,
  kTmaBfloat16 = 9,
  kTmaFloat32Ftz = 10,
  kTmaTfloat32 = 11,
  kTmaTfloat32Ftz = 12,
  kTma16U4Align8B = 13,
  kTma16U4Align16B = 14,
  kTma16U6Align16B = 15,
};
/// CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill.
enum TensorMapInterleave : int {
  kTmaInterleaveNone = 0,
  kTmaInterleave16B = 1,
  kTmaInterleave32B = 2
};
enum TensorMapSwizzle : int {
  kTmaSwizzleNone = 0,
  kTmaSwizzle32B = 1,
  kTmaSwizzle64B = 2,
  kTmaSwizzle128B = 3,
  kTmaSwizzle128BAtom32B = 4,
  kTmaSwizzle128BAtom32BFlip8B = 5,
  kTmaSwizzle128BAtom64B = 6,
};
enum TensorMapOobFill : int { kTmaOobFillNone = 0, kTmaOobFillNanRequestZeroFma = 1 };

/// The emulator's CUtensorMap contents: 128 bytes, 64-byte aligned (the alignment
/// cuTensorMapEncodeTiled demands of the map). Written only by encode_tiled; decode() checks the
/// magic and a checksum, so a map not made by encode_tiled (or changed since) is a Fault.
struct alignas(64) TensorMap {
  static constexpr std::uint32_t kMagic = 0x544D4150u;  // "TMAP"

  std::uint32_t magic;
  std::uint8_t rank;          // 1 .. 5
  std::uint8_t data_type;     // CUtensorMapDataType
  std::uint8_t elem_bytes;    // size of one element
  std::uint8_t interleave;    // CUtensorMapInterleave (only NONE is modelled)
  std::uint8_t swizzle;       // CUtensorMapSwizzle (NONE, 32B, 64B, 128B)
  std::uint8_t l2_promotion;  // CUtensorMapL2promotion (a hint: no effect here)
  std::uint8_t oob_fill;      // CUtensorMapFloatOOBfill
  std::uint8_t reserved0;
  std::uint16_t box[5];          // boxDim, 1 .. 256 (unused dims 0)
  std::uint8_t elem_strides[5];  // elementStrides, 1 .. 8 (unused dims 0)
  std::uint8_t reserved1;
  std::uint64_t global_address;  // host address of element (0, ..., 0)
  std::uint64_t dims[5];         // globalDim, 1 .. 2^32 (unused dims 0)
  std::uint64_t strides[5];      // bytes; strides[0] = elem_bytes, strides[i] = globalStrides[i-1]
  std::uint64_t checksum;        // of the 120 bytes above

  /// Swizzle span in bytes: 0, 32, 64 or 128.
  std::uint32_t swizzle_bytes() const;
  /// Elements the box holds along dimension i: boxDim[i] / elementStrides[i], rounded up
  /// (elementStrides[0] is ignored: dimension 0 is always traversed with stride 1).
  std::uint32_t box_extent(std::uint32_t i) const;
  /// Bytes of one box in shared memory (every element, in bounds or not).
  std::uint64_t box_bytes() const;
};
static_assert(sizeof(TensorMap) == 128, "a CUtensorMap is 128 bytes");

/// cuTensorMapEncodeTiled. Checks every requirement the driver API documentation states, in its
/// order; on success writes the map into out128 (128 bytes, 64-byte aligned) and returns "",
/// otherwise returns a sentence naming the broken rule and the value that broke it (the caller
/// turns it into CUDA_ERROR_INVALID_VALUE) and leaves out128 untouched.
std::string encode_tiled(void* out128, int data_type, std::uint32_t rank, void* global_address,
                         const std::uint64_t* global_dim, const std::uint64_t* global_strides,
                         const std::uint32_t* box_dim, const std::uint32_t* element_strides,
                         int interleave, int swizzle, int l2_promotion, int oob_fill);

/// The map a kernel received. Fault if map128 is null or not 64-byte aligned, or if its magic or
/// checksum is wrong (not made by encode_tiled, or overwritten).
const TensorMap& decode(const void* map128);

/// cp.async.bulk.tensor.Nd.shared::cluster.global.tile.mbarrier::complete_tx::bytes: copies the
/// box whose first element is at coords[0 .. rank-1] (signed; dimension 0 first) into shared
/// memory at dst. dst must be 128-byte aligned, and with a swizzle aligned to the pattern's repeat
/// (256, 512, 1024 bytes for 32B, 64B, 128B); Fault otherwise, or if the box leaves the window.
/// Elements outside [0, globalDim) in any dimension are not read: they are filled with zero, or
/// with a quiet NaN of the element type when the map says FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA.
/// Returns the bytes the copy signals with complete-tx: the full box, out-of-bounds elements
/// included.
std::uint32_t tma_load_tile(const TensorMap& map, const std::int32_t* coords, SharedWindow& smem,
                            std::uint32_t dst);

/// cp.async.bulk.tensor.Nd.global.shared::cta.tile.bulk_group: the reverse copy, box from shared
/// memory at src (same alignment and layout as the load) to the tensor at coords. Elements
/// outside the tensor are not written.
void tma_store_tile(const TensorMap& map, const std::int32_t* coords, const SharedWindow& smem,
                    std::uint32_t src);

/// The swizzle as a function: the shared byte offset, relative to a box start aligned to the
/// pattern's repeat, of byte `offset` of the unswizzled (dense row-major) box. swizzle_bytes is
/// 0 (identity), 32, 64 or 128; anything else is a Fault.
std::uint32_t swizzle_offset(int swizzle_bytes, std::uint32_t offset);

}  // namespace fsemu::model
