// emu/tests/test_tma.cpp — tensor maps and tiled TMA copies against the CUDA Driver API's
// cuTensorMapEncodeTiled requirements and the PTX ISA's cp.async.bulk.tensor (tile mode) and
// "Tensor Swizzling Modes". Every expected value is computed here from the documented layout
// (element (r, c) of a box at r * row pitch + c * element size, chunks of 128B-swizzled rows at
// c ^ (r % 8), ...), never read back from the model.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "flashsteps_catch.hpp"
#include "fsemu/model/fault.hpp"
#include "fsemu/model/tma.hpp"

#if __has_include(<cuda.h>)
#include <cuda.h>
#define FSEMU_TEST_HAVE_CUDA_H 1
#endif

using Catch::Matchers::ContainsSubstring;
namespace m = fsemu::model;

#ifdef FSEMU_TEST_HAVE_CUDA_H
static_assert(int{m::kTmaUint8} == int{CU_TENSOR_MAP_DATA_TYPE_UINT8});
static_assert(int{m::kTmaFloat16} == int{CU_TENSOR_MAP_DATA_TYPE_FLOAT16});
static_assert(int{m::kTmaFloat32} == int{CU_TENSOR_MAP_DATA_TYPE_FLOAT32});
static_assert(int{m::kTmaBfloat16} == int{CU_TENSOR_MAP_DATA_TYPE_BFLOAT16});
static_assert(int{m::kTmaTfloat32Ftz} == int{CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ});
static_assert(int{m::kTma16U6Align16B} == int{CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B});
static_assert(int{m::kTmaSwizzle128B} == int{CU_TENSOR_MAP_SWIZZLE_128B});
static_assert(int{m::kTmaSwizzle128BAtom64B} == int{CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B});
static_assert(int{m::kTmaInterleave32B} == int{CU_TENSOR_MAP_INTERLEAVE_32B});
static_assert(int{m::kTmaOobFillNanRequestZeroFma} ==
              int{CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA});
static_assert(sizeof(m::TensorMap) == sizeof(CUtensorMap));
#endif

namespace {

// Host "global memory" with a chosen alignment.
struct Buffer {
  explicit Buffer(std::size_t bytes, std::size_t align = 256)
      : p(static_cast<unsigned char*>(::operator new (bytes, std::align_val_t{align}))),
        a(align),
        size(bytes) {}
  ~Buffer() { ::operator delete (p, std::align_val_t{a}); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  template <class T>
  T get(std::size_t byte) const {
    T v;
    std::memcpy(&v, p + byte, sizeof v);
    return v;
  }
  template <class T>
  void set(std::size_t byte, T v) {
    std::memcpy(p + byte, &v, sizeof v);
  }
  unsigned char* p;
  std::size_t a;
  std::size_t size;
};

// A block's shared memory.
struct Smem {
  explicit Smem(std::uint32_t bytes) : mem(bytes, 0xAB) { win = {mem.data(), bytes}; }
  std::uint16_t u16(std::uint32_t addr) const {
    std::uint16_t v;
    std::memcpy(&v, mem.data() + addr, 2);
    return v;
  }
  std::vector<std::uint8_t> mem;
  m::SharedWindow win;
};

// Arguments of cuTensorMapEncodeTiled, valid by default: a 2-D fp16 tensor of 100 x 64 (rows x
// columns, columns innermost), rows 128 bytes apart, box 64 columns x 32 rows, 128B swizzle.
struct Args {
  int type = m::kTmaFloat16;
  std::uint32_t rank = 2;
  void* addr = nullptr;
  std::uint64_t dims[5] = {64, 100, 1, 1, 1};
  std::uint64_t strides[4] = {128, 128 * 100, 0, 0};
  std::uint32_t box[5] = {64, 32, 1, 1, 1};
  std::uint32_t es[5] = {1, 1, 1, 1, 1};
  int interleave = m::kTmaInterleaveNone;
  int swizzle = m::kTmaSwizzle128B;
  int l2 = 0;
  int oob = m::kTmaOobFillNone;
  std::string encode(void* out) const {
    return m::encode_tiled(out, type, rank, addr, dims, strides, box, es, interleave, swizzle, l2,
                           oob);
  }
};

struct alignas(64) MapStorage {
  unsigned char bytes[128];
};

std::uint16_t pattern16(std::uint64_t i) {
  return static_cast<std::uint16_t>(i * 2654435761u >> 7);
}

}  // namespace

TEST_CASE("tma: the emulated CUtensorMap is 128 bytes, 64-byte aligned") {
  CHECK(sizeof(m::TensorMap) == 128);
  CHECK(alignof(m::TensorMap) == 64);
}

TEST_CASE("tma: element sizes of the data types") {
  Buffer g(4096);
  const struct {
    int type;
    unsigned bytes;
  } cases[] = {{m::kTmaUint8, 1},      {m::kTmaUint16, 2},     {m::kTmaUint32, 4},
               {m::kTmaInt32, 4},      {m::kTmaUint64, 8},     {m::kTmaInt64, 8},
               {m::kTmaFloat16, 2},    {m::kTmaFloat32, 4},    {m::kTmaFloat64, 8},
               {m::kTmaBfloat16, 2},   {m::kTmaFloat32Ftz, 4}, {m::kTmaTfloat32, 4},
               {m::kTmaTfloat32Ftz, 4}};
  for (const auto& c : cases) {
    INFO("type " << c.type);
    Args a;
    a.type = c.type;
    a.addr = g.p;
    a.rank = 1;
    a.dims[0] = 256;
    a.box[0] = 16;  // 16, 32, 64 or 128 bytes: multiples of 16
    a.swizzle = m::kTmaSwizzleNone;
    MapStorage s;
    REQUIRE(a.encode(&s) == "");
    const m::TensorMap& t = m::decode(&s);
    CHECK(t.elem_bytes == c.bytes);
    CHECK(t.box_bytes() == 16u * c.bytes);
  }
}

TEST_CASE("tma: encode_tiled accepts the Hopper stages' 3-D map and decode returns it") {
  // [B*H = 3, rows = 100, D = 128] fp16, box (64 columns, 128 rows, 1 head), 128B swizzle.
  Buffer g(3 * 100 * 128 * 2);
  Args a;
  a.addr = g.p;
  a.rank = 3;
  a.dims[0] = 128, a.dims[1] = 100, a.dims[2] = 3;
  a.strides[0] = 128 * 2, a.strides[1] = 100 * 128 * 2;
  a.box[0] = 64, a.box[1] = 128, a.box[2] = 1;
  a.l2 = 3;  // L2_256B
  MapStorage s;
  REQUIRE(a.encode(&s) == "");
  const m::TensorMap& t = m::decode(&s);
  CHECK(t.rank == 3);
  CHECK(t.elem_bytes == 2);
  CHECK(t.global_address == reinterpret_cast<std::uintptr_t>(g.p));
  CHECK(t.dims[0] == 128);
  CHECK(t.dims[2] == 3);
  CHECK(t.strides[0] == 2);
  CHECK(t.strides[1] == 256);
  CHECK(t.strides[2] == 25600);
  CHECK(t.box[1] == 128);
  CHECK(t.swizzle_bytes() == 128);
  CHECK(t.box_bytes() == 64 * 128 * 2);
}

TEST_CASE("tma: encode_tiled refuses each documented rule, naming it") {
  Buffer g(1 << 16);
  Args ok;
  ok.addr = g.p;
  MapStorage s;
  REQUIRE(ok.encode(&s) == "");
  auto refuse = [&](const Args& a, const std::string& what) {
    MapStorage out;
    std::memset(&out, 0x5A, sizeof out);
    const std::string r = a.encode(&out);
    INFO(r);
    CHECK_THAT(r, ContainsSubstring(what));
    CHECK_THAT(r, ContainsSubstring("cuTensorMapEncodeTiled"));
    CHECK(out.bytes[0] == 0x5A);  // nothing written
  };
  Args a = ok;
  SECTION("tensorMap aligned to 64 bytes") {
    alignas(64) unsigned char buf[256];
    CHECK_THAT(a.encode(buf + 32), ContainsSubstring("not aligned to 64 bytes"));
  }
  SECTION("data type an enum") {
    a.type = 16;
    refuse(a, "tensorDataType 16 is not a CUtensorMapDataType");
    a.type = -1;
    refuse(a, "tensorDataType -1");
  }
  SECTION("packed data types are not modelled") {
    a.type = m::kTma16U4Align8B;
    refuse(a, "not modelled");
  }
  SECTION("rank 1 .. 5") {
    a.rank = 0;
    refuse(a, "tensorRank 0 is not in 1 .. 5");
    a.rank = 6;
    refuse(a, "tensorRank 6");
  }
  SECTION("rank >= 3 with interleave") {
    a.interleave = m::kTmaInterleave16B;
    a.swizzle = m::kTmaSwizzleNone;
    refuse(a, "must be >= 3 when interleave");
  }
  SECTION("global address 16-byte aligned") {
    a.addr = g.p + 8;
    refuse(a, "globalAddress 0x");
    refuse(a, "is not 16-byte aligned");
  }
  SECTION("global address 32-byte aligned with INTERLEAVE_32B") {
    a.rank = 3;
    a.dims[2] = 2;
    a.strides[1] = 128 * 100;
    a.interleave = m::kTmaInterleave32B;
    a.swizzle = m::kTmaSwizzle32B;
    a.box[0] = 16;
    a.addr = g.p + 16;
    refuse(a, "not 32-byte aligned");
  }
  SECTION("global dims 1 .. 2^32") {
    a.dims[1] = 0;
    refuse(a, "globalDim[1] = 0 is not in 1 .. 2^32");
    a.dims[1] = (std::uint64_t{1} << 32) + 1;
    refuse(a, "globalDim[1] = 4294967297");
  }
  SECTION("global dim 2^32 is valid") {
    a.dims[1] = std::uint64_t{1} << 32;
    a.rank = 2;
    CHECK(a.encode(&s) == "");
  }
  SECTION("strides multiples of 16") {
    a.strides[0] = 136;
    refuse(a, "globalStrides[0] = 136 bytes is not a multiple of 16");
  }
  SECTION("strides multiples of 32 with INTERLEAVE_32B") {
    a.rank = 3;
    a.dims[2] = 2;
    a.strides[0] = 144;
    a.strides[1] = 144 * 100;
    a.interleave = m::kTmaInterleave32B;
    a.swizzle = m::kTmaSwizzle32B;
    a.box[0] = 16;
    refuse(a, "not a multiple of 32");
  }
  SECTION("strides < 2^40") {
    a.strides[0] = std::uint64_t{1} << 40;
    refuse(a, "is not less than 2^40");
  }
  SECTION("a stride includes the previous dimension") {
    a.strides[0] = 112;  // < 64 columns * 2 bytes
    refuse(a, "globalStrides[0] = 112 bytes is less than globalDim[0] * element size = 128");
    a.strides[0] = 128;
    a.rank = 3;
    a.dims[2] = 2;
    a.strides[1] = 128 * 99;
    refuse(a,
           "globalStrides[1] = 12672 bytes is less than globalStrides[0] * globalDim[1] = 12800");
  }
  SECTION("box dims 1 .. 256") {
    a.box[1] = 0;
    refuse(a, "boxDim[1] = 0 is not in 1 .. 256");
    a.box[1] = 257;
    refuse(a, "boxDim[1] = 257");
  }
  SECTION("inner box bytes a multiple of 16") {
    a.swizzle = m::kTmaSwizzleNone;
    a.box[0] = 12;
    refuse(a, "boxDim[0] * element size = 24 bytes is not a multiple of 16");
  }
  SECTION("element strides 1 .. 8") {
    a.es[1] = 0;
    refuse(a, "elementStrides[1] = 0 is not in 1 .. 8");
    a.es[1] = 9;
    refuse(a, "elementStrides[1] = 9");
  }
  SECTION("swizzle an enum") {
    a.swizzle = 7;
    refuse(a, "swizzle 7 is not a CUtensorMapSwizzle");
  }
  SECTION("INTERLEAVE_32B requires SWIZZLE_32B") {
    a.rank = 3;
    a.dims[2] = 2;
    a.interleave = m::kTmaInterleave32B;
    a.swizzle = m::kTmaSwizzle64B;
    refuse(a, "must be SWIZZLE_32B when interleave is INTERLEAVE_32B");
  }
  SECTION("inner box bytes <= swizzle span") {
    a.swizzle = m::kTmaSwizzle64B;  // 64 columns x 2 bytes = 128 > 64
    refuse(a, "boxDim[0] * element size = 128 bytes exceeds the 64-byte swizzle span");
    a.swizzle = m::kTmaSwizzle32B;
    refuse(a, "exceeds the 32-byte swizzle span");
    a.swizzle = m::kTmaSwizzle128B;
    a.box[0] = 72;
    a.dims[0] = 72;
    a.strides[0] = 144;
    a.strides[1] = 144 * 100;
    refuse(a, "144 bytes exceeds the 128-byte swizzle span");
  }
  SECTION("l2 promotion an enum") {
    a.l2 = 4;
    refuse(a, "l2Promotion 4");
  }
  SECTION("oob fill an enum, NaN only for floating-point types") {
    a.oob = 2;
    refuse(a, "oobFill 2");
    a.oob = m::kTmaOobFillNanRequestZeroFma;
    a.type = m::kTmaUint16;
    refuse(a, "needs a floating-point tensorDataType");
    a.type = m::kTmaBfloat16;
    CHECK(a.encode(&s) == "");
  }
  SECTION("interleave and the 128B atom swizzles are valid but not modelled") {
    a.rank = 3;
    a.dims[2] = 2;
    a.interleave = m::kTmaInterleave16B;
    refuse(a, "interleave 1 is not modelled");
    a.interleave = m::kTmaInterleaveNone;
    a.swizzle = m::kTmaSwizzle128BAtom32B;
    refuse(a, "not modelled");
  }
}

TEST_CASE("tma: decode faults on a map encode_tiled did not make") {
  MapStorage s;
  std::memset(&s, 0, sizeof s);
  CHECK_THROWS_WITH(m::decode(&s), ContainsSubstring("not made by cuTensorMapEncodeTiled"));
  Buffer g(1 << 16);
  Args a;
  a.addr = g.p;
  REQUIRE(a.encode(&s) == "");
  CHECK_NOTHROW(m::decode(&s));
  s.bytes[40] ^= 1;  // a bit of dims[0]
  CHECK_THROWS_WITH(m::decode(&s), ContainsSubstring("checksum"));
  alignas(64) unsigned char buf[256] = {};
  CHECK_THROWS_WITH(m::decode(buf + 16), ContainsSubstring("not 64-byte aligned"));
  CHECK_THROWS_AS(m::decode(nullptr), m::Fault);
}

TEST_CASE("tma: 128B swizzle — chunk c of row r lands at chunk c ^ (r % 8)") {
  // The documented picture, rows 0, 1 and 7 of the 8-row / 1024-byte pattern: which chunk sits at
  // each chunk position.
  const int row0[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  const int row1[8] = {1, 0, 3, 2, 5, 4, 7, 6};
  const int row7[8] = {7, 6, 5, 4, 3, 2, 1, 0};
  for (int pos = 0; pos < 8; ++pos) {
    CHECK(m::swizzle_offset(128, 0 * 128 + row0[pos] * 16) == 0 * 128 + pos * 16u);
    CHECK(m::swizzle_offset(128, 1 * 128 + row1[pos] * 16) == 1 * 128 + pos * 16u);
    CHECK(m::swizzle_offset(128, 7 * 128 + row7[pos] * 16) == 7 * 128 + pos * 16u);
  }
  // Every byte of 4 patterns, by the rule.
  for (std::uint32_t r = 0; r < 32; ++r)
    for (std::uint32_t c = 0; c < 8; ++c)
      for (std::uint32_t b = 0; b < 16; b += 5)
        REQUIRE(m::swizzle_offset(128, r * 128 + c * 16 + b) == r * 128 + (c ^ (r % 8)) * 16 + b);
}

TEST_CASE("tma: 64B and 32B swizzles, identity without swizzle") {
  // 64B: rows of 64 bytes (4 chunks), the pattern repeats every 512 bytes (8 rows); chunk c of row
  // r at chunk c ^ ((r / 2) % 4).
  for (std::uint32_t r = 0; r < 16; ++r)
    for (std::uint32_t c = 0; c < 4; ++c)
      REQUIRE(m::swizzle_offset(64, r * 64 + c * 16 + 3) == r * 64 + (c ^ ((r / 2) % 4)) * 16 + 3);
  // 32B: rows of 32 bytes (2 chunks), repeating every 256 bytes (8 rows); chunk c of row r at
  // chunk c ^ ((r / 4) % 2).
  for (std::uint32_t r = 0; r < 16; ++r)
    for (std::uint32_t c = 0; c < 2; ++c)
      REQUIRE(m::swizzle_offset(32, r * 32 + c * 16 + 9) == r * 32 + (c ^ ((r / 4) % 2)) * 16 + 9);
  for (std::uint32_t o = 0; o < 4096; o += 7)
    REQUIRE(m::swizzle_offset(0, o) == o);
  CHECK_THROWS_AS(m::swizzle_offset(16, 0), m::Fault);
}

TEST_CASE("tma: a 2-D box fully inside the tensor, no swizzle") {
  // uint16 tensor of 20 rows x 40 columns, rows padded to 96 bytes; box 8 columns x 5 rows at
  // (column 16, row 3).
  constexpr std::uint64_t kRows = 20, kCols = 40, kPitch = 96;
  Buffer g(kRows * kPitch);
  for (std::uint64_t r = 0; r < kRows; ++r)
    for (std::uint64_t c = 0; c < kCols; ++c)
      g.set(r * kPitch + c * 2, pattern16(r * kCols + c));
  Args a;
  a.type = m::kTmaUint16;
  a.addr = g.p;
  a.dims[0] = kCols, a.dims[1] = kRows;
  a.strides[0] = kPitch;
  a.box[0] = 8, a.box[1] = 5;
  a.swizzle = m::kTmaSwizzleNone;
  MapStorage s;
  REQUIRE(a.encode(&s) == "");
  Smem sm(1024);
  const std::int32_t coords[2] = {16, 3};
  CHECK(m::tma_load_tile(m::decode(&s), coords, sm.win, 128) == 8 * 5 * 2);
  for (std::uint32_t r = 0; r < 5; ++r)
    for (std::uint32_t c = 0; c < 8; ++c)
      REQUIRE(sm.u16(128 + r * 16 + c * 2) == pattern16((3 + r) * kCols + 16 + c));
  CHECK(sm.mem[127] == 0xAB);  // nothing written outside the box
  CHECK(sm.mem[128 + 80] == 0xAB);
}

TEST_CASE("tma: a 2-D box with 128B swizzle lands in the swizzled layout") {
  // fp16 tensor 64 columns x 100 rows; box 64 columns x 16 rows at row 40.
  Buffer g(100 * 128);
  for (std::uint64_t r = 0; r < 100; ++r)
    for (std::uint64_t c = 0; c < 64; ++c)
      g.set(r * 128 + c * 2, pattern16(r * 64 + c));
  Args a;
  a.addr = g.p;
  a.box[1] = 16;
  MapStorage s;
  REQUIRE(a.encode(&s) == "");
  Smem sm(4096);
  const std::int32_t coords[2] = {0, 40};
  CHECK(m::tma_load_tile(m::decode(&s), coords, sm.win, 1024) == 64 * 16 * 2);
  for (std::uint32_t r = 0; r < 16; ++r)
    for (std::uint32_t c = 0; c < 64; ++c)
      REQUIRE(sm.u16(1024 + r * 128 + ((c / 8) ^ (r % 8)) * 16 + (c % 8) * 2) ==
              pattern16((40 + r) * 64 + c));
}

TEST_CASE("tma: a 2-D box partly outside is zero-filled and still counts the full box") {
  // uint16 tensor of 10 rows x 24 columns (48-byte rows); box 16 columns x 8 rows.
  constexpr std::int64_t kRows = 10, kCols = 24;
  Buffer g(kRows * 48);
  for (std::int64_t r = 0; r < kRows; ++r)
    for (std::int64_t c = 0; c < kCols; ++c)
      g.set(static_cast<std::size_t>(r * 48 + c * 2), static_cast<std::uint16_t>(1 + r * 100 + c));
  Args a;
  a.type = m::kTmaUint16;
  a.addr = g.p;
  a.dims[0] = kCols, a.dims[1] = kRows;
  a.strides[0] = 48;
  a.box[0] = 16, a.box[1] = 8;
  a.swizzle = m::kTmaSwizzleNone;
  MapStorage s;
  REQUIRE(a.encode(&s) == "");
  const std::int32_t corners[][2] = {{-5, -3}, {12, 6}, {-16, 0}, {24, 10}, {100, -100}};
  for (const auto& co : corners) {
    INFO("box at column " << co[0] << ", row " << co[1]);
    Smem sm(512);
    CHECK(m::tma_load_tile(m::decode(&s), co, sm.win, 0) == 16 * 8 * 2);
    for (std::int64_t r = 0; r < 8; ++r)
      for (std::int64_t c = 0; c < 16; ++c) {
        const std::int64_t gr = co[1] + r, gc = co[0] + c;
        const bool in = gr >= 0 && gr < kRows && gc >= 0 && gc < kCols;
        const std::uint16_t want = in ? static_cast<std::uint16_t>(1 + gr * 100 + gc) : 0;
        REQUIRE(sm.u16(static_cast<std::uint32_t>(r * 32 + c * 2)) == want);
      }
  }
}

TEST_CASE("tma: the Hopper stages' 3-D load — rows past the end of a head are zero") {
  // Q of [B*H = 3, Sq = 100, D = 128] fp16; box (64, 128, 1) at column block 1, row 0, head 2.
  constexpr std::uint64_t kBH = 3, kRows = 100, kD = 128;
  Buffer g(kBH * kRows * kD * 2);
  for (std::uint64_t h = 0; h < kBH; ++h)
    for (std::uint64_t r = 0; r < kRows; ++r)
      for (std::uint64_t c = 0; c < kD; ++c)
        g.set(((h * kRows + r) * kD + c) * 2,
              static_cast<std::uint16_t>(pattern16((h * kRows + r) * kD + c) | 1u));
  Args a;
  a.addr = g.p;
  a.rank = 3;
  a.dims[0] = kD, a.dims[1] = kRows, a.dims[2] = kBH;
  a.strides[0] = kD * 2, a.strides[1] = kRows * kD * 2;
  a.box[0] = 64, a.box[1] = 128, a.box[2] = 1;
  MapStorage s;
  REQUIRE(a.encode(&s) == "");
  Smem sm(3 * 16384);
  const std::int32_t coords[3] = {64, 0, 2};
  CHECK(m::tma_load_tile(m::decode(&s), coords, sm.win, 16384) == 16384);
  for (std::uint32_t r = 0; r < 128; ++r)
    for (std::uint32_t c = 0; c < 64; ++c) {
      const std::uint16_t want =
          r < kRows ? static_cast<std::uint16_t>(pattern16((2 * kRows + r) * kD + 64 + c) | 1u) : 0;
      REQUIRE(sm.u16(16384 + r * 128 + ((c / 8) ^ (r % 8)) * 16 + (c % 8) * 2) == want);
    }
  CHECK(sm.mem[16383] == 0xAB);
  CHECK(sm.mem[32768] == 0xAB);
}

TEST_CASE("tma: NaN out-of-bounds fill when the map asks for it") {
  Buffer g(4 * 64);
  std::memset(g.p, 0, g.size);
  SECTION("fp32") {
    Args a;
    a.type = m::kTmaFloat32;
    a.addr = g.p;
    a.dims[0] = 16, a.dims[1] = 4;
    a.strides[0] = 64;
    a.box[0] = 8, a.box[1] = 2;
    a.swizzle = m::kTmaSwizzleNone;
    a.oob = m::kTmaOobFillNanRequestZeroFma;
    MapStorage s;
    REQUIRE(a.encode(&s) == "");
    Smem sm(256);
    const std::int32_t coords[2] = {12, 3};  // columns 12..19, rows 3..4
    CHECK(m::tma_load_tile(m::decode(&s), coords, sm.win, 0) == 64);
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 8; ++c) {
        float v;
        std::memcpy(&v, sm.mem.data() + r * 32 + c * 4, 4);
        const bool in = r == 0 && c < 4;
        CHECK(std::isnan(v) == !in);
        if (in) CHECK(v == 0.0f);
      }
  }
  SECTION("bf16") {
    Args a;
    a.type = m::kTmaBfloat16;
    a.addr = g.p;
    a.dims[0] = 8, a.dims[1] = 4;
    a.strides[0] = 16;
    a.box[0] = 8, a.box[1] = 1;
    a.swizzle = m::kTmaSwizzleNone;
    a.oob = m::kTmaOobFillNanRequestZeroFma;
    MapStorage s;
    REQUIRE(a.encode(&s) == "");
    Smem sm(256);
    const std::int32_t coords[2] = {0, -1};
    m::tma_load_tile(m::decode(&s), coords, sm.win, 0);
    for (int c = 0; c < 8; ++c) {
      const std::uint16_t v = sm.u16(c * 2);
      CHECK((v & 0x7F80u) == 0x7F80u);  // exponent all ones
      CHECK((v & 0x007Fu) != 0u);       // non-zero mantissa: NaN, not infinity
    }
  }
}

TEST_CASE("tma: element strides load every k-th row") {
  // uint32 tensor 16 columns x 12 rows; box 4 columns x 6 rows with elementStrides {1, 3}: rows
  // r0, r0 + 3 (ceil(6 / 3) = 2 rows). elementStrides[0] is ignored.
  Buffer g(12 * 64);
  for (std::uint32_t r = 0; r < 12; ++r)
    for (std::uint32_t c = 0; c < 16; ++c)
      g.set(r * 64 + c * 4, 1000 * r + c);
  Args a;
  a.type = m::kTmaUint32;
  a.addr = g.p;
  a.dims[0] = 16, a.dims[1] = 12;
  a.strides[0] = 64;
  a.box[0] = 4, a.box[1] = 6;
  a.es[0] = 4, a.es[1] = 3;
  a.swizzle = m::kTmaSwizzleNone;
  MapStorage s;
  REQUIRE(a.encode(&s) == "");
  Smem sm(256);
  const std::int32_t coords[2] = {2, 7};  // rows 7 and 10
  CHECK(m::tma_load_tile(m::decode(&s), coords, sm.win, 0) == 4 * 2 * 4);
  for (std::uint32_t k = 0; k < 2; ++k)
    for (std::uint32_t c = 0; c < 4; ++c) {
      std::uint32_t v;
      std::memcpy(&v, sm.mem.data() + k * 16 + c * 4, 4);
      REQUIRE(v == 1000 * (7 + 3 * k) + 2 + c);
    }
  CHECK(sm.mem[32] == 0xAB);
}

TEST_CASE("tma: rank 1 and rank 5 boxes") {
  SECTION("rank 1, partly past the end") {
    Buffer g(64);
    for (std::uint32_t i = 0; i < 20; ++i)
      g.p[i] = static_cast<unsigned char>(i + 1);
    Args a;
    a.type = m::kTmaUint8;
    a.rank = 1;
    a.addr = g.p;
    a.dims[0] = 20;
    a.box[0] = 32;
    a.swizzle = m::kTmaSwizzleNone;
    MapStorage s;
    REQUIRE(a.encode(&s) == "");
    Smem sm(256);
    const std::int32_t coords[1] = {4};
    CHECK(m::tma_load_tile(m::decode(&s), coords, sm.win, 128) == 32);
    for (std::uint32_t i = 0; i < 32; ++i)
      REQUIRE(sm.mem[128 + i] == (i + 4 < 20 ? i + 5 : 0));
  }
  SECTION("rank 5") {
    // uint16, dims {8, 3, 2, 2, 3} packed; box {8, 2, 2, 1, 2} at (0, 1, 0, 1, 1).
    const std::uint64_t d[5] = {8, 3, 2, 2, 3};
    Buffer g(8 * 3 * 2 * 2 * 3 * 2);
    std::uint64_t count = 8 * 3 * 2 * 2 * 3;
    for (std::uint64_t i = 0; i < count; ++i)
      g.set(i * 2, static_cast<std::uint16_t>(i + 7));
    Args a;
    a.type = m::kTmaUint16;
    a.rank = 5;
    a.addr = g.p;
    for (int i = 0; i < 5; ++i)
      a.dims[i] = d[i];
    a.strides[0] = 16, a.strides[1] = 48, a.strides[2] = 96, a.strides[3] = 192;
    const std::uint32_t box[5] = {8, 2, 2, 1, 2};
    for (int i = 0; i < 5; ++i)
      a.box[i] = box[i];
    a.swizzle = m::kTmaSwizzleNone;
    MapStorage s;
    REQUIRE(a.encode(&s) == "");
    Smem sm(1024);
    const std::int32_t co[5] = {0, 1, 0, 1, 1};
    CHECK(m::tma_load_tile(m::decode(&s), co, sm.win, 0) == 8 * 2 * 2 * 1 * 2 * 2);
    std::uint32_t off = 0;
    for (std::uint64_t i4 = 0; i4 < 2; ++i4)
      for (std::uint64_t i2 = 0; i2 < 2; ++i2)
        for (std::uint64_t i1 = 0; i1 < 2; ++i1)
          for (std::uint64_t i0 = 0; i0 < 8; ++i0, off += 2) {
            const std::uint64_t g4 = 1 + i4, g3 = 1, g2 = i2, g1 = 1 + i1, g0 = i0;
            const bool in = g4 < 3 && g1 < 3;
            const std::uint64_t lin = (((g4 * 2 + g3) * 2 + g2) * 3 + g1) * 8 + g0;
            REQUIRE(sm.u16(off) == (in ? static_cast<std::uint16_t>(lin + 7) : 0));
          }
  }
}

TEST_CASE("tma: a store is clipped at the tensor's edges") {
  // uint16 tensor of 10 rows x 24 columns in rows of 64 bytes (padding after column 23), with a
  // guard row before and after; box 16 columns x 4 rows over the bottom-right corner.
  constexpr std::int64_t kRows = 10, kCols = 24, kPitch = 64;
  Buffer g((kRows + 2) * kPitch);
  std::memset(g.p, 0xEE, g.size);
  unsigned char* base = g.p + kPitch;  // guard row 0
  Args a;
  a.type = m::kTmaUint16;
  a.addr = base;
  a.dims[0] = kCols, a.dims[1] = kRows;
  a.strides[0] = kPitch;
  a.box[0] = 16, a.box[1] = 4;
  a.swizzle = m::kTmaSwizzleNone;
  MapStorage s;
  REQUIRE(a.encode(&s) == "");
  Smem sm(512);
  for (std::uint32_t i = 0; i < 64; ++i) {
    const auto v = static_cast<std::uint16_t>(0x100 + i);
    std::memcpy(sm.mem.data() + 128 + i * 2, &v, 2);
  }
  const std::int32_t co[2] = {16, 8};  // columns 16..31 (24.. outside), rows 8..11 (10.. outside)
  m::tma_store_tile(m::decode(&s), co, sm.win, 128);
  for (std::int64_t r = -1; r <= kRows; ++r)
    for (std::int64_t b = 0; b < kPitch; b += 2) {
      std::uint16_t v;
      std::memcpy(&v, base + r * kPitch + b, 2);
      const std::int64_t c = b / 2;
      const bool written = r >= 8 && r < kRows && c >= 16 && c < kCols;
      const std::uint16_t want =
          written ? static_cast<std::uint16_t>(0x100 + (r - 8) * 16 + (c - 16)) : 0xEEEE;
      INFO("row " << r << " column " << c);
      REQUIRE(v == want);
    }
}

TEST_CASE("tma: load then store of 128B-swizzled 3-D boxes is a copy") {
  // Two [2, 70, 128] fp16 tensors; every (64 x 64 x 1) box, including those past row 70, goes
  // A -> shared -> B; then B == A.
  constexpr std::uint64_t kBH = 2, kRows = 70, kD = 128, kBytes = kBH * kRows * kD * 2;
  Buffer ga(kBytes), gb(kBytes);
  for (std::uint64_t i = 0; i < kBytes / 2; ++i)
    ga.set(i * 2, pattern16(i));
  std::memset(gb.p, 0, kBytes);
  MapStorage sa, sb;
  Args a;
  a.rank = 3;
  a.dims[0] = kD, a.dims[1] = kRows, a.dims[2] = kBH;
  a.strides[0] = kD * 2, a.strides[1] = kRows * kD * 2;
  a.box[0] = 64, a.box[1] = 64, a.box[2] = 1;
  a.addr = ga.p;
  REQUIRE(a.encode(&sa) == "");
  a.addr = gb.p;
  REQUIRE(a.encode(&sb) == "");
  Smem sm(2 * 8192);
  for (std::int32_t h = 0; h < static_cast<std::int32_t>(kBH); ++h)
    for (std::int32_t r = 0; r < static_cast<std::int32_t>(kRows); r += 64)
      for (std::int32_t c = 0; c < static_cast<std::int32_t>(kD); c += 64) {
        const std::int32_t co[3] = {c, r, h};
        CHECK(m::tma_load_tile(m::decode(&sa), co, sm.win, 8192) == 8192);
        m::tma_store_tile(m::decode(&sb), co, sm.win, 8192);
      }
  CHECK(std::memcmp(ga.p, gb.p, kBytes) == 0);
}

TEST_CASE("tma: copies fault on misaligned or out-of-window shared memory") {
  Buffer g(100 * 128);
  Args a;
  a.addr = g.p;
  MapStorage s128, snone;
  REQUIRE(a.encode(&s128) == "");
  a.swizzle = m::kTmaSwizzleNone;
  REQUIRE(a.encode(&snone) == "");
  Smem sm(16384);
  const std::int32_t co[2] = {0, 0};
  CHECK_THROWS_WITH(m::tma_load_tile(m::decode(&snone), co, sm.win, 64),
                    ContainsSubstring("not 128-byte aligned"));
  CHECK_NOTHROW(m::tma_load_tile(m::decode(&snone), co, sm.win, 128));
  CHECK_THROWS_WITH(m::tma_load_tile(m::decode(&s128), co, sm.win, 512),
                    ContainsSubstring("not 1024-byte aligned"));
  CHECK_THROWS_WITH(m::tma_store_tile(m::decode(&s128), co, sm.win, 128),
                    ContainsSubstring("Tensor Swizzling Modes"));
  // A box of 64 x 32 fp16 = 4096 bytes at 14336 runs past the 16384-byte window.
  CHECK_THROWS_WITH(m::tma_load_tile(m::decode(&s128), co, sm.win, 14336),
                    ContainsSubstring("outside the block's 16384 bytes"));
  Args z;  // a null global address encodes (it is 16-byte aligned) but cannot be copied from
  MapStorage sz;
  REQUIRE(z.encode(&sz) == "");
  CHECK_THROWS_WITH(m::tma_load_tile(m::decode(&sz), co, sm.win, 0),
                    ContainsSubstring("global address is null"));
}
