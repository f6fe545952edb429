// emu/src/layout.cpp — fragment layouts probed from the instruction models (fsemu/layout.hpp).
#include "fsemu/layout.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "fsemu/model/tensor_core.hpp"

namespace fsemu {
namespace {

using model::Elem;

constexpr Elem kElem = Elem::f16;

// The fp16 bits of a small non-negative integer (every probe value is one: 0 .. 64), checked
// against the model's own decoding.
std::uint16_t f16_bits(int v) {
  std::uint16_t bits = 0;
  if (v != 0) {
    int e = 0;
    while ((2 << e) <= v)
      ++e;  // 2^e <= v < 2^(e+1)
    const int mantissa = (v - (1 << e)) << (10 - e);
    bits = static_cast<std::uint16_t>(((e + 15) << 10) | mantissa);
  }
  if (model::elem_to_float(kElem, bits) != static_cast<float>(v))
    throw std::logic_error("fsemu layout probe: fp16 encoding of " + std::to_string(v));
  return bits;
}

std::uint32_t pack(std::uint16_t lo, std::uint16_t hi) {
  return std::uint32_t{lo} | (std::uint32_t{hi} << 16);
}

// A small shared-memory window the probes own.
struct Window {
  std::vector<std::uint8_t> bytes;
  model::SharedWindow view;
  explicit Window(std::uint32_t size) : bytes(size, 0) { view = {bytes.data(), size}; }
  void clear() { std::fill(bytes.begin(), bytes.end(), std::uint8_t{0}); }
  void put(std::uint32_t addr, int value) { view.store(addr, f16_bits(value), "layout probe"); }
};

// The value a probe reads back must be a small exact integer.
int as_int(float v, const char* what) {
  const float r = std::nearbyint(v);
  if (r != v || r < 0 || r > 1 << 20)
    throw std::runtime_error(std::string("fsemu layout probe (") + what + "): read back " +
                             std::to_string(v) + ", not a coordinate");
  return static_cast<int>(r);
}

FragmentGrid empty_grid(int rows, int cols) {
  FragmentGrid g;
  g.rows = rows;
  g.cols = cols;
  g.cells.assign(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols), {});
  return g;
}

void place(FragmentGrid& g, int r, int c, FragmentSlot s, const char* what) {
  if (r < 0 || r >= g.rows || c < 0 || c >= g.cols)
    throw std::runtime_error(std::string("fsemu layout probe (") + what + "): element (" +
                             std::to_string(r) + ", " + std::to_string(c) + ") lies outside the " +
                             std::to_string(g.rows) + " x " + std::to_string(g.cols) + " matrix");
  FragmentSlot& cell = g.cells[static_cast<std::size_t>(r) * static_cast<std::size_t>(g.cols) +
                               static_cast<std::size_t>(c)];
  if (cell.thread >= 0)
    throw std::runtime_error(std::string("fsemu layout probe (") + what +
                             "): two registers land on element (" + std::to_string(r) + ", " +
                             std::to_string(c) + ")");
  cell = s;
}

void require_complete(const FragmentGrid& g, const char* what) {
  for (int r = 0; r < g.rows; ++r)
    for (int c = 0; c < g.cols; ++c)
      if (g.at(r, c).thread < 0)
        throw std::runtime_error(std::string("fsemu layout probe (") + what +
                                 "): no register holds element (" + std::to_string(r) + ", " +
                                 std::to_string(c) + ")");
}

// ---- mma.m16n8k16 ------------------------------------------------------------------------------

using MmaA = std::uint32_t[32][4];
using MmaB = std::uint32_t[32][2];
using MmaAcc = float[32][4];

// A (16 x 16) and B (16 x 8) matrices given as functions of their coordinates, turned into
// fragments by the ldmatrix model from row-major tiles (layout.hpp says which rows each lane
// points at).
template <class FA, class FB>
void load_mma_operands(FA a_of, FB b_of, MmaA& a, MmaB& b) {
  Window w(1024);
  const std::uint32_t a_base = 0, b_base = 512;  // A: 16 rows x 32 B; B^T: 8 rows (n) x 32 B
  for (int m = 0; m < 16; ++m)
    for (int k = 0; k < 16; ++k)
      w.put(a_base + static_cast<std::uint32_t>(m * 32 + k * 2), a_of(m, k));
  for (int n = 0; n < 8; ++n)
    for (int k = 0; k < 16; ++k)
      w.put(b_base + static_cast<std::uint32_t>(n * 32 + k * 2), b_of(k, n));
  std::uint32_t addr[32];
  std::uint32_t out[32][4] = {};
  for (int lane = 0; lane < 32; ++lane) {
    const int q = lane / 8, row = lane % 8;
    const int m = row + 8 * (q % 2), k0 = 8 * (q / 2);
    addr[lane] = a_base + static_cast<std::uint32_t>(m * 32 + k0 * 2);
  }
  model::ldmatrix(w.view, 4, false, addr, out);
  for (int lane = 0; lane < 32; ++lane)
    for (int r = 0; r < 4; ++r)
      a[lane][r] = out[lane][r];
  for (int lane = 0; lane < 32; ++lane) {
    const int q = (lane / 8) % 2, n = lane % 8;  // lanes 16..31 are ignored by .x2
    addr[lane] = b_base + static_cast<std::uint32_t>(n * 32 + 8 * q * 2);
  }
  model::ldmatrix(w.view, 2, false, addr, out);
  for (int lane = 0; lane < 32; ++lane)
    for (int r = 0; r < 2; ++r)
      b[lane][r] = out[lane][r];
}

void run_mma(const MmaA& a, const MmaB& b, MmaAcc& acc) {
  model::mma_m16n8k16(kElem, a, b, acc);
}

}  // namespace

MmaLayouts probe_mma_m16n8k16() {
  MmaLayouts L;
  L.a = empty_grid(16, 16);
  L.b = empty_grid(16, 8);
  L.d = empty_grid(16, 8);

  // D: which (m, n) each accumulator register holds.
  MmaA a;
  MmaB b;
  MmaAcc rows = {}, cols = {};
  load_mma_operands([](int m, int k) { return k == 0 ? m + 1 : 0; },
                    [](int k, int) { return k == 0 ? 1 : 0; }, a, b);
  run_mma(a, b, rows);
  load_mma_operands([](int, int k) { return k == 0 ? 1 : 0; },
                    [](int k, int n) { return k == 0 ? n + 1 : 0; }, a, b);
  run_mma(a, b, cols);
  int d_row[32][4], d_col[32][4];
  for (int l = 0; l < 32; ++l)
    for (int i = 0; i < 4; ++i) {
      d_row[l][i] = as_int(rows[l][i], "mma D rows") - 1;
      d_col[l][i] = as_int(cols[l][i], "mma D columns") - 1;
      place(L.d, d_row[l][i], d_col[l][i], {l, i, -1}, "mma C/D");
    }
  require_complete(L.d, "mma C/D");

  // C in = D out: a 1.0 in one C register, A = B = 0, comes out in the same register.
  const MmaA zero_a = {};
  const MmaB zero_b = {};
  for (int l = 0; l < 32; ++l)
    for (int i = 0; i < 4; ++i) {
      MmaAcc acc = {};
      acc[l][i] = 1.0f;
      run_mma(zero_a, zero_b, acc);
      for (int l2 = 0; l2 < 32; ++l2)
        for (int i2 = 0; i2 < 4; ++i2)
          if ((acc[l2][i2] != 0.0f) != (l2 == l && i2 == i))
            throw std::runtime_error("fsemu layout probe (mma C): a 1.0 in lane " +
                                     std::to_string(l) + " c" + std::to_string(i) +
                                     " does not come out in the same D register");
    }

  // The one nonzero accumulator of a probe: its (m, n) from D's layout, its value - 1 the k.
  auto landing = [&](const MmaAcc& acc, const char* what, int* m, int* n, int* k) {
    int found = 0;
    for (int l = 0; l < 32; ++l)
      for (int i = 0; i < 4; ++i)
        if (acc[l][i] != 0.0f) {
          ++found;
          *m = d_row[l][i];
          *n = d_col[l][i];
          *k = as_int(acc[l][i], what) - 1;
        }
    if (found != 1)
      throw std::runtime_error(std::string("fsemu layout probe (") + what +
                               "): a one-hot input "
                               "landed in " +
                               std::to_string(found) + " accumulators, not one");
  };

  // A: one lane's register half = 1.0; B[k][0] = k + 1, other columns 0.
  MmaA unused_a;
  MmaB b_k;
  load_mma_operands([](int, int) { return 0; }, [](int k, int n) { return n == 0 ? k + 1 : 0; },
                    unused_a, b_k);
  for (int l = 0; l < 32; ++l)
    for (int r = 0; r < 4; ++r)
      for (int h = 0; h < 2; ++h) {
        MmaA probe = {};
        probe[l][r] = h == 0 ? pack(f16_bits(1), 0) : pack(0, f16_bits(1));
        MmaAcc acc = {};
        run_mma(probe, b_k, acc);
        int m = 0, n = 0, k = 0;
        landing(acc, "mma A", &m, &n, &k);
        if (n != 0) throw std::runtime_error("fsemu layout probe (mma A): landed off column 0");
        place(L.a, m, k, {l, r, h}, "mma A");
      }
  require_complete(L.a, "mma A");

  // B: one lane's register half = 1.0; A[0][k] = k + 1, other rows 0.
  MmaA a_k;
  MmaB unused_b;
  load_mma_operands([](int m, int k) { return m == 0 ? k + 1 : 0; }, [](int, int) { return 0; },
                    a_k, unused_b);
  for (int l = 0; l < 32; ++l)
    for (int r = 0; r < 2; ++r)
      for (int h = 0; h < 2; ++h) {
        MmaB probe = {};
        probe[l][r] = h == 0 ? pack(f16_bits(1), 0) : pack(0, f16_bits(1));
        MmaAcc acc = {};
        run_mma(a_k, probe, acc);
        int m = 0, n = 0, k = 0;
        landing(acc, "mma B", &m, &n, &k);
        if (m != 0) throw std::runtime_error("fsemu layout probe (mma B): landed off row 0");
        place(L.b, k, n, {l, r, h}, "mma B");
      }
  require_complete(L.b, "mma B");
  return L;
}

namespace {

// ---- wgmma m64nNk16 ----------------------------------------------------------------------------

// Operands in shared memory, K-major, no swizzle: core matrices of 8 rows x 16 bytes, the two k
// halves LBO = 128 bytes apart, 8-row groups SBO = 256 bytes apart. A at 0 (64 rows), B at 2048
// (up to 256 columns).
constexpr std::uint32_t kA = 0, kB = 2048, kLbo = 128, kSbo = 256;

std::uint64_t make_desc(std::uint32_t start) {
  return std::uint64_t{(start & 0x3FFFFu) >> 4} | (std::uint64_t{kLbo >> 4} << 16) |
         (std::uint64_t{kSbo >> 4} << 32);
}

struct WgmmaProbe {
  int n;
  Window w{kB + 256 * 32};
  std::vector<float> acc;
  explicit WgmmaProbe(int n_) : n(n_), acc(static_cast<std::size_t>(128 * n_ / 2), 0.0f) {}

  template <class F>
  void set_a(F a_of) {
    const model::WgmmaDesc d = model::decode_wgmma_desc(make_desc(kA));
    for (int m = 0; m < 64; ++m)
      for (int k = 0; k < 16; ++k)
        w.put(model::wgmma_element_addr(d, false, m, k), a_of(m, k));
  }
  template <class F>
  void set_b(F b_of) {
    const model::WgmmaDesc d = model::decode_wgmma_desc(make_desc(kB));
    for (int c = 0; c < n; ++c)
      for (int k = 0; k < 16; ++k)
        w.put(model::wgmma_element_addr(d, false, c, k), b_of(k, c));
  }
  float& d(int thread, int i) { return acc[static_cast<std::size_t>(thread * n / 2 + i)]; }
  // D = A * B (scale-d false), A from shared memory or from a_regs.
  void run(const std::uint32_t (*a_regs)[4]) {
    float* ptrs[128];
    for (int t = 0; t < 128; ++t)
      ptrs[t] = &d(t, 0);
    model::wgmma_m64nNk16(kElem, n, w.view, make_desc(kA), a_regs, false, make_desc(kB), false,
                          ptrs, false);
  }
};

}  // namespace

WgmmaLayouts probe_wgmma_m64nNk16(int n) {
  if (n < 8 || n > 256 || n % 8 != 0)
    throw std::invalid_argument("probe_wgmma_m64nNk16: N must be 8, 16, ..., 256");
  WgmmaLayouts L;
  L.n = n;
  L.d = empty_grid(64, n);
  L.a = empty_grid(64, 16);
  const int regs = n / 2;

  WgmmaProbe p(n);
  std::vector<int> d_row(static_cast<std::size_t>(128 * regs)), d_col(d_row.size());
  auto at = [&](std::vector<int>& v, int t, int i) -> int& {
    return v[static_cast<std::size_t>(t * regs + i)];
  };
  p.set_a([](int m, int k) { return k == 0 ? m + 1 : 0; });
  p.set_b([](int k, int) { return k == 0 ? 1 : 0; });
  p.run(nullptr);
  for (int t = 0; t < 128; ++t)
    for (int i = 0; i < regs; ++i)
      at(d_row, t, i) = as_int(p.d(t, i), "wgmma D rows") - 1;
  p.set_a([](int, int k) { return k == 0 ? 1 : 0; });
  p.set_b([](int k, int c) { return k == 0 ? c + 1 : 0; });
  p.run(nullptr);
  for (int t = 0; t < 128; ++t)
    for (int i = 0; i < regs; ++i) {
      at(d_col, t, i) = as_int(p.d(t, i), "wgmma D columns") - 1;
      place(L.d, at(d_row, t, i), at(d_col, t, i), {t, i, -1}, "wgmma D");
    }
  require_complete(L.d, "wgmma D");

  // Register A: one thread's register half = 1.0; B[k][0] = k + 1, other columns 0.
  p.set_b([](int k, int c) { return c == 0 ? k + 1 : 0; });
  std::uint32_t a_regs[128][4];
  for (int t = 0; t < 128; ++t)
    for (int r = 0; r < 4; ++r)
      for (int h = 0; h < 2; ++h) {
        std::memset(a_regs, 0, sizeof a_regs);
        a_regs[t][r] = h == 0 ? pack(f16_bits(1), 0) : pack(0, f16_bits(1));
        p.run(a_regs);
        int found = 0, m = 0, k = 0;
        for (int t2 = 0; t2 < 128; ++t2)
          for (int i = 0; i < regs; ++i)
            if (p.d(t2, i) != 0.0f) {
              ++found;
              if (at(d_col, t2, i) != 0)
                throw std::runtime_error("fsemu layout probe (wgmma A): landed off column 0");
              m = at(d_row, t2, i);
              k = as_int(p.d(t2, i), "wgmma A") - 1;
            }
        if (found != 1)
          throw std::runtime_error("fsemu layout probe (wgmma A): a one-hot register landed in " +
                                   std::to_string(found) + " accumulators, not one");
        place(L.a, m, k, {t, r, h}, "wgmma A");
      }
  require_complete(L.a, "wgmma A");
  return L;
}

namespace {

// ---- printing ----------------------------------------------------------------------------------

std::string cell_text(const FragmentSlot& s, bool thread_in_warpgroup) {
  std::ostringstream t;
  t << (thread_in_warpgroup ? 't' : 'l') << (thread_in_warpgroup ? s.thread : s.thread % 32) << ".r"
    << s.reg
    << (s.half == 0   ? ".lo"
        : s.half == 1 ? ".hi"
                      : "");
  return t.str();
}

void trim_right(std::string& s) {
  while (!s.empty() && s.back() == ' ')
    s.pop_back();
}

// The grid, one line per row: "  9 | l4.r2  l4.r3  ...", cells padded to the widest. Rows come in
// groups of `group` (0: one group); a group whose cells all belong to one warp is headed by it and
// its cells name lanes, else cells name threads of the warpgroup.
std::string grid_text(const FragmentGrid& g, const char* row_name, const char* col_name, int group,
                      bool warpgroup) {
  if (group <= 0) group = g.rows;
  std::ostringstream out;
  for (int r0 = 0; r0 < g.rows; r0 += group) {
    const int r1 = std::min(g.rows, r0 + group);
    int warp = g.at(r0, 0).thread / 32;
    for (int r = r0; r < r1; ++r)
      for (int c = 0; c < g.cols; ++c)
        if (g.at(r, c).thread / 32 != warp) warp = -1;
    const bool by_thread = warpgroup && warp < 0;
    std::vector<std::string> cells;
    std::size_t width = 0;
    for (int r = r0; r < r1; ++r)
      for (int c = 0; c < g.cols; ++c) {
        cells.push_back(cell_text(g.at(r, c), by_thread));
        width = std::max(width, cells.back().size());
      }
    if (warpgroup) {
      out << "  rows " << r0 << ".." << r1 - 1;
      if (warp >= 0)
        out << ": warp " << warp << " (threads " << 32 * warp << ".." << 32 * warp + 31
            << "; lN = thread " << 32 * warp << " + N)\n";
      else
        out << ": several warps (tN = thread N of the warpgroup)\n";
    }
    std::string head = std::string("  ") + row_name + "\\" + col_name;
    head.resize(std::max<std::size_t>(head.size(), 5), ' ');
    head += " |";
    for (int c = 0; c < g.cols; ++c) {
      std::string num = std::to_string(c);
      num.resize(width, ' ');
      head += " " + num;
    }
    trim_right(head);
    out << head << '\n';
    std::size_t i = 0;
    for (int r = r0; r < r1; ++r) {
      std::string line = std::to_string(r);
      line.insert(0, line.size() < 3 ? 3 - line.size() : 0, ' ');
      line = "  " + line + " |";
      for (int c = 0; c < g.cols; ++c) {
        std::string cell = cells[i++];
        cell.resize(width, ' ');
        line += " " + cell;
      }
      trim_right(line);
      out << line << '\n';
    }
  }
  return out.str();
}

}  // namespace

std::string mma_m16n8k16_layout_report() {
  const MmaLayouts L = probe_mma_m16n8k16();
  std::ostringstream out;
  out << "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 — one warp; a cell lL.rR[.lo|.hi] is\n"
         "lane L, fragment register R (a0..a3, b0..b1, c0..c3 = d0..d3) and, for the packed\n"
         "16-bit operands, its low or high half. Read off the emulator's models: A and B given by\n"
         "the ldmatrix model from row-major shared-memory tiles (A by ldmatrix.x4, the four 8x8\n"
         "quadrants in the ISA's a0..a3 order; B, the .col operand, stored N x K, by "
         "ldmatrix.x2),\n"
         "with values that name their row or column, show which D register holds which (m, n);\n"
         "then a 1.0 in one lane's A (B) register half, the other operand carrying k + 1, lands\n"
         "in D at the element's row (column) with the value k + 1.\n\n";
  out << "A (16 x 16, row-major): the cell in row m, column k holds A[m][k]\n"
      << grid_text(L.a, "m", "k", 0, false) << '\n';
  out << "B (16 x 8, the .col operand): the cell in row k, column n holds B[k][n]\n"
      << grid_text(L.b, "k", "n", 0, false) << '\n';
  out << "C / D (16 x 8, fp32; a 1.0 put in a C register comes out in the same D register):\n"
         "the cell in row m, column n holds D[m][n]\n"
      << grid_text(L.d, "m", "n", 0, false);
  return out.str();
}

std::string wgmma_m64nNk16_layout_report(int n) {
  const WgmmaLayouts L = probe_wgmma_m64nNk16(n);
  std::ostringstream out;
  out << "wgmma.mma_async.sync.aligned.m64n" << n
      << "k16.f32.f16.f16 — one warpgroup (4 warps, 128\n"
         "threads); a cell lL.rR[.lo|.hi] is lane L of the warp that heads its rows, register R\n"
         "of the thread's fragment (d0.."
      << n / 2 - 1
      << "; a0..a3, 16-bit halves). Read off the emulator's model: A and B\n"
         "from shared memory through matrix descriptors (K-major, no swizzle; their elements "
         "placed\n"
         "by the model's descriptor addressing) with values that name their row or column show\n"
         "which D register holds which (m, n); then a 1.0 in one thread's register-A half, B\n"
         "carrying k + 1 in column 0, lands in D at (m, 0) with the value k + 1.\n\n";
  out << "D (64 x " << n << ", fp32 accumulators): the cell in row m, column n holds D[m][n]\n"
      << grid_text(L.d, "m", "n", 16, true) << '\n';
  out << "A from registers (64 x 16): the cell in row m, column k holds A[m][k]\n"
      << grid_text(L.a, "m", "k", 16, true);
  return out.str();
}

}  // namespace fsemu
