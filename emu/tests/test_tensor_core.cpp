// The tensor-core instruction models (emu/include/fsemu/model/tensor_core.hpp) against the PTX
// ISA's own statements, independently of the stages: literal entries of the fragment tables, the
// ISA's worked examples of the wgmma canonical layouts, the swizzle pictures, and naive matmuls on
// random data whose operands this file packs and lays out with its own writers (every expected
// value here is computed by the test, never by the code under test).
#include "flashsteps_catch.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "fsemu/model/tensor_core.hpp"

using namespace fsemu::model;

namespace {

// ---- Values: ±(1 + m/8) * 2^x (m 0..7, x -3..3) or 0, encoded by hand into fp16 / bf16 bits --
// (4 significant bits: exact in both formats; products are exact in fp32).
struct Val {
  float f;
  std::uint16_t bits;
};

Val make_val(Elem e, int sign, int m, int x) {
  Val v;
  v.f = static_cast<float>(std::ldexp((1.0 + m / 8.0) * (sign ? -1 : 1), x));
  const unsigned s = sign ? 0x8000u : 0u;
  if (e == Elem::f16)
    v.bits = static_cast<std::uint16_t>(s | static_cast<unsigned>(x + 15) << 10 |
                                        static_cast<unsigned>(m) << 7);
  else
    v.bits = static_cast<std::uint16_t>(s | static_cast<unsigned>(x + 127) << 7 |
                                        static_cast<unsigned>(m) << 4);
  return v;
}

Val random_val(Elem e, std::mt19937& rng) {
  std::uniform_int_distribution<int> pick(0, 15);
  if (pick(rng) == 0) return {0.0f, 0};
  return make_val(e, pick(rng) % 2, pick(rng) % 8, pick(rng) % 7 - 3);
}

struct Mat {  // a logical matrix of 16-bit elements with their exact float values
  int rows = 0, cols = 0;
  std::vector<Val> v;
  Mat(int r, int c) : rows(r), cols(c), v(static_cast<std::size_t>(r) * c) {}
  Val& at(int r, int c) { return v[static_cast<std::size_t>(r) * cols + c]; }
  const Val& at(int r, int c) const { return v[static_cast<std::size_t>(r) * cols + c]; }
};

Mat random_mat(Elem e, int r, int c, std::mt19937& rng) {
  Mat m(r, c);
  for (auto& x : m.v)
    x = random_val(e, rng);
  return m;
}

// Naive reference: D[i][j] = C[i][j] + sum_k A[i][k] * B[k][j], k in order, fp32 after each step.
std::vector<float> naive(const Mat& A, const Mat& B, const std::vector<float>& C, int k0 = 0) {
  std::vector<float> D(static_cast<std::size_t>(A.rows) * B.cols);
  for (int i = 0; i < A.rows; ++i)
    for (int j = 0; j < B.cols; ++j) {
      float s = C[static_cast<std::size_t>(i) * B.cols + j];
      for (int k = 0; k < 16; ++k) {
        const float p = A.at(i, k0 + k).f * B.at(k, j).f;
        s = s + p;
      }
      D[static_cast<std::size_t>(i) * B.cols + j] = s;
    }
  return D;
}

std::uint32_t pack(std::uint16_t lo, std::uint16_t hi) {
  return std::uint32_t{lo} | (std::uint32_t{hi} << 16);
}

// ---- mma.m16n8k16 fragments, written from the ISA's formulas ("Matrix Fragments for
// mma.m16n8k16 with floating point type"): groupID = lane >> 2, threadID_in_group = lane % 4.
int a_row(int lane, int i) {
  return (i < 2 || (i >= 4 && i < 6)) ? lane / 4 : lane / 4 + 8;
}
int a_col(int lane, int i) {
  return (lane % 4) * 2 + (i & 1) + (i >= 4 ? 8 : 0);
}
int b_row(int lane, int i) {
  return (lane % 4) * 2 + (i & 1) + (i >= 2 ? 8 : 0);
}
int b_col(int lane, int) {
  return lane / 4;
}
int c_row(int lane, int i) {
  return i < 2 ? lane / 4 : lane / 4 + 8;
}
int c_col(int lane, int i) {
  return (lane % 4) * 2 + (i & 1);
}

// A (16 x 16 at rows r0.., cols k0..) into a[lane][0..3]; element ai is register i / 2, half i % 2.
void pack_a(const Mat& A, int r0, int k0, std::uint32_t (&a)[4], int lane) {
  std::uint16_t e[8];
  for (int i = 0; i < 8; ++i)
    e[i] = A.at(r0 + a_row(lane, i), k0 + a_col(lane, i)).bits;
  for (int r = 0; r < 4; ++r)
    a[r] = pack(e[2 * r], e[2 * r + 1]);
}

void pack_b(const Mat& B, std::uint32_t (&b)[2], int lane) {
  std::uint16_t e[4];
  for (int i = 0; i < 4; ++i)
    e[i] = B.at(b_row(lane, i), b_col(lane, i)).bits;
  b[0] = pack(e[0], e[1]);
  b[1] = pack(e[2], e[3]);
}

// ---- Shared memory for the ldmatrix / wgmma tests --------------------------------------------
struct Smem {
  std::vector<std::uint8_t> buf;
  SharedWindow win;
  explicit Smem(std::uint32_t size) : buf(size, 0xEE) { win = SharedWindow{buf.data(), size}; }
  void put(std::uint32_t addr, std::uint16_t v) {
    REQUIRE(addr % 2 == 0);
    REQUIRE(addr + 2 <= buf.size());
    std::memcpy(&buf[addr], &v, 2);
  }
  std::uint16_t get(std::uint32_t addr) const {
    std::uint16_t v;
    std::memcpy(&v, &buf[addr], 2);
    return v;
  }
};

// ---- Independent writers of the wgmma shared-memory layouts, from the ISA's pictures ----------
// Swizzle atoms (Shared Memory Matrix Layout, Table "swizzle atom layout"): a swizzled row is W
// bytes (128, 64, 32); 8 rows form the repeating pattern (1024, 512, 256 bytes); inside it, the
// 16-byte chunk c of row r sits at chunk position c ^ phase(r):
//   128B: r % 8        64B: (r / 2) % 4        32B: (r / 4) % 2
// (what TMA's CU_TENSOR_MAP_SWIZZLE_128B / 64B / 32B write for rows of W bytes).
int phase(int W, int r) {
  return W == 128 ? r % 8 : W == 64 ? (r / 2) % 4 : (r / 4) % 2;
}
int width_of(int mode) {
  return mode == 1 ? 128 : mode == 2 ? 64 : mode == 3 ? 32 : 16;
}

// K-major, swizzled (mode 1/2/3): M is mn x kc (kc = W / 2 columns); row r at base + (r/8)*sbo +
// (r%8)*W; base must start a repeating pattern.
void write_k_major_swizzled(Smem& s, const Mat& M, std::uint32_t base, int mode,
                            std::uint32_t sbo) {
  const int W = width_of(mode);
  REQUIRE(M.cols == W / 2);
  for (int r = 0; r < M.rows; ++r)
    for (int c = 0; c < M.cols; ++c) {
      const int pos = (c / 8) ^ phase(W, r % 8);
      s.put(base + static_cast<std::uint32_t>((r / 8) * sbo + (r % 8) * W + pos * 16 + (c % 8) * 2),
            M.at(r, c).bits);
    }
}
// K-major, no swizzle: 8x8 core matrices (8 rows of 16 contiguous bytes); the next 8 k at lbo, the
// next 8 rows at sbo.
void write_k_major_plain(Smem& s, const Mat& M, std::uint32_t base, std::uint32_t lbo,
                         std::uint32_t sbo) {
  for (int r = 0; r < M.rows; ++r)
    for (int c = 0; c < M.cols; ++c)
      s.put(base + (r / 8) * sbo + (c / 8) * lbo +
                static_cast<std::uint32_t>((r % 8) * 16 + (c % 8) * 2),
            M.at(r, c).bits);
}
// MN-major, swizzled: M is k x mn (16 x N): k row r of a block is W bytes of W/2 mn elements; the
// next W/2 mn at lbo, the next 8 k at sbo.
void write_mn_major_swizzled(Smem& s, const Mat& M, std::uint32_t base, int mode, std::uint32_t lbo,
                             std::uint32_t sbo) {
  const int W = width_of(mode), per = W / 2;
  for (int k = 0; k < M.rows; ++k)
    for (int n = 0; n < M.cols; ++n) {
      const int pos = ((n % per) / 8) ^ phase(W, k % 8);
      s.put(base + (n / per) * lbo + (k / 8) * sbo +
                static_cast<std::uint32_t>((k % 8) * W + pos * 16 + (n % 8) * 2),
            M.at(k, n).bits);
    }
}
// MN-major, no swizzle: core matrices of 8 k rows x 8 contiguous mn (16 bytes); the next 8 mn at
// sbo, the next 8 k at lbo (the ISA's "MN-Major, no-swizzling" example).
void write_mn_major_plain(Smem& s, const Mat& M, std::uint32_t base, std::uint32_t lbo,
                          std::uint32_t sbo) {
  for (int k = 0; k < M.rows; ++k)
    for (int n = 0; n < M.cols; ++n)
      s.put(base + (n / 8) * sbo + (k / 8) * lbo +
                static_cast<std::uint32_t>((k % 8) * 16 + (n % 8) * 2),
            M.at(k, n).bits);
}

std::uint64_t desc(std::uint32_t start, std::uint32_t lbo, std::uint32_t sbo, int mode,
                   int base_offset = 0) {
  return std::uint64_t{(start & 0x3FFFFu) >> 4} | std::uint64_t{(lbo & 0x3FFFFu) >> 4} << 16 |
         std::uint64_t{(sbo & 0x3FFFFu) >> 4} << 32 |
         std::uint64_t(static_cast<unsigned>(base_offset)) << 49 |
         std::uint64_t(static_cast<unsigned>(mode)) << 62;
}

// The wgmma D fragment (m64nNk16, .f32), from the ISA's figure: warp w = thread / 32 owns rows
// 16w..16w+15; per n8 slice i, the mma.m16n8k16 C layout.
struct Acc {
  int n;
  std::vector<std::vector<float>> regs;  // [128][n/2]
  float* ptr[128];
  explicit Acc(int n_) : n(n_), regs(128, std::vector<float>(static_cast<std::size_t>(n_ / 2))) {
    for (int t = 0; t < 128; ++t)
      ptr[t] = regs[static_cast<std::size_t>(t)].data();
  }
  float& at(int row, int col) {
    const int w = row / 16, r = row % 16, g = r % 8, h = r / 8, i = col / 8, t = (col % 8) / 2,
              j = col % 2;
    return regs[static_cast<std::size_t>(32 * w + 4 * g + t)]
               [static_cast<std::size_t>(4 * i + 2 * h + j)];
  }
};

// Register A of wgmma: warp w holds rows 16w..16w+15 of A (64 x 16) as an mma.m16n8k16 A fragment.
std::vector<std::array<std::uint32_t, 4>> wgmma_a_regs(const Mat& A) {
  std::vector<std::array<std::uint32_t, 4>> regs(128);
  for (int th = 0; th < 128; ++th) {
    std::uint32_t a[4];
    pack_a(A, 16 * (th / 32), 0, a, th % 32);
    for (int r = 0; r < 4; ++r)
      regs[static_cast<std::size_t>(th)][static_cast<std::size_t>(r)] = a[r];
  }
  return regs;
}

bool same_float(float x, float y) {
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  return std::memcmp(&x, &y, sizeof x) == 0;
}

// Runs one wgmma through the model and compares with the naive product of A (rows 0..63, columns
// a_k0 .. a_k0+15) and B (16 x n). d starts at d0; scale_d picks whether it is accumulated.
void check_wgmma(Elem e, int n, Smem& s, std::uint64_t da, const Mat& A, int a_k0, bool use_regs,
                 bool tnsp_a, std::uint64_t db, const Mat& B, bool tnsp_b, bool scale_d,
                 std::mt19937& rng) {
  Acc acc(n);
  std::vector<float> C(static_cast<std::size_t>(64) * n), zero(C.size(), 0.0f);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < n; ++c) {
      const float v = scale_d ? u(rng) : std::numeric_limits<float>::quiet_NaN();
      C[static_cast<std::size_t>(r) * n + c] = v;
      acc.at(r, c) = v;
    }
  const auto regs = wgmma_a_regs(A);
  std::uint32_t a_arr[128][4];
  for (int t = 0; t < 128; ++t)
    for (int r = 0; r < 4; ++r)
      a_arr[t][r] = regs[static_cast<std::size_t>(t)][static_cast<std::size_t>(r)];
  wgmma_m64nNk16(e, n, s.win, da, use_regs ? a_arr : nullptr, tnsp_a, db, tnsp_b, acc.ptr, scale_d);
  const auto D = naive(A, B, scale_d ? C : zero, a_k0);
  int bad = 0;
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < n; ++c)
      if (!same_float(acc.at(r, c), D[static_cast<std::size_t>(r) * n + c]) && bad++ < 5)
        FAIL_CHECK("D[" << r << "][" << c << "] = " << acc.at(r, c) << ", expected "
                        << D[static_cast<std::size_t>(r) * n + c]);
  CHECK(bad == 0);
}

}  // namespace

// ================================================================================================

TEST_CASE("tensor_core: elem_to_float decodes fp16 and bf16 exactly", "[tensor_core]") {
  // fp16 (binary16): 1 sign, 5 exponent (bias 15), 10 fraction bits.
  CHECK(elem_to_float(Elem::f16, 0x3C00) == 1.0f);
  CHECK(elem_to_float(Elem::f16, 0xC000) == -2.0f);
  CHECK(elem_to_float(Elem::f16, 0x3555) == 0.333251953125f);
  CHECK(elem_to_float(Elem::f16, 0x7BFF) == 65504.0f);               // largest finite
  CHECK(elem_to_float(Elem::f16, 0x0400) == std::ldexp(1.0f, -14));  // smallest normal
  CHECK(elem_to_float(Elem::f16, 0x0001) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(elem_to_float(Elem::f16, 0x03FF) == std::ldexp(1023.0f, -24));
  CHECK(elem_to_float(Elem::f16, 0x8201) == -std::ldexp(513.0f, -24));
  CHECK(elem_to_float(Elem::f16, 0x7C00) == std::numeric_limits<float>::infinity());
  CHECK(elem_to_float(Elem::f16, 0xFC00) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(elem_to_float(Elem::f16, 0x7E00)));
  CHECK(std::isnan(elem_to_float(Elem::f16, 0x7C01)));  // signalling NaN stays NaN
  CHECK(std::signbit(elem_to_float(Elem::f16, 0x8000)));
  CHECK(elem_to_float(Elem::f16, 0x8000) == 0.0f);
  // bf16: the upper half of a binary32.
  CHECK(elem_to_float(Elem::bf16, 0x3F80) == 1.0f);
  CHECK(elem_to_float(Elem::bf16, 0x4049) == 3.140625f);
  CHECK(elem_to_float(Elem::bf16, 0xC2F7) == -123.5f);
  CHECK(elem_to_float(Elem::bf16, 0x0001) == std::ldexp(1.0f, -133));  // smallest subnormal
  CHECK(elem_to_float(Elem::bf16, 0x0080) == std::ldexp(1.0f, -126));
  CHECK(elem_to_float(Elem::bf16, 0x7F7F) == std::ldexp(255.0f, 120));  // largest finite
  CHECK(elem_to_float(Elem::bf16, 0x7F80) == std::numeric_limits<float>::infinity());
  CHECK(elem_to_float(Elem::bf16, 0xFF80) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(elem_to_float(Elem::bf16, 0x7FC0)));
  CHECK(std::signbit(elem_to_float(Elem::bf16, 0x8000)));
  // Every fp16 pattern: finite ones round-trip through the value of sign * frac * 2^(exp-25).
  for (std::uint32_t b = 0; b < 0x10000u; ++b) {
    const int exp = static_cast<int>((b >> 10) & 31), frac = static_cast<int>(b & 1023);
    if (exp == 31) continue;
    const double mag = exp == 0 ? std::ldexp(frac, -24) : std::ldexp(1024 + frac, exp - 25);
    const float want = static_cast<float>((b & 0x8000u) ? -mag : mag);
    if (elem_to_float(Elem::f16, static_cast<std::uint16_t>(b)) != want) {
      FAIL("fp16 0x" << std::hex << b);
    }
  }
}

TEST_CASE("tensor_core: mma.m16n8k16 fragment table entries", "[tensor_core]") {
  // Literal entries of the ISA's fragment tables (Figures "MMA .m16n8k16 fragment layout for
  // matrix A / B / accumulator"): lane 4g + t.
  //   A: lane 0 a0 = (0, 0); lane 5 a3 = (9, 3); lane 6 a4 = (1, 12); lane 31 a7 = (15, 15)
  //   B: lane 0 b0 = (k 0, n 0); lane 7 b1 = (k 7, n 1); lane 29 b2 = (k 10, n 7)
  //   C: lane 6 c3 = (9, 5); lane 31 c0 = (7, 6)
  // A one-hot experiment per entry: A = 1 at one (lane, register, half) only; B[k][n] = n + 1 for
  // the expected k, 0 elsewhere. Then D[row][n] = n + 1 exactly on the expected row.
  struct AEntry {
    int lane, i, row, col;
  };
  const AEntry a_entries[] = {{0, 0, 0, 0}, {5, 3, 9, 3}, {6, 4, 1, 12}, {31, 7, 15, 15}};
  for (const auto& en : a_entries) {
    std::uint32_t a[32][4] = {}, b[32][2] = {};
    float acc[32][4] = {};
    a[en.lane][en.i / 2] = (en.i % 2) ? 0x3C000000u : 0x00003C00u;  // fp16 1.0 in that half
    Mat B(16, 8);  // all +0 except row en.col: 1, 2, ..., 8
    const int m_of[8] = {0, 0, 4, 0, 2, 4, 6, 0}, x_of[8] = {0, 1, 1, 2, 2, 2, 2, 3};
    for (int n = 0; n < 8; ++n)
      B.at(en.col, n) = make_val(Elem::f16, 0, m_of[n], x_of[n]);
    for (int lane = 0; lane < 32; ++lane)
      pack_b(B, b[lane], lane);
    mma_m16n8k16(Elem::f16, a, b, acc);
    for (int lane = 0; lane < 32; ++lane)
      for (int i = 0; i < 4; ++i) {
        const float want = c_row(lane, i) == en.row ? static_cast<float>(c_col(lane, i) + 1) : 0.0f;
        INFO("A entry lane " << en.lane << " a" << en.i << "; D lane " << lane << " c" << i);
        CHECK(acc[lane][i] == want);
      }
  }
  // B entries: A = identity (16 x 16); then D = B[0..15 summed over k with A[i][k] = (i == k)] —
  // D[i][n] = B[i][n] for i < 16. A one-hot B picks one D element.
  struct BEntry {
    int lane, i, k, n;
  };
  const BEntry b_entries[] = {{0, 0, 0, 0}, {7, 1, 7, 1}, {29, 2, 10, 7}};
  Mat I(16, 16);
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      I.at(r, c) = r == c ? make_val(Elem::bf16, 0, 0, 0) : Val{0.0f, 0};
  for (const auto& en : b_entries) {
    std::uint32_t a[32][4], b[32][2] = {};
    float acc[32][4] = {};
    for (int lane = 0; lane < 32; ++lane)
      pack_a(I, 0, 0, a[lane], lane);
    b[en.lane][en.i / 2] = (en.i % 2) ? 0x40000000u : 0x00004000u;  // bf16 2.0 in that half
    mma_m16n8k16(Elem::bf16, a, b, acc);
    for (int lane = 0; lane < 32; ++lane)
      for (int i = 0; i < 4; ++i) {
        const bool hit = c_row(lane, i) == en.k && c_col(lane, i) == en.n;
        INFO("B entry lane " << en.lane << " b" << en.i << "; D lane " << lane << " c" << i);
        CHECK(acc[lane][i] == (hit ? 2.0f : 0.0f));
      }
  }
  // C entries: A = B = 0, so D = C; and C's literal places: lane 6 c3 is (9, 5), lane 31 c0 is
  // (7, 6) — found by a one-hot A row times a one-hot B column.
  {
    std::uint32_t a[32][4] = {}, b[32][2] = {};
    float acc[32][4];
    for (int lane = 0; lane < 32; ++lane)
      for (int i = 0; i < 4; ++i)
        acc[lane][i] = static_cast<float>(100 * lane + i);
    mma_m16n8k16(Elem::f16, a, b, acc);
    for (int lane = 0; lane < 32; ++lane)
      for (int i = 0; i < 4; ++i)
        CHECK(acc[lane][i] == static_cast<float>(100 * lane + i));
  }
  struct CEntry {
    int lane, i, row, col;
  };
  const CEntry c_entries[] = {{6, 3, 9, 5}, {31, 0, 7, 6}, {0, 2, 8, 0}};
  for (const auto& en : c_entries) {
    Mat A(16, 16), B(16, 8);
    for (auto& x : A.v)
      x = {0.0f, 0};
    for (auto& x : B.v)
      x = {0.0f, 0};
    A.at(en.row, 3) = make_val(Elem::f16, 0, 0, 0);
    B.at(3, en.col) = make_val(Elem::f16, 1, 4, 1);  // -3
    std::uint32_t a[32][4], b[32][2];
    float acc[32][4] = {};
    for (int lane = 0; lane < 32; ++lane) {
      pack_a(A, 0, 0, a[lane], lane);
      pack_b(B, b[lane], lane);
    }
    mma_m16n8k16(Elem::f16, a, b, acc);
    for (int lane = 0; lane < 32; ++lane)
      for (int i = 0; i < 4; ++i)
        CHECK(acc[lane][i] == ((lane == en.lane && i == en.i) ? -3.0f : 0.0f));
  }
}

TEST_CASE("tensor_core: mma.m16n8k16 matches a naive matmul", "[tensor_core]") {
  std::mt19937 rng(1234);
  for (Elem e : {Elem::f16, Elem::bf16}) {
    for (int rep = 0; rep < 20; ++rep) {
      const Mat A = random_mat(e, 16, 16, rng), B = random_mat(e, 16, 8, rng);
      std::vector<float> C(16 * 8);
      std::uniform_real_distribution<float> u(-100.0f, 100.0f);
      for (auto& c : C)
        c = u(rng);
      std::uint32_t a[32][4], b[32][2];
      float acc[32][4];
      for (int lane = 0; lane < 32; ++lane) {
        pack_a(A, 0, 0, a[lane], lane);
        pack_b(B, b[lane], lane);
        for (int i = 0; i < 4; ++i)
          acc[lane][i] = C[static_cast<std::size_t>(c_row(lane, i)) * 8 + c_col(lane, i)];
      }
      mma_m16n8k16(e, a, b, acc);
      const auto D = naive(A, B, C);
      for (int lane = 0; lane < 32; ++lane)
        for (int i = 0; i < 4; ++i) {
          INFO("dtype " << (e == Elem::f16 ? "f16" : "bf16") << " rep " << rep << " lane " << lane
                        << " c" << i);
          CHECK(same_float(acc[lane][i],
                           D[static_cast<std::size_t>(c_row(lane, i)) * 8 + c_col(lane, i)]));
        }
    }
  }
  // A naive matmul that mixed up the halves would differ: a transposed A gives another result.
  const Mat A = random_mat(Elem::f16, 16, 16, rng), B = random_mat(Elem::f16, 16, 8, rng);
  Mat At(16, 16);
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      At.at(r, c) = A.at(c, r);
  std::vector<float> zero(128, 0.0f);
  CHECK(naive(A, B, zero) != naive(At, B, zero));
}

TEST_CASE("tensor_core: mma.m16n8k16 propagates inf and NaN", "[tensor_core]") {
  std::uint32_t a[32][4] = {}, b[32][2] = {};
  float acc[32][4] = {};
  a[0][0] = 0x7C00u;  // lane 0 (g 0, t 0) a0: A[0][0] = +inf (fp16)
  a[4][0] = 0x7C00u;  // lane 4 (g 1, t 0) a0: A[1][0] = +inf
  b[0][0] = 0x3C00u;  // lane 0 b0: B[0][0] = 1
  b[1][0] = 0x3C00u;  // lane 1 (t 1) b0: B[2][0] = 1 (A[*][2] = 0); every other element is 0
  mma_m16n8k16(Elem::f16, a, b, acc);
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(acc[0][0] == inf);       // D[0][0] = inf * 1 + 0 * 1
  CHECK(std::isnan(acc[0][1]));  // D[0][1] = inf * B[0][1] = inf * 0
  CHECK(acc[4][0] == inf);       // D[1][0] = inf * 1
  CHECK(std::isnan(acc[4][1]));  // D[1][1] = inf * 0
  CHECK(acc[8][0] == 0.0f);      // D[2][0]: row 2 of A is 0
  CHECK(acc[0][2] == 0.0f);      // D[8][0]: row 8 of A is 0
}

TEST_CASE("tensor_core: ldmatrix x1/x2/x4, with and without .trans", "[tensor_core]") {
  Smem s(8192);
  // Every 16-bit cell holds its own address / 2 (plus a tag), so a value tells where it came from.
  for (std::uint32_t p = 0; p < 8192; p += 2)
    s.put(p, static_cast<std::uint16_t>(p / 2));
  // Rows of each matrix at scattered, 16-byte aligned addresses ("consecutive instances of row
  // need not be stored contiguously").
  std::uint32_t addr[32];
  for (int lane = 0; lane < 32; ++lane)
    addr[lane] = static_cast<std::uint32_t>(16 * ((lane * 37 + 11) % 500));
  auto cell = [&](std::uint32_t row_addr, int col) {
    return static_cast<std::uint32_t>(s.get(row_addr + 2u * static_cast<std::uint32_t>(col)));
  };
  for (int count : {1, 2, 4})
    for (bool trans : {false, true}) {
      std::uint32_t in_addr[32];
      std::memcpy(in_addr, addr, sizeof addr);
      // Lanes whose addresses the ISA ignores get misaligned / out-of-window ones: no Fault.
      for (int lane = 8 * count; lane < 32; ++lane)
        in_addr[lane] = lane % 2 ? 3u : 0xFFFFF0u;
      std::uint32_t out[32][4];
      for (auto& o : out)
        for (auto& r : o)
          r = 0xDEADBEEFu;
      ldmatrix(s.win, count, trans, in_addr, out);
      for (int lane = 0; lane < 32; ++lane) {
        const int g = lane / 4, t = lane % 4;
        for (int m = 0; m < 4; ++m) {
          std::uint32_t want;
          if (m >= count)
            want = 0xDEADBEEFu;  // registers past .num are not written
          else if (!trans)       // row g, elements 2t, 2t+1 of matrix m
            want = cell(addr[8 * m + g], 2 * t) | cell(addr[8 * m + g], 2 * t + 1) << 16;
          else  // column g, rows 2t, 2t+1
            want = cell(addr[8 * m + 2 * t], g) | cell(addr[8 * m + 2 * t + 1], g) << 16;
          INFO("x" << count << (trans ? ".trans" : "") << " lane " << lane << " reg " << m);
          CHECK(out[lane][m] == want);
        }
      }
    }
  // Literal entries of the ISA's figure "ldmatrix fragment layout for one 8x8 Matrix with 16-bit
  // elements": an 8x8 matrix stored contiguously at 0x400, element (r, c) = 10 r + c.
  std::uint32_t a1[32];
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 8; ++c)
      s.put(0x400u + 16u * r + 2u * c, static_cast<std::uint16_t>(10 * r + c));
  for (int lane = 0; lane < 32; ++lane)
    a1[lane] = 0x400u + 16u * static_cast<std::uint32_t>(lane % 8);
  std::uint32_t out[32][4] = {};
  ldmatrix(s.win, 1, false, a1, out);
  CHECK(out[0][0] == pack(0, 1));     // T0: row 0, a0 a1
  CHECK(out[3][0] == pack(6, 7));     // T3: row 0, elements 6, 7
  CHECK(out[5][0] == pack(12, 13));   // T5: row 1, elements 2, 3
  CHECK(out[31][0] == pack(76, 77));  // T31: row 7, elements 6, 7
  ldmatrix(s.win, 1, true, a1, out);
  CHECK(out[0][0] == pack(0, 10));    // column 0, rows 0, 1
  CHECK(out[5][0] == pack(21, 31));   // column 1, rows 2, 3
  CHECK(out[31][0] == pack(67, 77));  // column 7, rows 6, 7
}

TEST_CASE("tensor_core: ldmatrix faults", "[tensor_core]") {
  Smem s(1024);
  std::uint32_t addr[32], out[32][4];
  for (int lane = 0; lane < 32; ++lane)
    addr[lane] = 16u * static_cast<std::uint32_t>(lane);
  REQUIRE_NOTHROW(ldmatrix(s.win, 4, false, addr, out));
  addr[13] = 16u * 13 + 8;  // matrix 1, row 5: 8-byte aligned only
  CHECK_THROWS_WITH(ldmatrix(s.win, 4, false, addr, out),
                    Catch::Matchers::ContainsSubstring("lane 13") &&
                        Catch::Matchers::ContainsSubstring("16-byte aligned"));
  CHECK_NOTHROW(ldmatrix(s.win, 1, true, addr, out));  // .x1 ignores lane 13
  CHECK_THROWS_AS(ldmatrix(s.win, 2, true, addr, out), Fault);
  addr[13] = 16u * 13;
  addr[30] = 1024;  // aligned, but the row lies past the 1024-byte window
  CHECK_THROWS_WITH(ldmatrix(s.win, 4, false, addr, out),
                    Catch::Matchers::ContainsSubstring("outside"));
  addr[30] = 1008;  // the last 16 bytes: fine
  CHECK_NOTHROW(ldmatrix(s.win, 4, false, addr, out));
  CHECK_THROWS_AS(ldmatrix(s.win, 3, false, addr, out), Fault);
}

TEST_CASE("tensor_core: wgmma descriptor fields decode", "[tensor_core]") {
  // Hand-built: start 0x1230 (encoded 0x123), LBO 16384 (0x400), SBO 1024 (0x40), base offset 5,
  // swizzle 1 (128B).
  const std::uint64_t d1 =
      0x123ull | (0x400ull << 16) | (0x40ull << 32) | (5ull << 49) | (1ull << 62);
  const WgmmaDesc w1 = decode_wgmma_desc(d1);
  CHECK(w1.start == 0x1230u);
  CHECK(w1.lbo == 16384u);
  CHECK(w1.sbo == 1024u);
  CHECK(w1.base_offset == 5);
  CHECK(w1.swizzle == 1);
  // All ones: the 14-bit fields top out at (2^14 - 1) * 16; reserved bits are ignored.
  const WgmmaDesc w2 = decode_wgmma_desc(~0ull);
  CHECK(w2.start == 0x3FFF0u);
  CHECK(w2.lbo == 0x3FFF0u);
  CHECK(w2.sbo == 0x3FFF0u);
  CHECK(w2.base_offset == 7);
  CHECK(w2.swizzle == 3);
  // Only bits 14-15, 30-31, 46-48, 52-61 set: every field 0.
  const std::uint64_t reserved = (3ull << 14) | (3ull << 30) | (7ull << 46) | (0x3FFull << 52);
  const WgmmaDesc w3 = decode_wgmma_desc(reserved);
  CHECK(w3.start == 0);
  CHECK(w3.lbo == 0);
  CHECK(w3.sbo == 0);
  CHECK(w3.base_offset == 0);
  CHECK(w3.swizzle == 0);
  CHECK(decode_wgmma_desc(2ull << 62).swizzle == 2);
  CHECK(decode_wgmma_desc(3ull << 62).swizzle == 3);
}

TEST_CASE("tensor_core: wgmma swizzle patterns (which chunk of row r holds logical chunk c)",
          "[tensor_core]") {
  // K-major, start on a pattern boundary + 32 s bytes (the k16 step s inside a swizzled row).
  // Logical chunk c = 2s + k / 8 of row r must sit at position c ^ phase(r): 128B r % 8, 64B
  // (r/2) % 4, 32B (r/4) % 2 — the ISA's pictures "K major 128B / 64B / 32B swizzling".
  const std::uint32_t base = 4096;
  for (int mode : {1, 2, 3}) {
    const int W = width_of(mode);
    for (int s = 0; s < W / 32; ++s)
      for (int r = 0; r < 16; ++r)
        for (int k = 0; k < 16; ++k) {
          WgmmaDesc d;
          d.start = base + 32u * static_cast<std::uint32_t>(s);
          d.sbo = 8u * static_cast<std::uint32_t>(W) + 4096u;  // next 8 rows: some distance away
          d.lbo = 16;
          d.swizzle = mode;
          const int c = 2 * s + k / 8;
          int pos;
          if (mode == 1)
            pos = c ^ (r % 8);
          else if (mode == 2)
            pos = c ^ ((r % 8) / 2);
          else
            pos = c ^ ((r % 8) / 4);
          const std::uint32_t want =
              base + static_cast<std::uint32_t>(r / 8) * d.sbo +
              static_cast<std::uint32_t>((r % 8) * W + 16 * pos + 2 * (k % 8));
          INFO("mode " << mode << " step " << s << " row " << r << " k " << k);
          CHECK(wgmma_element_addr(d, false, r, k) == want);
        }
  }
  // Literal 128B entries: row 1 holds logical chunk 0 at position 1, row 3 chunk 1 at position 2,
  // row 7 chunk 0 at position 7.
  WgmmaDesc d;
  d.start = 0;
  d.sbo = 1024;
  d.swizzle = 1;
  CHECK(wgmma_element_addr(d, false, 1, 0) == 128u + 16u);
  CHECK(wgmma_element_addr(d, false, 3, 8) == 3u * 128 + 2u * 16);
  CHECK(wgmma_element_addr(d, false, 7, 3) == 7u * 128 + 7u * 16 + 6u);
  // MN-major 128B: k row j holds the 64 mn of a block; logical chunk mn / 8 at (mn / 8) ^ j.
  CHECK(wgmma_element_addr(d, true, 0, 0) == 0u);
  CHECK(wgmma_element_addr(d, true, 9, 1) == 128u + ((1 ^ 1) * 16u) + 2u);
  CHECK(wgmma_element_addr(d, true, 63, 5) == 5u * 128 + ((7 ^ 5) * 16u) + 14u);
  CHECK(wgmma_element_addr(d, true, 8, 10) == 1024u + 2u * 128 + ((1 ^ 2) * 16u));  // k 8.. at SBO
  d.lbo = 8192;
  CHECK(wgmma_element_addr(d, true, 64 + 8, 0) == 8192u + 16u);  // the next 64 mn at LBO
}

TEST_CASE("tensor_core: wgmma canonical layouts match the ISA's worked examples", "[tensor_core]") {
  // "MN-Major, no-swizzling and bf16 type": Swizzle<0,4,3> o ((8,1,2),(8,2)):((1,8,64),(8,128)),
  // LBO = 128 * sizeof(bf16), SBO = 64 * sizeof(bf16).
  {
    WgmmaDesc d;
    d.start = 2048;
    d.lbo = 256;
    d.sbo = 128;
    d.swizzle = 0;
    for (int mn = 0; mn < 16; ++mn)
      for (int k = 0; k < 16; ++k) {
        const int off = (mn % 8) * 1 + (mn / 8) * 64 + (k % 8) * 8 + (k / 8) * 128;  // elements
        CHECK(wgmma_element_addr(d, true, mn, k) == 2048u + 2u * static_cast<std::uint32_t>(off));
      }
  }
  // "MN-Major, 32B swizzling and bf16 type": Swizzle<1,4,3> o ((8,2,2),(8,2)):((1,8,128),(16,256)),
  // LBO = 128 * 2 bytes, SBO = 256 * 2 bytes. The swizzle XORs byte-address bit 4 with bit 7.
  {
    WgmmaDesc d;
    d.start = 0;
    d.lbo = 256;
    d.sbo = 512;
    d.swizzle = 3;
    for (int mn = 0; mn < 32; ++mn)
      for (int k = 0; k < 16; ++k) {
        const int off =
            (mn % 8) + 8 * ((mn / 8) % 2) + 128 * (mn / 16) + 16 * (k % 8) + 256 * (k / 8);
        std::uint32_t b = 2u * static_cast<std::uint32_t>(off);
        b ^= ((b >> 7) & 1u) << 4;
        CHECK(wgmma_element_addr(d, true, mn, k) == b);
      }
  }
  // "MN-Major, 64B swizzling and bf16 type": Swizzle<2,4,3> o ((8,4,2),(8,2)):((1,8,256),(32,512)),
  // LBO = 256 * 2, SBO = 512 * 2.
  {
    WgmmaDesc d;
    d.start = 0;
    d.lbo = 512;
    d.sbo = 1024;
    d.swizzle = 2;
    for (int mn = 0; mn < 64; ++mn)
      for (int k = 0; k < 16; ++k) {
        const int off =
            (mn % 8) + 8 * ((mn / 8) % 4) + 256 * (mn / 32) + 32 * (k % 8) + 512 * (k / 8);
        std::uint32_t b = 2u * static_cast<std::uint32_t>(off);
        b ^= ((b >> 7) & 3u) << 4;
        CHECK(wgmma_element_addr(d, true, mn, k) == b);
      }
  }
  // K-major, no swizzle (the "K-Major, no-swizzling" example's shape for 16-bit elements, T = 8):
  // ((8,m),(8,2)):((8,SBO),(1,LBO)) in elements.
  {
    WgmmaDesc d;
    d.start = 512;
    d.lbo = 1024;
    d.sbo = 256;
    for (int mn = 0; mn < 24; ++mn)
      for (int k = 0; k < 16; ++k)
        CHECK(wgmma_element_addr(d, false, mn, k) ==
              512u + static_cast<std::uint32_t>((mn % 8) * 16 + (mn / 8) * 256 + (k % 8) * 2 +
                                                (k / 8) * 1024));
  }
}

TEST_CASE("tensor_core: wgmma base offset reads a pattern that starts off its boundary",
          "[tensor_core]") {
  // The model's reading of "Matrix Descriptor Format": a 128B pattern whose first row sits at P,
  // with P % 1024 != 0, is described by base offset (P >> 7) & 7: row r of the pattern (r relative
  // to P) keeps its chunk c at c ^ (r % 8).
  const std::uint32_t P = 2048 + 3 * 128;
  WgmmaDesc d;
  d.start = P;
  d.sbo = 1024;
  d.swizzle = 1;
  d.base_offset = static_cast<int>((P >> 7) & 7);
  for (int r = 0; r < 8; ++r)
    for (int k = 0; k < 16; ++k)
      CHECK(wgmma_element_addr(d, false, r, k) ==
            P + static_cast<std::uint32_t>(r * 128 + ((k / 8) ^ r) * 16 + (k % 8) * 2));
  d.base_offset = 0;  // without it the phase follows the absolute address: a different layout
  CHECK(wgmma_element_addr(d, false, 0, 0) != P);
}

TEST_CASE("tensor_core: wgmma matches a naive matmul (ss and rs, K- and MN-major)",
          "[tensor_core]") {
  std::mt19937 rng(42);
  Smem s(96 * 1024);
  for (Elem e : {Elem::f16, Elem::bf16}) {
    INFO("dtype " << (e == Elem::f16 ? "f16" : "bf16"));
    {
      INFO("ss, A K-major 128B (k step 1 of a 64-wide row), B K-major 128B, n = 128");
      // Stage 07's S = Q K^T: both tiles 128-byte rows of 64 k, 1024-byte atoms; LBO unused (16).
      const Mat A = random_mat(e, 64, 64, rng), Bt = random_mat(e, 128, 64, rng);  // Bt = B^T
      write_k_major_swizzled(s, A, 0, 1, 1024);
      write_k_major_swizzled(s, Bt, 16384, 1, 1024);
      for (int step = 0; step < 4; ++step) {
        Mat B(16, 128);
        for (int k = 0; k < 16; ++k)
          for (int n = 0; n < 128; ++n)
            B.at(k, n) = Bt.at(n, 16 * step + k);
        const std::uint32_t off = 32u * static_cast<std::uint32_t>(step);
        check_wgmma(e, 128, s, desc(off, 16, 1024, 1), A, 16 * step, false, false,
                    desc(16384 + off, 16, 1024, 1), B, false, true, rng);
      }
    }
    {
      INFO("rs, B MN-major 128B, n = 64 and 128 (the next 64 columns at LBO)");
      // Stage 07's O += P V: V stored (k, n) with n contiguous.
      for (int n : {64, 128}) {
        const Mat A = random_mat(e, 64, 16, rng), B = random_mat(e, 16, n, rng);
        write_mn_major_swizzled(s, B, 8192, 1, 16384, 1024);
        for (bool scale : {true, false})
          check_wgmma(e, n, s, 0, A, 0, true, false, desc(8192, 16384, 1024, 1), B, true, scale,
                      rng);
      }
    }
    {
      INFO("ss, A M-major 64B, B K-major 32B, n = 8");
      const Mat A = random_mat(e, 64, 16, rng), B = random_mat(e, 16, 8, rng);
      Mat At(16, 64);  // A stored (k, m), m contiguous
      for (int m = 0; m < 64; ++m)
        for (int k = 0; k < 16; ++k)
          At.at(k, m) = A.at(m, k);
      write_mn_major_swizzled(s, At, 1024, 2, 2048, 512);  // 32 m per row; next 32 m at +2048
      Mat Bt(8, 16);
      for (int n = 0; n < 8; ++n)
        for (int k = 0; k < 16; ++k)
          Bt.at(n, k) = B.at(k, n);
      write_k_major_swizzled(s, Bt, 40960, 3, 256);
      check_wgmma(e, 8, s, desc(1024, 2048, 512, 2), A, 0, false, true, desc(40960, 16, 256, 3), B,
                  false, true, rng);
    }
    {
      INFO("ss, A K-major no swizzle, B MN-major no swizzle, n = 256");
      const Mat A = random_mat(e, 64, 16, rng), B = random_mat(e, 16, 256, rng);
      write_k_major_plain(s, A, 512, 128, 256);      // k halves adjacent, 8-row groups 256 B
      write_mn_major_plain(s, B, 20480, 4096, 128);  // 8 n per core matrix, k halves 4 KiB
      check_wgmma(e, 256, s, desc(512, 128, 256, 0), A, 0, false, false, desc(20480, 4096, 128, 0),
                  B, true, true, rng);
    }
    {
      INFO("ss, A M-major 32B, B MN-major 64B, n = 256, scale_d = 0 ignores a NaN D");
      const Mat A = random_mat(e, 64, 16, rng), B = random_mat(e, 16, 256, rng);
      Mat At(16, 64);
      for (int m = 0; m < 64; ++m)
        for (int k = 0; k < 16; ++k)
          At.at(k, m) = A.at(m, k);
      write_mn_major_swizzled(s, At, 0, 3, 512, 256);      // 16 m per 32-byte row
      write_mn_major_swizzled(s, B, 16384, 2, 1024, 512);  // 32 n per 64-byte row
      check_wgmma(e, 256, s, desc(0, 512, 256, 3), A, 0, false, true, desc(16384, 1024, 512, 2), B,
                  true, false, rng);
    }
    {
      INFO("rs, B K-major 64B, n = 72");
      const Mat A = random_mat(e, 64, 16, rng), B = random_mat(e, 16, 72, rng);
      const Val nan_val{0.0f, static_cast<std::uint16_t>(e == Elem::f16 ? 0x7E00 : 0x7FC0)};
      Mat Bt(72, 32);  // rows of 32 k (64 bytes); this wgmma reads k 0..15
      for (int n = 0; n < 72; ++n)
        for (int k = 0; k < 32; ++k)
          Bt.at(n, k) = k < 16 ? B.at(k, n) : nan_val;  // NaN where it must not read
      write_k_major_swizzled(s, Bt, 3584 + 512, 2, 512);
      check_wgmma(e, 72, s, 0, A, 0, true, false, desc(3584 + 512, 16, 512, 2), B, false, true,
                  rng);
    }
  }
}

TEST_CASE("tensor_core: wgmma faults", "[tensor_core]") {
  Smem s(32 * 1024);
  std::vector<float> regs(128 * 128, 0.0f);
  float* d[128];
  for (int t = 0; t < 128; ++t)
    d[t] = regs.data() + 128 * t;
  const std::uint64_t ok = desc(0, 16, 1024, 1);
  REQUIRE_NOTHROW(wgmma_m64nNk16(Elem::f16, 64, s.win, ok, nullptr, false, ok, false, d, true));
  for (int n : {0, 4, 12, 264, -8})
    CHECK_THROWS_WITH(wgmma_m64nNk16(Elem::f16, n, s.win, ok, nullptr, false, ok, false, d, true),
                      Catch::Matchers::ContainsSubstring(std::to_string(n)));
  std::uint32_t a[128][4] = {};
  CHECK_THROWS_WITH(wgmma_m64nNk16(Elem::bf16, 64, s.win, 0, a, true, ok, false, d, true),
                    Catch::Matchers::ContainsSubstring("imm-trans-a"));
  CHECK_NOTHROW(wgmma_m64nNk16(Elem::bf16, 64, s.win, 0, a, false, ok, true, d, true));
  // B's 64 rows of 1024-byte atoms end past the 32 KiB window when it starts at 30 KiB.
  CHECK_THROWS_WITH(
      wgmma_m64nNk16(Elem::f16, 64, s.win, ok, nullptr, false, desc(30 * 1024, 16, 1024, 1), false,
                     d, true),
      Catch::Matchers::ContainsSubstring("outside") && Catch::Matchers::ContainsSubstring("B"));
  // A through a descriptor whose SBO sends rows 8.. past the window.
  CHECK_THROWS_WITH(
      wgmma_m64nNk16(Elem::f16, 8, s.win, desc(0, 16, 8192, 1), nullptr, false, ok, false, d, true),
      Catch::Matchers::ContainsSubstring("outside") && Catch::Matchers::ContainsSubstring("A"));
}
