// emu/shim/mma.h — nvcuda::wmma for the emulator (stands in for the toolkit's <mma.h>).
//
// The WMMA API leaves the fragment layout opaque: a kernel may only move fragments with
// load/store/fill/mma and apply the same operation to every element of `x`. The emulator's
// layout (any consistent one is allowed): lane l holds elements 8l .. 8l+7 of the fragment's
// logical 16 x 16 matrix in row-major order (A: M x K, B: K x N, accumulator: M x N), so a kernel
// that relies on the hardware's layout gives wrong results here. Every operation is
// warp-collective (.sync.aligned): all 32 lanes must reach it with the same pointer and ldm. The
// rules of the CUDA C++ Programming Guide ("Warp Matrix Functions") are checked: mptr 256-bit
// (32-byte) aligned, ldm a multiple of 8 elements for 16-bit types and of 4 for float.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "fsemu/wmma.hpp"

namespace nvcuda::wmma {

struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
class fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the emulator implements WMMA m16n16k16 only");

 public:
  static constexpr int num_elements = ::fsemu::wmma::kPerLane;
  using element_type = T;
  T x[num_elements];
};

template <class Use, class T, class Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout>& f, T value) {
  for (T& e : f.x)
    e = value;
}
template <class Use, class T, class Layout, class V>
requires(!std::is_same_v<T, V>) void fill_fragment(fragment<Use, 16, 16, 16, T, Layout>& f,
                                                   V value) {
  fill_fragment(f, static_cast<T>(value));
}

namespace detail {
template <class Use>
constexpr ::fsemu::wmma::Use use() {
  if constexpr (std::is_same_v<Use, matrix_a>)
    return ::fsemu::wmma::Use::a;
  else if constexpr (std::is_same_v<Use, matrix_b>)
    return ::fsemu::wmma::Use::b;
  else
    return ::fsemu::wmma::Use::acc;
}
template <class T>
constexpr ::fsemu::wmma::Type type() {
  if constexpr (std::is_same_v<T, __half>)
    return ::fsemu::wmma::Type::f16;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return ::fsemu::wmma::Type::bf16;
  else {
    static_assert(std::is_same_v<T, float>,
                  "WMMA element types here: __half, __nv_bfloat16, float");
    return ::fsemu::wmma::Type::f32;
  }
}
}  // namespace detail

template <class Use, class T, class Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const T* p, unsigned ldm) {
  static_assert(!std::is_void_v<Layout>, "an A or B fragment names its layout");
  ::fsemu::wmma::load(detail::use<Use>(), detail::type<T>(), std::is_same_v<Layout, col_major>, f.x,
                      p, ldm);
}
template <class T>
void load_matrix_sync(fragment<accumulator, 16, 16, 16, T>& f, const T* p, unsigned ldm,
                      layout_t layout) {
  ::fsemu::wmma::load(::fsemu::wmma::Use::acc, detail::type<T>(), layout == mem_col_major, f.x, p,
                      ldm);
}
template <class T>
void store_matrix_sync(T* p, const fragment<accumulator, 16, 16, 16, T>& f, unsigned ldm,
                       layout_t layout) {
  ::fsemu::wmma::store(detail::type<T>(), layout == mem_col_major, f.x, p, ldm);
}
template <class TA, class LA, class LB, class TC>
void mma_sync(fragment<accumulator, 16, 16, 16, TC>& d,
              const fragment<matrix_a, 16, 16, 16, TA, LA>& a,
              const fragment<matrix_b, 16, 16, 16, TA, LB>& b,
              const fragment<accumulator, 16, 16, 16, TC>& c) {
  static_assert(std::is_same_v<TC, float>, "the emulator accumulates WMMA in float");
  ::fsemu::wmma::mma(detail::type<TA>(), a.x, b.x, c.x, d.x);
}

}  // namespace nvcuda::wmma
