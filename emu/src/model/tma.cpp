// emu/src/model/tma.cpp — tensor maps and tiled TMA copies (tma.hpp). The requirements quoted
// are those of the CUDA Driver API's cuTensorMapEncodeTiled ("Tensor Map Object Managment") and
// of the PTX ISA's cp.async.bulk.tensor and "Tensor" sections ("Tensor Swizzling Modes",
// out-of-bound access of a bounding box).
#include "fsemu/model/tma.hpp"

#include <cstring>

namespace fsemu::model {

namespace {

constexpr const char* kEncode = "cuTensorMapEncodeTiled: ";

std::string n(std::uint64_t v) {
  return std::to_string(v);
}
std::string si(std::int64_t v) {
  return std::to_string(v);
}

// Element sizes of CUtensorMapDataType 0 .. 12, in the order of the driver API's table; the
// packed 4- and 6-bit types (13 .. 15) are not modelled.
constexpr std::uint8_t kElemBytes[13] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};

bool is_float_type(int t) {
  return t == kTmaFloat16 || t == kTmaFloat32 || t == kTmaFloat64 || t == kTmaBfloat16 ||
         t == kTmaFloat32Ftz || t == kTmaTfloat32 || t == kTmaTfloat32Ftz;
}

std::uint64_t checksum_of(const TensorMap& m) {
  // FNV-1a over the bytes before the checksum field.
  unsigned char bytes[sizeof(TensorMap)];
  std::memcpy(bytes, &m, sizeof(TensorMap));
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < offsetof(TensorMap, checksum); ++i) {
    h ^= bytes[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

std::uint32_t swizzle_span(int mode) {
  switch (mode) {
    case kTmaSwizzle32B:
      return 32;
    case kTmaSwizzle64B:
      return 64;
    case kTmaSwizzle128B:
      return 128;
    default:
      return 0;
  }
}

// The quiet NaN written for FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA ("a special NaN constant"; the
// driver API does not give its bits, the model uses the canonical quiet NaN of the type).
void nan_bytes(int type, unsigned char* out) {
  switch (type) {
    case kTmaFloat16: {
      const std::uint16_t v = 0x7E00;
      std::memcpy(out, &v, 2);
      return;
    }
    case kTmaBfloat16: {
      const std::uint16_t v = 0x7FC0;
      std::memcpy(out, &v, 2);
      return;
    }
    case kTmaFloat64: {
      const std::uint64_t v = 0x7FF8000000000000ull;
      std::memcpy(out, &v, 8);
      return;
    }
    default: {  // FLOAT32, FLOAT32_FTZ, TFLOAT32, TFLOAT32_FTZ
      const std::uint32_t v = 0x7FC00000u;
      std::memcpy(out, &v, 4);
      return;
    }
  }
}

// Checks of cp.async.bulk.tensor shared by load and store; returns the box's bytes.
std::uint64_t check_copy(const TensorMap& map, const std::int32_t* coords, const SharedWindow& smem,
                         std::uint32_t saddr, const char* what) {
  if (coords == nullptr) throw Fault(std::string(what) + ": no tensor coordinates");
  // Shared memory address: 128-byte aligned for tensor copies; with a swizzle mode, aligned to
  // the repeat of the swizzle pattern (PTX ISA, Tensor Swizzling Modes: 256, 512, 1024 bytes for
  // 32B, 64B, 128B).
  const std::uint32_t span = map.swizzle_bytes();
  const std::uint32_t align = span == 0 ? 128u : span * 8u;
  if (saddr % align != 0)
    throw Fault(std::string(what) + ": shared address 0x" + SharedWindow::hex(saddr) + " is not " +
                n(align) + "-byte aligned" +
                (span == 0 ? std::string(" (tensor copies need 128-byte aligned shared memory)")
                           : " (a " + n(span) + "B-swizzled box must start on the " + n(align) +
                                 "-byte repeat of the swizzle pattern: PTX ISA, Tensor Swizzling "
                                 "Modes)"));
  if (map.global_address == 0)
    throw Fault(std::string(what) + ": the tensor map's global address is null");
  const std::uint64_t bytes = map.box_bytes();
  smem.check(saddr, static_cast<std::uint32_t>(bytes > 0xFFFFFFFFull ? 0xFFFFFFFFull : bytes),
             what);
  return bytes;
}

// Calls f(shared byte offset within the box (unswizzled), global byte offset, in_bounds) for every
// element of the box at coords, dimension 0 fastest.
template <class F>
void for_each_box_element(const TensorMap& map, const std::int32_t* coords, F&& f) {
  std::uint32_t extent[5] = {1, 1, 1, 1, 1};
  std::int64_t step[5] = {1, 1, 1, 1, 1};
  for (std::uint32_t d = 0; d < map.rank; ++d) {
    extent[d] = map.box_extent(d);
    step[d] = d == 0 ? 1 : map.elem_strides[d];
  }
  const std::uint32_t eb = map.elem_bytes;
  std::uint64_t soff = 0;
  std::uint32_t k[5] = {0, 0, 0, 0, 0};
  for (k[4] = 0; k[4] < extent[4]; ++k[4])
    for (k[3] = 0; k[3] < extent[3]; ++k[3])
      for (k[2] = 0; k[2] < extent[2]; ++k[2])
        for (k[1] = 0; k[1] < extent[1]; ++k[1]) {
          // The row's coordinates in dimensions 1.., and whether they lie inside the tensor.
          bool row_in = true;
          std::int64_t row_goff = 0;
          for (std::uint32_t d = 1; d < map.rank; ++d) {
            const std::int64_t g = std::int64_t{coords[d]} + std::int64_t{k[d]} * step[d];
            if (g < 0 || static_cast<std::uint64_t>(g) >= map.dims[d])
              row_in = false;
            else
              row_goff += g * static_cast<std::int64_t>(map.strides[d]);
          }
          for (k[0] = 0; k[0] < extent[0]; ++k[0], soff += eb) {
            const std::int64_t g0 = std::int64_t{coords[0]} + k[0];
            const bool in = row_in && g0 >= 0 && static_cast<std::uint64_t>(g0) < map.dims[0];
            f(soff, in ? row_goff + g0 * eb : 0, in);
          }
        }
}

}  // namespace

std::uint32_t TensorMap::swizzle_bytes() const {
  return swizzle_span(swizzle);
}

std::uint32_t TensorMap::box_extent(std::uint32_t i) const {
  if (i >= rank) return 1;
  const std::uint32_t s = i == 0 ? 1u : elem_strides[i];
  return (box[i] + s - 1) / s;
}

std::uint64_t TensorMap::box_bytes() const {
  std::uint64_t b = elem_bytes;
  for (std::uint32_t i = 0; i < rank; ++i)
    b *= box_extent(i);
  return b;
}

std::uint32_t swizzle_offset(int swizzle_bytes, std::uint32_t offset) {
  // PTX ISA, Tensor Swizzling Modes; the same patterns as CUTLASS's Swizzle<B, 4, 3> with B = 1, 2,
  // 3 (cute/atom/copy_traits_sm90_tma_swizzle.hpp): the 16-byte chunk index (bits 4..) XOR the
  // 128-byte line index within the repeat (bits 7..), B bits of each.
  std::uint32_t mask;
  switch (swizzle_bytes) {
    case 0:
      return offset;
    case 32:
      mask = 1;
      break;
    case 64:
      mask = 3;
      break;
    case 128:
      mask = 7;
      break;
    default:
      throw Fault("swizzle: " + std::to_string(swizzle_bytes) +
                  "-byte swizzle is not one of 0, 32, 64, 128");
  }
  return offset ^ (((offset >> 7) & mask) << 4);
}

std::string encode_tiled(void* out128, int data_type, std::uint32_t rank, void* global_address,
                         const std::uint64_t* global_dim, const std::uint64_t* global_strides,
                         const std::uint32_t* box_dim, const std::uint32_t* element_strides,
                         int interleave, int swizzle, int l2_promotion, int oob_fill) {
  const std::string e = kEncode;
  // tensorMap address must be aligned to 64 bytes.
  if (out128 == nullptr) return e + "tensorMap is null";
  if (reinterpret_cast<std::uintptr_t>(out128) % 64 != 0)
    return e + "tensorMap address 0x" +
           SharedWindow::hex(reinterpret_cast<std::uintptr_t>(out128)) +
           " is not aligned to 64 bytes";
  // tensorDataType has to be an enum from CUtensorMapDataType.
  if (data_type < 0 || data_type > kTma16U6Align16B)
    return e + "tensorDataType " + si(data_type) + " is not a CUtensorMapDataType";
  if (data_type >= kTma16U4Align8B)
    return e + "tensorDataType " + si(data_type) +
           " (a packed 16 x U4 / U6 type) is not modelled by the emulator";
  const std::uint32_t eb = kElemBytes[data_type];
  // tensorRank must be non-zero and <= 5; with interleave, >= 3.
  if (rank == 0 || rank > 5)
    return e + "tensorRank " + n(rank) + " is not in 1 .. 5 (the maximum dimensionality is 5)";
  if (interleave < kTmaInterleaveNone || interleave > kTmaInterleave32B)
    return e + "interleave " + si(interleave) + " is not a CUtensorMapInterleave";
  if (interleave != kTmaInterleaveNone && rank < 3)
    return e + "tensorRank " + n(rank) + " must be >= 3 when interleave is not INTERLEAVE_NONE";
  // globalAddress 16-byte aligned (32 with INTERLEAVE_32B).
  const auto addr = reinterpret_cast<std::uintptr_t>(global_address);
  if (addr % 16 != 0)
    return e + "globalAddress 0x" + SharedWindow::hex(addr) + " is not 16-byte aligned";
  if (interleave == kTmaInterleave32B && addr % 32 != 0)
    return e + "globalAddress 0x" + SharedWindow::hex(addr) +
           " is not 32-byte aligned (required with INTERLEAVE_32B)";
  // globalDim: non-zero and <= 2^32.
  if (global_dim == nullptr) return e + "globalDim is null";
  for (std::uint32_t i = 0; i < rank; ++i)
    if (global_dim[i] == 0 || global_dim[i] > (std::uint64_t{1} << 32))
      return e + "globalDim[" + n(i) + "] = " + n(global_dim[i]) + " is not in 1 .. 2^32";
  // globalStrides (rank - 1 entries, bytes): multiples of 16 (32 with INTERLEAVE_32B), < 2^40,
  // and, as the documented formula builds them, each stride includes the previous dimension:
  // globalStrides[0] >= globalDim[0] * elementSize, globalStrides[i] >= globalStrides[i-1] *
  // globalDim[i] (the formula's paddings are >= 0).
  if (rank > 1 && global_strides == nullptr) return e + "globalStrides is null";
  for (std::uint32_t i = 0; i + 1 < rank; ++i) {
    const std::uint64_t s = global_strides[i];
    if (s % 16 != 0)
      return e + "globalStrides[" + n(i) + "] = " + n(s) + " bytes is not a multiple of 16";
    if (interleave == kTmaInterleave32B && s % 32 != 0)
      return e + "globalStrides[" + n(i) + "] = " + n(s) +
             " bytes is not a multiple of 32 (required with INTERLEAVE_32B)";
    if (s >= (std::uint64_t{1} << 40))
      return e + "globalStrides[" + n(i) + "] = " + n(s) + " bytes is not less than 2^40";
    // s < a * b exactly when s / b < a (integer division), without forming a * b.
    const std::uint64_t a = i == 0 ? global_dim[0] : global_strides[i - 1];
    const std::uint64_t b = i == 0 ? eb : global_dim[i];
    if (interleave == kTmaInterleaveNone && s / b < a)
      return e + "globalStrides[" + n(i) + "] = " + n(s) + " bytes is less than " +
             (i == 0 ? "globalDim[0] * element size = "
                     : "globalStrides[" + n(i - 1) + "] * globalDim[" + n(i) + "] = ") +
             (a <= ~std::uint64_t{0} / b ? n(a * b) : n(a) + " * " + n(b)) +
             " (each stride includes the previous dimension's)";
  }
  // boxDim: non-zero, <= 256; with INTERLEAVE_NONE, boxDim[0] * element size a multiple of 16.
  if (box_dim == nullptr) return e + "boxDim is null";
  for (std::uint32_t i = 0; i < rank; ++i)
    if (box_dim[i] == 0 || box_dim[i] > 256)
      return e + "boxDim[" + n(i) + "] = " + n(box_dim[i]) + " is not in 1 .. 256";
  if (interleave == kTmaInterleaveNone && (std::uint64_t{box_dim[0]} * eb) % 16 != 0)
    return e + "boxDim[0] * element size = " + n(std::uint64_t{box_dim[0]} * eb) +
           " bytes is not a multiple of 16";
  // elementStrides: non-zero, <= 8.
  if (element_strides == nullptr) return e + "elementStrides is null";
  for (std::uint32_t i = 0; i < rank; ++i)
    if (element_strides[i] == 0 || element_strides[i] > 8)
      return e + "elementStrides[" + n(i) + "] = " + n(element_strides[i]) + " is not in 1 .. 8";
  // swizzle: a CUtensorMapSwizzle; INTERLEAVE_32B requires SWIZZLE_32B; with INTERLEAVE_NONE and a
  // swizzle, the box's inner dimension (boxDim[0] * element size) <= the swizzle span.
  if (swizzle < kTmaSwizzleNone || swizzle > kTmaSwizzle128BAtom64B)
    return e + "swizzle " + si(swizzle) + " is not a CUtensorMapSwizzle";
  if (interleave == kTmaInterleave32B && swizzle != kTmaSwizzle32B)
    return e + "swizzle " + si(swizzle) + " must be SWIZZLE_32B when interleave is INTERLEAVE_32B";
  if (interleave == kTmaInterleaveNone && swizzle != kTmaSwizzleNone) {
    const std::uint32_t span = swizzle >= kTmaSwizzle128B ? 128u : swizzle_span(swizzle);
    if (std::uint64_t{box_dim[0]} * eb > span)
      return e + "the box's inner dimension boxDim[0] * element size = " +
             n(std::uint64_t{box_dim[0]} * eb) + " bytes exceeds the " + n(span) +
             "-byte swizzle span";
  }
  // l2Promotion and oobFill: enums; NaN fill only for floating-point types.
  if (l2_promotion < 0 || l2_promotion > 3)
    return e + "l2Promotion " + si(l2_promotion) + " is not a CUtensorMapL2promotion";
  if (oob_fill != kTmaOobFillNone && oob_fill != kTmaOobFillNanRequestZeroFma)
    return e + "oobFill " + si(oob_fill) + " is not a CUtensorMapFloatOOBfill";
  if (oob_fill == kTmaOobFillNanRequestZeroFma && !is_float_type(data_type))
    return e +
           "oobFill FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA needs a floating-point tensorDataType "
           "(got " +
           si(data_type) + ")";
  // Valid by the documentation, but beyond the model.
  if (interleave != kTmaInterleaveNone)
    return e + "interleave " + si(interleave) + " is not modelled by the emulator";
  if (swizzle > kTmaSwizzle128B)
    return e + "swizzle " + si(swizzle) +
           " (a 128B swizzle with 32B / 64B atoms) is not "
           "modelled by the emulator";

  TensorMap m;
  std::memset(&m, 0, sizeof m);
  m.magic = TensorMap::kMagic;
  m.rank = static_cast<std::uint8_t>(rank);
  m.data_type = static_cast<std::uint8_t>(data_type);
  m.elem_bytes = static_cast<std::uint8_t>(eb);
  m.interleave = static_cast<std::uint8_t>(interleave);
  m.swizzle = static_cast<std::uint8_t>(swizzle);
  m.l2_promotion = static_cast<std::uint8_t>(l2_promotion);
  m.oob_fill = static_cast<std::uint8_t>(oob_fill);
  m.global_address = addr;
  m.strides[0] = eb;
  for (std::uint32_t i = 0; i < rank; ++i) {
    m.box[i] = static_cast<std::uint16_t>(box_dim[i]);
    m.elem_strides[i] = static_cast<std::uint8_t>(element_strides[i]);
    m.dims[i] = global_dim[i];
    if (i > 0) m.strides[i] = global_strides[i - 1];
  }
  m.checksum = checksum_of(m);
  std::memcpy(out128, &m, sizeof m);
  return {};
}

const TensorMap& decode(const void* map128) {
  if (map128 == nullptr) throw Fault("tensor map: null CUtensorMap pointer");
  if (reinterpret_cast<std::uintptr_t>(map128) % 64 != 0)
    throw Fault("tensor map: the CUtensorMap at 0x" +
                SharedWindow::hex(reinterpret_cast<std::uintptr_t>(map128)) +
                " is not 64-byte aligned");
  const auto& m = *static_cast<const TensorMap*>(map128);
  if (m.magic != TensorMap::kMagic)
    throw Fault("tensor map: the CUtensorMap was not made by cuTensorMapEncodeTiled (magic 0x" +
                SharedWindow::hex(m.magic) + ")");
  if (m.checksum != checksum_of(m))
    throw Fault(
        "tensor map: the CUtensorMap was changed after cuTensorMapEncodeTiled wrote it "
        "(checksum mismatch); it is opaque");
  return m;
}

std::uint32_t tma_load_tile(const TensorMap& map, const std::int32_t* coords, SharedWindow& smem,
                            std::uint32_t dst) {
  const char* what = "cp.async.bulk.tensor (load)";
  const std::uint64_t bytes = check_copy(map, coords, smem, dst, what);
  const int span = static_cast<int>(map.swizzle_bytes());
  const std::uint32_t eb = map.elem_bytes;
  unsigned char fill[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (map.oob_fill == kTmaOobFillNanRequestZeroFma) nan_bytes(map.data_type, fill);
  const auto* g = reinterpret_cast<const unsigned char*>(map.global_address);
  for_each_box_element(map, coords, [&](std::uint64_t soff, std::int64_t goff, bool in) {
    // Element size <= 16 and the swizzle moves whole 16-byte chunks: an element stays in one.
    const std::uint32_t a = dst + swizzle_offset(span, static_cast<std::uint32_t>(soff));
    smem.check(a, eb, what);
    std::memcpy(smem.base + a, in ? g + goff : fill, eb);
  });
  return static_cast<std::uint32_t>(bytes);
}

void tma_store_tile(const TensorMap& map, const std::int32_t* coords, const SharedWindow& smem,
                    std::uint32_t src) {
  const char* what = "cp.async.bulk.tensor (store)";
  check_copy(map, coords, smem, src, what);
  const int span = static_cast<int>(map.swizzle_bytes());
  const std::uint32_t eb = map.elem_bytes;
  auto* g = reinterpret_cast<unsigned char*>(map.global_address);
  for_each_box_element(map, coords, [&](std::uint64_t soff, std::int64_t goff, bool in) {
    if (!in) return;  // out-of-bounds elements are not written
    const std::uint32_t a = src + swizzle_offset(span, static_cast<std::uint32_t>(soff));
    smem.check(a, eb, what);
    std::memcpy(g + goff, smem.base + a, eb);
  });
}

}  // namespace fsemu::model
