// emu/src/device.cpp — the warp-synchronous intrinsics, WMMA and the tensor-core PTX of
// flashsteps/cuda/ptx.cuh, as collective operations over the instruction models
// (fsemu/model/tensor_core.hpp); and the checks made when a thread or block ends.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "fsemu/access.hpp"
#include "fsemu/async.hpp"
#include "fsemu/device.hpp"
#include "fsemu/model/tensor_core.hpp"
#include "fsemu/ptx.hpp"
#include "fsemu/sync.hpp"
#include "fsemu/wmma.hpp"
#include "lifetime.hpp"
#include "profile.hpp"
#include "registers.hpp"
#include "sanitize.hpp"
#include "state.hpp"

namespace fsemu {
namespace {

constexpr std::uint32_t kFull = 0xffffffffu;
const char* shuffle_name(ShuffleMode m) {
  switch (m) {
    case ShuffleMode::idx:
      return "__shfl_sync (shfl.sync.idx)";
    case ShuffleMode::up:
      return "__shfl_up_sync (shfl.sync.up)";
    case ShuffleMode::down:
      return "__shfl_down_sync (shfl.sync.down)";
    default:
      return "__shfl_xor_sync (shfl.sync.bfly)";
  }
}

std::string hex(std::uint64_t v) {
  return "0x" + model::SharedWindow::hex(v);
}

}  // namespace

std::uint64_t shuffle(ShuffleMode mode, std::uint32_t mask, std::uint64_t value, int operand,
                      int width) {
  struct Arg {
    std::uint64_t value;
    int operand, width;
    std::uint64_t result;
  } mine{value, operand, width, 0};
  const char* what = shuffle_name(mode);
  collective(Scope::warp, mask, what, mine, [&](Arg* const* a) {
    profile::warp_op(profile::Op::shfl);
    for (int l = 0; l < 32; ++l) {
      if (!a[l]) continue;
      const int w = a[l]->width;
      if (w <= 0 || w > 32 || (w & (w - 1)) != 0)
        fault(std::string(what) + ": width " + std::to_string(w) +
              " is not a power of two in 1..32");
      const int seg = l / w * w, op = a[l]->operand;
      int src = l;
      switch (mode) {
        case ShuffleMode::idx:
          src = seg + ((op % w) + w) % w;
          break;
        case ShuffleMode::up:
          src = l - op >= seg ? l - op : l;
          break;
        case ShuffleMode::down:
          src = l + op < seg + w ? l + op : l;
          break;
        case ShuffleMode::bfly:
          src = (l ^ op) / w == l / w ? l ^ op : l;
          break;
      }
      if (!a[src])
        fault(std::string(what) + ": lane " + std::to_string(l) + " reads lane " +
              std::to_string(src) + ", which is not in the member mask " + hex(mask) +
              " (its value is undefined)");
      a[l]->result = a[src]->value;
    }
  });
  return mine.result;
}

std::uint32_t vote(VoteMode mode, std::uint32_t mask, bool predicate) {
  struct Arg {
    bool p;
    std::uint32_t result;
  } mine{predicate, 0};
  const char* what = mode == VoteMode::ballot ? "__ballot_sync"
                     : mode == VoteMode::any  ? "__any_sync"
                                              : "__all_sync";
  collective(Scope::warp, mask, what, mine, [&](Arg* const* a) {
    profile::warp_op(profile::Op::vote);
    std::uint32_t ballot = 0;
    for (int l = 0; l < 32; ++l)
      if (a[l] && a[l]->p) ballot |= 1u << l;
    const std::uint32_t r = mode == VoteMode::ballot ? ballot
                            : mode == VoteMode::any  ? (ballot != 0)
                                                     : (ballot == mask);
    for (int l = 0; l < 32; ++l)
      if (a[l]) a[l]->result = r;
  });
  return mine.result;
}

void syncwarp(std::uint32_t mask) {
  int mine = 0;
  collective(Scope::warp, mask, "__syncwarp", mine,
             [](int* const*) { profile::warp_op(profile::Op::syncwarp); });
}

long long clock_cycles() {
  // A per-process counter: only differences matter (the watchdog), and a watchdog never fires
  // here — a wait that cannot end is a deadlock the scheduler reports.
  static long long t = 0;
  return ++t;
}

// ---------------------------------------------------------------------------------------------
// Atomic adds (atomicAdd: atom.add / red.add). The emulator's threads run one at a time, so the
// read-modify-write is atomic by construction; it is made with the compiler's atomics all the
// same, which is what the TSan build needs to see: atomics do not race with each other, and a
// plain access racing one is reported. The ordinary build hands it to the access observers as
// one atomic access at the kernel's line (the shim's atomicAdd is always inlined): the profiler
// counts it, the check of races between blocks (global_races.hpp) judges it.
namespace {

bool in_shared_window(const void* p) {
  const model::SharedWindow& w = shared_window();
  const auto* b = static_cast<const std::uint8_t*>(p);
  return b >= w.base && b < w.base + w.size;
}

float flush_subnormal(float x) {
  return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
}

template <class T, class Op>
T atomic_rmw(T* p, [[maybe_unused]] const void* pc, Op&& op) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atom operates on 32- or 64-bit words here");
  if (reinterpret_cast<std::uintptr_t>(p) % sizeof(T) != 0)
    fault("atomicAdd of " + std::to_string(sizeof(T)) + " bytes at " +
          hex(reinterpret_cast<std::uintptr_t>(p)) + ": the address is not " +
          std::to_string(sizeof(T)) + "-byte aligned (misaligned address on the GPU)");
#if !defined(FSEMU_TSAN)
  if (access::detail::g_count)
    access::detail::dispatch(p, static_cast<std::uint32_t>(sizeof(T)), true, true, pc);
#endif
  using Word = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  Word* w = reinterpret_cast<Word*>(p);
  Word old = __atomic_load_n(w, __ATOMIC_RELAXED);
  for (;;) {
    T before;
    std::memcpy(&before, &old, sizeof before);
    const T after = op(before);
    Word bits;
    std::memcpy(&bits, &after, sizeof bits);
    if (__atomic_compare_exchange_n(w, &old, bits, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
      return before;
  }
}

}  // namespace

float atomic_add(float* p, float v) {
  // PTX ISA, atom: .add.f32 rounds to nearest even; on global memory the current implementation
  // flushes subnormal inputs and results to sign-preserving zero, on shared memory it does not.
  const bool global = !in_shared_window(p);
  return atomic_rmw(p, __builtin_return_address(0), [global, v](float old) {
    return global ? flush_subnormal(flush_subnormal(old) + flush_subnormal(v)) : old + v;
  });
}
double atomic_add(double* p, double v) {
  return atomic_rmw(p, __builtin_return_address(0), [v](double old) { return old + v; });
}
int atomic_add(int* p, int v) {
  // Two's-complement wrap-around, as the hardware's (no signed overflow in the host's C++).
  return atomic_rmw(p, __builtin_return_address(0), [v](int old) {
    return static_cast<int>(static_cast<unsigned>(old) + static_cast<unsigned>(v));
  });
}
unsigned atomic_add(unsigned* p, unsigned v) {
  return atomic_rmw(p, __builtin_return_address(0), [v](unsigned old) { return old + v; });
}
unsigned long long atomic_add(unsigned long long* p, unsigned long long v) {
  return atomic_rmw(p, __builtin_return_address(0),
                    [v](unsigned long long old) { return old + v; });
}

// ---------------------------------------------------------------------------------------------
// cuda::atomic_ref (fsemu/sync.hpp, emu/shim/cuda/atomic): loads, stores and read-modify-writes
// with a memory order on 4- and 8-byte words. Each is one atomic access for the access observers
// at the kernel's line (the shim's methods are always inlined, so the return address here is the
// kernel's); a load is also a poll (poll_unchanged, scheduler.cpp). Acquire and release are
// happens-before edges through the word (sanitize.hpp); memory itself is sequentially consistent.
namespace sync {
namespace {

void check_word(const void* p, std::uint32_t size, const char* what) {
  if (size != 4 && size != 8)
    fault(std::string(what) + " of " + std::to_string(size) +
          " bytes (the emulator's cuda::atomic_ref takes 4- and 8-byte words)");
  if (reinterpret_cast<std::uintptr_t>(p) % size != 0)
    fault(std::string(what) + " of " + std::to_string(size) + " bytes at " +
          hex(reinterpret_cast<std::uintptr_t>(p)) + ": the address is not " +
          std::to_string(size) + "-byte aligned (misaligned address on the GPU)");
}
bool acquires(Order o) {
  return o == Order::acquire || o == Order::acq_rel || o == Order::seq_cst;
}
bool releases(Order o) {
  return o == Order::release || o == Order::acq_rel || o == Order::seq_cst;
}
void observe([[maybe_unused]] const void* p, [[maybe_unused]] std::uint32_t size,
             [[maybe_unused]] bool write, [[maybe_unused]] const void* pc) {
#if !defined(FSEMU_TSAN)
  if (access::detail::g_count)
    access::detail::dispatch(const_cast<void*>(p), size, write, true, pc);
#endif
}
std::uint64_t read_word(const void* p, std::uint32_t size) {
  return size == 4 ? __atomic_load_n(static_cast<const std::uint32_t*>(p), __ATOMIC_SEQ_CST)
                   : __atomic_load_n(static_cast<const std::uint64_t*>(p), __ATOMIC_SEQ_CST);
}
template <class W>
std::uint64_t apply(Op op, bool is_signed, W old, W v) {
  using S = std::make_signed_t<W>;
  switch (op) {
    case Op::add:
      return static_cast<W>(old + v);
    case Op::exchange:
      return v;
    case Op::min:
      return is_signed ? static_cast<W>(std::min(static_cast<S>(old), static_cast<S>(v)))
                       : std::min(old, v);
    case Op::max:
      return is_signed ? static_cast<W>(std::max(static_cast<S>(old), static_cast<S>(v)))
                       : std::max(old, v);
    case Op::and_:
      return old & v;
    case Op::or_:
      return old | v;
    case Op::xor_:
      return old ^ v;
  }
  return old;
}
template <class W, class F>
std::uint64_t update(void* p, F&& next) {
  W* w = static_cast<W*>(p);
  W old = __atomic_load_n(w, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(w, &old, static_cast<W>(next(old)), false, __ATOMIC_SEQ_CST,
                                      __ATOMIC_RELAXED)) {
  }
  return old;
}

}  // namespace

std::uint64_t load(const void* p, std::uint32_t size, Order order) {
  const void* pc = __builtin_return_address(0);
  check_word(p, size, "cuda::atomic_ref load");
  for (;;) {
    observe(p, size, false, pc);
    const std::uint64_t v = read_word(p, size);
    if (acquires(order)) sanitize::acquire(p);
    if (!poll_unchanged(p, size, v, pc)) return v;
  }
}
void store(void* p, std::uint32_t size, std::uint64_t value, Order order) {
  const void* pc = __builtin_return_address(0);
  check_word(p, size, "cuda::atomic_ref store");
  if (releases(order)) sanitize::release(p);
  observe(p, size, true, pc);
  if (size == 4)
    __atomic_store_n(static_cast<std::uint32_t*>(p), static_cast<std::uint32_t>(value),
                     __ATOMIC_SEQ_CST);
  else
    __atomic_store_n(static_cast<std::uint64_t*>(p), value, __ATOMIC_SEQ_CST);
  if (releases(order)) yield_after_release();
}
std::uint64_t rmw(void* p, std::uint32_t size, bool is_signed, Op op, std::uint64_t value,
                  Order order) {
  const void* pc = __builtin_return_address(0);
  check_word(p, size, "cuda::atomic_ref read-modify-write");
  if (releases(order)) sanitize::release(p);
  observe(p, size, true, pc);
  const std::uint64_t old =
      size == 4 ? update<std::uint32_t>(p,
                                        [&](std::uint32_t o) {
                                          return apply<std::uint32_t>(
                                              op, is_signed, o, static_cast<std::uint32_t>(value));
                                        })
                : update<std::uint64_t>(p, [&](std::uint64_t o) {
                    return apply<std::uint64_t>(op, is_signed, o, value);
                  });
  if (acquires(order)) sanitize::acquire(p);
  if (releases(order)) yield_after_release();
  return old;
}
std::uint64_t compare_exchange(void* p, std::uint32_t size, std::uint64_t expected,
                               std::uint64_t desired, Order order) {
  const void* pc = __builtin_return_address(0);
  check_word(p, size, "cuda::atomic_ref compare_exchange");
  if (releases(order)) sanitize::release(p);
  observe(p, size, true, pc);
  const std::uint64_t mask = size == 4 ? 0xffffffffULL : ~0ULL;
  const std::uint64_t old =
      size == 4
          ? update<std::uint32_t>(
                p,
                [&](std::uint32_t o) {
                  return o == (expected & mask) ? static_cast<std::uint32_t>(desired) : o;
                })
          : update<std::uint64_t>(p, [&](std::uint64_t o) { return o == expected ? desired : o; });
  if (acquires(order)) sanitize::acquire(p);
  if (old != (expected & mask)) {
    // A failed compare-and-swap is a poll too (a spin lock retries it): if it found what the
    // thread's last look at the word found, the thread waits until the word changes, and the
    // compare-and-swap fails with what it found.
    poll_unchanged(p, size, old, pc);
    return old;
  }
  if (releases(order)) yield_after_release();
  return old;
}
void nanosleep(unsigned) {}

}  // namespace sync

// ---------------------------------------------------------------------------------------------
// WMMA m16n16k16 (emu/shim/mma.h): lane l holds logical elements 8l .. 8l+7 (row-major).
namespace wmma {
namespace {

int elem_bytes(Type t) {
  return t == Type::f32 ? 4 : 2;
}
float to_float(Type t, const void* p) {
  if (t == Type::f32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  std::uint16_t bits;
  std::memcpy(&bits, p, 2);
  return model::elem_to_float(t == Type::f16 ? model::Elem::f16 : model::Elem::bf16, bits);
}

struct MoveArg {
  Use use;
  Type type;
  bool col_major;
  void* x;
  const void* p;
  unsigned ldm;
};

// Checks the rules of "Warp Matrix Functions" and that every lane passed the same operands.
void check_move(MoveArg* const* a, const char* what) {
  for (int l = 1; l < 32; ++l)
    if (a[l]->p != a[0]->p || a[l]->ldm != a[0]->ldm || a[l]->col_major != a[0]->col_major ||
        a[l]->use != a[0]->use || a[l]->type != a[0]->type)
      fault(
          std::string(what) + ": lane " + std::to_string(l) +
          " passes a different pointer, ldm or layout than lane 0 (all lanes must pass the same)");
  const int eb = elem_bytes(a[0]->type);
  if (reinterpret_cast<std::uintptr_t>(a[0]->p) % 32 != 0)
    fault(std::string(what) + ": the pointer is not 256-bit (32-byte) aligned");
  if (a[0]->ldm * eb % 16 != 0)
    fault(std::string(what) + ": ldm " + std::to_string(a[0]->ldm) + " is not a multiple of " +
          std::to_string(16 / eb) + " elements (16 bytes)");
  if (a[0]->ldm < 16)
    fault(std::string(what) + ": ldm " + std::to_string(a[0]->ldm) + " is less than 16");
}

std::size_t offset_of(const MoveArg& m, int idx) {
  const int r = idx / 16, c = idx % 16;
  return (m.col_major ? std::size_t(c) * m.ldm + r : std::size_t(r) * m.ldm + c) *
         elem_bytes(m.type);
}

}  // namespace

void load(Use use, Type type, bool col_major, void* x, const void* p, unsigned ldm) {
  MoveArg mine{use, type, col_major, x, p, ldm};
  collective(Scope::warp, kFull, "wmma::load_matrix_sync", mine, [&](MoveArg* const* a) {
    check_move(a, "wmma::load_matrix_sync");
    const int eb = elem_bytes(type);
    profile::wmma_move(false, p, ldm, eb, col_major);
    for (int l = 0; l < 32; ++l)
      for (int i = 0; i < kPerLane; ++i)
        std::memcpy(static_cast<std::uint8_t*>(a[l]->x) + i * eb,
                    static_cast<const std::uint8_t*>(p) + offset_of(*a[l], l * kPerLane + i), eb);
  });
}

void store(Type type, bool col_major, const void* x, void* p, unsigned ldm) {
  MoveArg mine{Use::acc, type, col_major, const_cast<void*>(x), p, ldm};
  collective(Scope::warp, kFull, "wmma::store_matrix_sync", mine, [&](MoveArg* const* a) {
    check_move(a, "wmma::store_matrix_sync");
    const int eb = elem_bytes(type);
    profile::wmma_move(true, p, ldm, eb, col_major);
    for (int l = 0; l < 32; ++l)
      for (int i = 0; i < kPerLane; ++i)
        std::memcpy(static_cast<std::uint8_t*>(p) + offset_of(*a[l], l * kPerLane + i),
                    static_cast<const std::uint8_t*>(a[l]->x) + i * eb, eb);
  });
}

void mma(Type ab, const void* a, const void* b, const float* c, float* d) {
  struct Arg {
    const void *a, *b;
    const float* c;
    float* d;
  } mine{a, b, c, d};
  collective(Scope::warp, kFull, "wmma::mma_sync", mine, [&](Arg* const* args) {
    profile::warp_op(profile::Op::wmma_mma);
    const int eb = elem_bytes(ab);
    float A[16][16], B[16][16], D[16][16];
    for (int l = 0; l < 32; ++l)
      for (int i = 0; i < kPerLane; ++i) {
        const int idx = l * kPerLane + i;
        A[idx / 16][idx % 16] = to_float(ab, static_cast<const std::uint8_t*>(args[l]->a) + i * eb);
        B[idx / 16][idx % 16] = to_float(ab, static_cast<const std::uint8_t*>(args[l]->b) + i * eb);
        D[idx / 16][idx % 16] = args[l]->c[i];
      }
    for (int r = 0; r < 16; ++r)
      for (int col = 0; col < 16; ++col) {
        float acc = D[r][col];
        for (int k = 0; k < 16; ++k)
          acc += A[r][k] * B[k][col];
        D[r][col] = acc;
      }
    for (int l = 0; l < 32; ++l)
      for (int i = 0; i < kPerLane; ++i) {
        const int idx = l * kPerLane + i;
        args[l]->d[i] = D[idx / 16][idx % 16];
      }
  });
}

}  // namespace wmma

// ---------------------------------------------------------------------------------------------
// flashsteps/cuda/ptx.cuh
namespace ptx {

void ldmatrix(int count, bool trans, std::uint32_t* r, std::uint32_t addr) {
  struct Arg {
    int count;
    bool trans;
    std::uint32_t* r;
    std::uint32_t addr;
  } mine{count, trans, r, addr};
  collective(Scope::warp, kFull, trans ? "ldmatrix.trans" : "ldmatrix", mine, [&](Arg* const* a) {
    std::uint32_t addrs[32], out[32][4] = {};
    for (int l = 0; l < 32; ++l) {
      if (a[l]->count != count) fault("ldmatrix: lanes disagree on the number of matrices");
      addrs[l] = a[l]->addr;
    }
    model::ldmatrix(shared_window(), count, trans, addrs, out);
    profile::ldmatrix(count, addrs);
    for (int l = 0; l < 32; ++l)
      for (int m = 0; m < count; ++m)
        a[l]->r[m] = out[l][m];
  });
}

void mma_m16n8k16(bool bf16, float* acc, const std::uint32_t* a, const std::uint32_t* b) {
  struct Arg {
    float* acc;
    const std::uint32_t *a, *b;
  } mine{acc, a, b};
  collective(Scope::warp, kFull, bf16 ? "mma.sync.m16n8k16.bf16" : "mma.sync.m16n8k16.f16", mine,
             [&](Arg* const* args) {
               profile::warp_op(profile::Op::mma_m16n8k16);
               std::uint32_t A[32][4], B[32][2];
               float C[32][4];
               for (int l = 0; l < 32; ++l) {
                 std::memcpy(A[l], args[l]->a, sizeof(A[l]));
                 std::memcpy(B[l], args[l]->b, sizeof(B[l]));
                 std::memcpy(C[l], args[l]->acc, sizeof(C[l]));
               }
               model::mma_m16n8k16(bf16 ? model::Elem::bf16 : model::Elem::f16, A, B, C);
               for (int l = 0; l < 32; ++l)
                 std::memcpy(args[l]->acc, C[l], sizeof(C[l]));
             });
}

float ex2_approx_ftz(float x) {
  // .ftz: a subnormal input is +-0 and a subnormal result +0. The hardware's result is within
  // the ISA's stated error of 2^x; the emulator returns the correctly rounded value.
  if (std::fpclassify(x) == FP_SUBNORMAL) x = 0.0f;
  const float y = std::exp2(x);
  return std::fpclassify(y) == FP_SUBNORMAL ? 0.0f : y;
}

void wgmma_fence() {
  ThreadExtra& t = thread_extra();
  t.wgmma_fenced = true;
  t.fenced_stores.clear();  // ordered before the wgmmas that follow (lifetime.hpp)
}

void wgmma_commit_group() {
  ThreadExtra& t = thread_extra();
  for (PendingMma& m : t.mmas)
    if (m.group < 0) m.group = t.wgmma_groups;
  ++t.wgmma_groups;
}

void wgmma_wait_group(int n) {
  ThreadExtra& t = thread_extra();
  const int done_below = t.wgmma_groups - n;  // groups < this have completed
  std::vector<PendingMma> keep;
  for (PendingMma& m : t.mmas) {
    if (m.group >= 0 && m.group < done_below)
      std::copy(m.result.begin(), m.result.end(), m.d);
    else
      keep.push_back(std::move(m));
  }
  t.mmas = std::move(keep);
  t.wgmma_fenced = false;  // the registers are the thread's again: the next batch needs a fence
  t.fenced_stores.clear();
  // Groups complete in order: every wgmma before the oldest one still pending has completed.
  std::uint32_t done = t.last_wgmma;
  for (const PendingMma& m : t.mmas)
    done = std::min(done, m.seq - 1);
  if (done > 0) lifetime::waited(t, self().warp, done);
}

void wgmma(bool bf16, int n, float* d, std::uint64_t desc_a, const std::uint32_t* a_regs,
           std::uint64_t desc_b, bool tnsp_b, int scale_d) {
  if (n < 8 || n > 256 || n % 8 != 0)
    fault("wgmma.mma_async: N = " + std::to_string(n) + " is not a multiple of 8 in 8..256");
  ThreadExtra& self_extra = thread_extra();
  if (!self_extra.wgmma_fenced)
    fault(
        "wgmma.mma_async without a wgmma.fence after this warpgroup's registers were last "
        "accessed (PTX ISA, wgmma.fence: required before the first wgmma.mma_async and "
        "between a register access and a wgmma.mma_async using those registers)");
  lifetime::check_fenced_registers(self_extra, d, n / 2, a_regs);
  struct Arg {
    float* d;
    const std::uint32_t* a;
    std::uint64_t da, db;
    int n, scale;
    bool bf16, tnsp_b;
    ThreadExtra* extra;
    const void* pc;
  } mine{d,       a_regs, desc_a, desc_b,      n,
         scale_d, bf16,   tnsp_b, &self_extra, __builtin_return_address(0)};
  collective(Scope::warpgroup, 0, "wgmma.mma_async", mine, [&](Arg* const* args) {
    const int regs = n / 2;
    for (int t = 1; t < 128; ++t)
      if (args[t]->da != args[0]->da || args[t]->db != args[0]->db || args[t]->n != n ||
          args[t]->scale != args[0]->scale || args[t]->bf16 != bf16 ||
          (args[t]->a == nullptr) != (a_regs == nullptr))
        fault("wgmma.mma_async: thread " + std::to_string(t) +
              " of the warpgroup passes different descriptors, shape, type or scale-d than "
              "thread 0 (they must agree)");
    profile::wgmma(n, a_regs == nullptr);
    // Shared-memory operands are read through the async proxy, at any time until the wait that
    // covers this wgmma: they stay locked until then (lifetime.hpp). B is read by all four warps,
    // A's rows 16w .. 16w+15 by warp w.
    const std::uint32_t seq =
        lifetime::begin_wgmma(self().warp / 4, n, a_regs == nullptr, args[0]->pc);
    const model::WgmmaDesc db = model::decode_wgmma_desc(desc_b);
    for (int nn = 0; nn < n; ++nn)
      for (int k = 0; k < 16; ++k) {
        const std::uint32_t addr = model::wgmma_element_addr(db, tnsp_b, nn, k);
        async::check_async_proxy_read(addr, 2, "wgmma.mma_async (B operand)");
        lifetime::mark_operand(seq, addr, -1);
      }
    if (!a_regs) {
      const model::WgmmaDesc dsc = model::decode_wgmma_desc(desc_a);
      for (int m = 0; m < 64; ++m)
        for (int k = 0; k < 16; ++k) {
          const std::uint32_t addr = model::wgmma_element_addr(dsc, false, m, k);
          async::check_async_proxy_read(addr, 2, "wgmma.mma_async (A operand)");
          lifetime::mark_operand(seq, addr, m / 16);
        }
    }
    // The accumulator a thread passes is its registers, or the result of an earlier wgmma into
    // the same registers still in flight (wgmma into one accumulator chain in order).
    std::vector<std::vector<float>> in(128);
    float* ptrs[128];
    std::uint32_t a[128][4];
    for (int t = 0; t < 128; ++t) {
      const PendingMma* last = nullptr;
      for (const PendingMma& m : args[t]->extra->mmas)
        if (m.d == args[t]->d) last = &m;
      in[t] = last ? last->result : std::vector<float>(args[t]->d, args[t]->d + regs);
      ptrs[t] = in[t].data();
      if (a_regs) std::memcpy(a[t], args[t]->a, sizeof(a[t]));
    }
    model::wgmma_m64nNk16(bf16 ? model::Elem::bf16 : model::Elem::f16, n, shared_window(), desc_a,
                          a_regs ? a : nullptr, false, desc_b, tnsp_b, ptrs, scale_d != 0);
    for (int t = 0; t < 128; ++t) {
      args[t]->extra->mmas.push_back(
          PendingMma{args[t]->d, regs, std::move(in[t]), -1, seq, args[t]->a});
      args[t]->extra->last_wgmma = seq;
      // Until the wait, the accumulator registers hold no usable value.
      std::fill(args[t]->d, args[t]->d + regs, std::numeric_limits<float>::quiet_NaN());
    }
  });
}

void setmaxnreg(bool inc, int regs) {
  struct Arg {
    bool inc;
    int regs;
  } mine{inc, regs};
  collective(
      Scope::warpgroup, 0, inc ? "setmaxnreg.inc" : "setmaxnreg.dec", mine, [&](Arg* const* a) {
        for (int t = 1; t < 128; ++t)
          if (a[t]->regs != regs)
            fault("setmaxnreg: the warpgroup's threads ask for different counts (" +
                  std::to_string(regs) + " and " + std::to_string(a[t]->regs) + ")");
        if (regs % 8 != 0 || regs < 24 || regs > 256)
          fault("setmaxnreg: " + std::to_string(regs) + " is not a multiple of 8 in 24..256");
        // The warpgroup's count starts at the kernel's (launch) count; .dec gives registers
        // back to the block's pool, .inc takes them from it and blocks until the pool has them
        // (PTX ISA, setmaxnreg: "a pool of available registers is maintained per-CTA").
        BlockExtra& be = block_extra();
        std::vector<int>& current = be.maxnreg;
        const std::size_t wg = static_cast<std::size_t>(self().warp / 4);
        if (current.size() <= wg) current.resize(wg + 1, 0);
        const KernelRegisters& launched = kernel_registers();
        const bool first = current[wg] == 0;
        const int from = first ? launched.count : current[wg];
        const std::string change =
            std::string("setmaxnreg.") + (inc ? "inc" : "dec") + " to " + std::to_string(regs) +
            " from " + std::to_string(from) + " registers per thread" +
            (first ? " (the kernel's count at launch: " + launched.source + ")" : std::string());
        if (inc ? regs < from : regs > from)
          fault(change + ": .inc must not lower the count, .dec must not raise it");
        const std::int64_t delta = std::int64_t{regs - from} * 128;  // the warpgroup's registers
        if (delta > 0)
          wait_until([&be, delta] { return be.reg_pool >= delta; },
                     [&be, change, delta] {
                       return change + ": needs " + std::to_string(delta) +
                              " registers from the block's pool, which holds " +
                              std::to_string(be.reg_pool) +
                              " (released by setmaxnreg.dec; the .inc blocks until it has them)";
                     });
        be.reg_pool -= delta;
        current[wg] = regs;
      });
}

}  // namespace ptx
}  // namespace fsemu
