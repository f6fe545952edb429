// flashsteps/fused_stage.cuh — the launcher every fused stage (03 to 07) shares.
//
// A fused stage runs one kernel per problem, one block per query block Q_i of a head (B*H*Tr
// blocks on gridDim.x), compiled per dtype, tile and causal flag. What a stage decides is its
// kernel and the tile it runs for a head dim on a device; the rest is the same in every fused stage
// and lives here once: the limits (head dims, shared memory, grid size, alignment), the one-time
// shared-memory opt-in, the one place the runtime dtype, head dim and mask become template
// arguments, the launch, and the kernel report.
//
// What a fused stage writes, besides its kernel:
//   kernels.cuh  exports the kernel with one line, FS_FUSED_KERNEL_EXPORTS(<signature>): the
//                launch's Shape and `struct Kernel` (the signature Fn<T>, and of<T, Tile,
//                kCausal>(), the kernel's __global__ function for one variant).
//   kernels.cu   ends with FS_DEFINE_KERNEL_OF(<the kernel of T, Tile, kCausal>) and one
//                FS_EXPORT_KERNELS(Tile) per tile it compiles (both dtypes, causal and not).
//   launcher.cu  `class NameStage final : public FusedStage<NameStage, name::Kernel>` says what the
//                stage decides (the list below) and make_stage() returns it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "flashsteps/cuda/dtype.cuh"
#include "flashsteps/cuda/launch.cuh"
#include "flashsteps/cuda_check.hpp"
#include "flashsteps/stage.hpp"

namespace flashsteps {

/// The signature of a fused kernel that reads Q, K, V and writes O and LSE through plain pointers
/// (stages 03 to 06c; the Hopper stages pass tensor maps instead).
template <class T, class Shape>
using FusedKernel = void (*)(const T*, const T*, const T*, T*, float*, Shape);

/// What FS_FUSED_KERNEL_EXPORTS gives a stage's Kernel: its Shape and signature.
template <class ShapeT, template <class, class> class Signature>
struct FusedKernelTypes {
  using Shape = ShapeT;
  template <class T>
  using Fn = Signature<T, ShapeT>;
};

/// kernels.cuh, in the stage's namespace: the launch's Shape and the Kernel the launcher links
/// against. `Signature`: FusedKernel, or a template <class T, class Shape> alias of the stage's
/// own. Shape's fields: bh = B * H; sq, skv = Sq, Skv; tr = Tr = ceil(Sq / Br), the query blocks
/// per head; scale_log2 = the softmax scale * log2(e). Row counts are 32-bit (Problem limits them
/// to 2^30); offsets into the tensors are computed in 64 bits inside the kernels. Each stage's
/// Shape is a plain struct of its own (not one shared type, not a derived one), so every kernel
/// keeps its name and its PTX: a struct with a base class compiles to different PTX.
#define FS_FUSED_KERNEL_EXPORTS(Signature)                           \
  struct Shape {                                                     \
    std::int64_t bh;                                                 \
    int sq, skv;                                                     \
    int tr;                                                          \
    float scale_log2;                                                \
  };                                                                 \
  struct Kernel : ::flashsteps::FusedKernelTypes<Shape, Signature> { \
    template <class T, class Tile, bool kCausal>                     \
    static Fn<T> of();                                               \
  };

/// kernels.cu, after the kernel: Kernel::of returns the kernel the expression names for the
/// variant <T, Tile, kCausal> (fused_attention_kernel<T, Tile, kCausal>).
#if !defined(FLASHSTEPS_EMULATE) || !defined(FSEMU_ONLY_HEAD_DIM)
#define FS_DEFINE_KERNEL_OF(...)               \
  template <class T, class Tile, bool kCausal> \
  Kernel::Fn<T> Kernel::of() {                 \
    return __VA_ARGS__;                        \
  }
#else
#include <type_traits>
// Only in the CPU emulator's builds that run one case (emu/sanitize.cmake, FSEMU_ONE_CASE): the
// kernel of that case's variant alone is compiled, and every other variant's Kernel::of returns a
// kernel that ends the launch with a fault naming what it lacks.
#define FS_DEFINE_KERNEL_OF(...)                                                           \
  template <class T, class Tile, bool kCausal>                                             \
  Kernel::Fn<T> Kernel::of() {                                                             \
    if constexpr (std::is_same_v<T, FSEMU_ONLY_DTYPE> && Tile::D == FSEMU_ONLY_HEAD_DIM && \
                  kCausal == FSEMU_ONLY_CAUSAL) {                                          \
      return __VA_ARGS__;                                                                  \
    } else {                                                                               \
      return ::fsemu::NotCompiled<Fn<T>>::kernel;                                          \
    }                                                                                      \
  }
#endif

/// kernels.cu exports the kernels of tile `Tile` for fp16 and bf16, causal and not: explicit
/// instantiations of Kernel::of, which the launcher links against.
#define FS_EXPORT_KERNELS(Tile)                                                \
  template Kernel::Fn<__half> Kernel::of<__half, Tile, false>();               \
  template Kernel::Fn<__half> Kernel::of<__half, Tile, true>();                \
  template Kernel::Fn<__nv_bfloat16> Kernel::of<__nv_bfloat16, Tile, false>(); \
  template Kernel::Fn<__nv_bfloat16> Kernel::of<__nv_bfloat16, Tile, true>();

/// Largest grid a fused stage launches: B*H*Tr blocks on gridDim.x.
inline constexpr std::int64_t kMaxFusedBlocks = 0x7fffffff;

/// A fused stage `S` (the class deriving from this one) provides:
///   name(), title()     as every Stage does;
///   HeadDims            the head dims its kernels are compiled for (a HeadDims<...>);
///   TileFor<kD>         the tile it runs for head dim kD, when that is the same on every device;
///                       or else its own with_tile(d, dev, f), which calls
///                       f.template operator()<Tile>() with the tile for head dim d on device dev;
///   kKernelName         its kernel's name in reports;
///   kSmemHolds          what its shared memory holds besides the head dim, for a refusal.
/// A stage that does something differently declares its own (public) version of:
///   tile_tag<Tile>()    the tile's part of the kernel's report name, "d64,bc64,2stages";
///   launch_variant<T, Tile, kCausal>(shape, args, stream)   the launch of one variant;
///   check_kernel<T, Tile, kCausal>()   a check of the compiled kernel, in setup();
///   complete_shape(shape, problem)   fills the fields its own Shape adds after the five above
///                       (10a: H and H / H_kv);
///   kOnlyComputeCapability  the one compute capability its arch-specific build runs on (90 for
///                       sm_90a): supports() refuses every other device, setup() skips them.
/// `Kernel` is the stage's kernels.cuh export (above).
template <class S, class Kernel>
class FusedStage : public Stage {
 public:
  using Shape = typename Kernel::Shape;

  Support supports_problem(const Problem& p) const override {
    if (std::string why = S::HeadDims::why_not(p.head_dim); !why.empty()) return Support::no(why);
    return Support::yes();
  }

  Support supports(const Problem& p, const DeviceInfo& dev) const override {
    if (constexpr int cc = only_compute_capability(); cc != 0 && dev.compute_capability() != cc) {
      // "At least" is not enough: machine code for an arch-specific target (the "a" of sm_90a:
      // wgmma, setmaxnreg) runs on that compute capability only, and its PTX cannot be
      // JIT-compiled for any other GPU either (no later GPU has wgmma: sm_100/103/110 multiply
      // with tcgen05, sm_120/121 have neither).
      return Support::no("needs " + gpu_requirement() + ": its arch-specific instructions run on " +
                         "compute capability " + std::to_string(cc / 10) + "." +
                         std::to_string(cc % 10) + " only; " + dev.name + " is sm_" +
                         std::to_string(dev.compute_capability()));
    }
    return S::with_tile(p.head_dim, dev, [&]<class Tile>() {
      std::string what = "D " + std::to_string(p.head_dim);
      if (*S::kSmemHolds) what += std::string(", ") + S::kSmemHolds;
      const auto smem = static_cast<std::int64_t>(Tile::kSmemBytes);
      if (Support s = fits_shared_memory(smem, what, dev); !s) return s;
      return fits_grid(p.batch_heads() * ceil_div(p.seq_q, Tile::Br), kMaxFusedBlocks,
                       "B*H*ceil(Sq/" + std::to_string(Tile::Br) + ")");
    });
  }

  // Remembers the device, whose tiles launch() and kernels() run, and raises the dynamic
  // shared-memory limit of every variant it can hold; supports() refuses the others before they
  // are ever launched.
  void setup(const DeviceInfo& dev) override {
    device_ = dev;
    // supports() refuses every other device: nothing to set up there.
    if (constexpr int cc = only_compute_capability(); cc != 0 && dev.compute_capability() != cc)
      return;
    S::HeadDims::for_each([&]<int kD>() {
      S::with_tile(kD, dev, [&]<class Tile>() {
        if (static_cast<std::int64_t>(Tile::kSmemBytes) > dev.smem_optin_per_block) return;
        for (DType t : {DType::fp16, DType::bf16})
          for (bool causal : {false, true})
            dispatch_dtype(t, [&]<class T>() {
              dispatch_bool(causal, [&]<bool kCausal>() {
                FS_CUDA_CHECK(
                    allow_dynamic_smem(Kernel::template of<T, Tile, kCausal>(), Tile::kSmemBytes));
                S::template check_kernel<T, Tile, kCausal>();
              });
            });
      });
    });
  }

  void launch(const Problem& p, const AttentionArgs& args, cudaStream_t stream) const override {
    if (std::string why = S::HeadDims::why_not(p.head_dim); !why.empty())
      throw std::invalid_argument(std::string(name()) + ": " + why);
    // Every fused kernel moves Q, K, V and O in 16-byte pieces (cp.async and TMA need 16-byte
    // aligned addresses; cudaMalloc gives 256 bytes, a view into the middle of a tensor may not).
    require_aligned(name(), args, 16);
    dispatch(p, [&]<class T, class Tile, bool kCausal>() {
      const cudaError_t err =
          S::template launch_variant<T, Tile, kCausal>(shape<Tile>(p), args, stream);
      FS_CUDA_CHECK(err);
    });
  }

  std::vector<KernelLaunchInfo> kernels(const Problem& p) const override {
    if (!S::HeadDims::contains(p.head_dim)) return {};
    return dispatch(p, [&]<class T, class Tile, bool kCausal>() -> std::vector<KernelLaunchInfo> {
      const std::string name = std::string(S::kKernelName) + "<" + S::template tile_tag<Tile>() +
                               "," + dtype_name<T>() + (kCausal ? ",causal>" : ">");
      return {{name, reinterpret_cast<const void*>(Kernel::template of<T, Tile, kCausal>()),
               Tile::kThreads, Tile::kSmemBytes}};
    });
  }

  // The defaults a stage may replace (see above).
  /// One tile per head dim, the same on every device: S::TileFor<kD>.
  template <class F>
  static decltype(auto) with_tile(std::int64_t head_dim, const DeviceInfo&, F&& f) {
    return S::HeadDims::dispatch(head_dim, [&]<int kD>() -> decltype(auto) {
      return f.template operator()<typename S::template TileFor<kD>>();
    });
  }
  template <class Tile>
  static std::string tile_tag() {
    return std::string("d") + std::to_string(Tile::D) + ",bc" + std::to_string(Tile::Bc) + "," +
           std::to_string(Tile::Stages) + "stages";
  }
  template <class T, class Tile, bool kCausal>
  static cudaError_t launch_variant(const Shape& sh, const AttentionArgs& a, cudaStream_t stream) {
    return launch_kernel(Kernel::template of<T, Tile, kCausal>(), grid(sh), Tile::kThreads,
                         Tile::kSmemBytes, stream, static_cast<const T*>(a.q),
                         static_cast<const T*>(a.k), static_cast<const T*>(a.v),
                         static_cast<T*>(a.o), a.lse, sh);
  }
  template <class T, class Tile, bool kCausal>
  static void check_kernel() {}
  /// S::kOnlyComputeCapability where the stage declares it (its kernels are built for an
  /// arch-specific target, such as 90 for sm_90a), else 0: any device from
  /// min_compute_capability().
  static constexpr int only_compute_capability() {
    if constexpr (requires { S::kOnlyComputeCapability; }) {
      return S::kOnlyComputeCapability;
    } else {
      return 0;
    }
  }

 protected:
  /// One block per query block of a head: B*H*Tr blocks (<= kMaxFusedBlocks, which supports()
  /// checks).
  static dim3 grid(const Shape& sh) { return dim3(static_cast<unsigned>(sh.bh * sh.tr)); }

 private:
  /// The device setup() saw; launch() and kernels() run the tiles it picked for it. Before setup(),
  /// a device with no opt-in shared memory: the smallest tile where a stage has a choice.
  DeviceInfo device_;

  template <class Tile>
  static Shape shape(const Problem& p) {
    Shape sh{p.batch_heads(), static_cast<int>(p.seq_q), static_cast<int>(p.seq_kv),
             static_cast<int>(ceil_div(p.seq_q, Tile::Br)), p.softmax_scale() * kLog2e};
    if constexpr (requires(Shape & s) { S::complete_shape(s, p); }) S::complete_shape(sh, p);
    return sh;
  }

  /// Calls f.template operator()<T, Tile, kCausal>() for the problem's dtype and mask and the tile
  /// the stage runs for its head dim on this device: the one place where the runtime problem
  /// becomes template arguments. `p.head_dim` is one of S::HeadDims.
  template <class F>
  decltype(auto) dispatch(const Problem& p, F&& f) const {
    return S::with_tile(p.head_dim, device_, [&]<class Tile>() -> decltype(auto) {
      return dispatch_dtype(p.dtype, [&]<class T>() -> decltype(auto) {
        return dispatch_bool(p.causal, [&]<bool kCausal>() -> decltype(auto) {
          return f.template operator()<T, Tile, kCausal>();
        });
      });
    });
  }
};

}  // namespace flashsteps
