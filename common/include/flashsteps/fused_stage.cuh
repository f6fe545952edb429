// flashsteps/fused_stage.cuh — the launcher every fused stage (03 to 07) shares.
//
// A fused stage runs one kernel per problem, one block per query block Q_i of a head (B*H*Tr
// blocks on gridDim.x), compiled per dtype, tile and causal flag. What a stage decides is its
// kernel and the tile it runs for a head dim on a device; the rest is the same in every fused stage
// and lives here once: the limits (head dims, shared memory, grid size, alignment), the one-time
// shared-memory opt-in, the one place the runtime dtype, head dim and mask become template
// arguments, the launch, and the kernel report.
//
// The two sides of a stage:
//   kernels.cuh  declares `struct Kernel`: the launch's Shape, the kernel's signature Fn<T>, and
//                of<T, Tile, kCausal>(), the kernel's __global__ function for one variant.
//                kernels.cu defines of() after the kernel and exports every variant it compiles
//                with FS_EXPORT_KERNELS(T, Tile), one line per dtype and tile.
//   launcher.cu  `class NameStage final : public FusedStage<NameStage, name::Kernel>` says what the
//                stage decides (the list below) and make_stage() returns it.
#pragma once

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
/// (stages 03 to 06; stage 07 passes tensor maps instead).
template <class T, class Shape>
using FusedKernel = void (*)(const T*, const T*, const T*, T*, float*, Shape);

/// kernels.cu exports the kernel of dtype T and tile `Tile`, causal and not: explicit
/// instantiations of Kernel::of, which the launcher links against.
#define FS_EXPORT_KERNELS(T, Tile)                     \
  template Kernel::Fn<T> Kernel::of<T, Tile, false>(); \
  template Kernel::Fn<T> Kernel::of<T, Tile, true>();

/// Largest grid a fused stage launches: B*H*Tr blocks on gridDim.x.
inline constexpr std::int64_t kMaxFusedBlocks = 0x7fffffff;

/// A fused stage `S` (the class deriving from this one) provides:
///   name(), title()     as every Stage does;
///   HeadDims            the head dims its kernels are compiled for (a HeadDims<...>);
///   with_tile(d, dev, f)  calls f.template operator()<Tile>() with the tile it runs for head
///                       dim d on device dev: the stage's decision;
///   kKernelName         its kernel's name in reports;
///   kSmemHolds          what its shared memory holds besides the head dim, for a refusal.
/// A stage that does something differently declares its own (public) version of:
///   tile_tag<Tile>()    the tile's part of the kernel's report name, "d64,bc64,2stages";
///   launch_variant<T, Tile, kCausal>(shape, args, stream)   the launch of one variant;
///   check_kernel<T, Tile, kCausal>()   a check of the compiled kernel, in setup().
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
    return {p.batch_heads(), static_cast<int>(p.seq_q), static_cast<int>(p.seq_kv),
            static_cast<int>(ceil_div(p.seq_q, Tile::Br)), p.softmax_scale() * kLog2e};
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
