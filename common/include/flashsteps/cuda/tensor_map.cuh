// flashsteps/cuda/tensor_map.cuh — what the launchers of the Hopper stages that load through TMA
// (07c_roles, 07d_overlap) share: the driver's tensor-map encoder, looked up through the
// runtime, and the 3-D, 128B-swizzled map over a [B*H, rows, D] tensor their kernels read and
// write. Host code only: the kernels receive the maps as __grid_constant__ parameters.
#pragma once

#include <cuda.h>  // CUtensorMap and its enums (header only: the encoder comes via the runtime)
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled_v12000
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "flashsteps/cuda_check.hpp"

namespace flashsteps {

//! [tensor_maps]
// cuTensorMapEncodeTiled is a driver API function; the runtime hands out its address
// (cudaGetDriverEntryPointByVersion), so the stage needs no -lcuda and still links on a machine
// without a driver. Looked up once.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status{};
    FS_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                                   cudaEnableDefault, &status));
    if (status != cudaDriverEntryPointSuccess || p == nullptr)
      throw std::runtime_error("the driver has no cuTensorMapEncodeTiled (CUDA 12+)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// A 3-D map over a [B*H, rows, D] tensor of 16-bit elements: dimensions innermost first (D, rows,
// B*H), box (64 columns, box_rows, 1 head), 128-byte swizzle, out-of-bounds elements read as zero.
template <class T>
CUtensorMap make_tensor_map(const void* base, std::int64_t bh, int rows, int d, int box_rows) {
  const CUtensorMapDataType type = std::is_same_v<T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                             : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(d), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(bh)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(d) * 2,  // bytes, of dims 1 and 2
                                 static_cast<cuuint64_t>(rows) * d * 2};
  const cuuint32_t box[3] = {64, static_cast<cuuint32_t>(box_rows), 1};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  CUtensorMap map{};
  const CUresult r =
      tensor_map_encoder()(&map, type, 3, const_cast<void*>(base), dims, strides, box, elem_strides,
                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    throw std::runtime_error("cuTensorMapEncodeTiled failed (CUresult " +
                             std::to_string(static_cast<int>(r)) + ")");
  }
  return map;
}
//! [tensor_maps]

}  // namespace flashsteps
