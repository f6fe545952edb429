// flashsteps/cuda_check.hpp — every CUDA call and every launch is checked, with file and line.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace flashsteps {

/// Thrown on a CUDA or cuBLAS error; what() names the call, the error, the file and the line.
class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t st, const char* expr, const char* file,
                                     int line);

}  // namespace flashsteps

#define FS_CUDA_CHECK(expr)                                               \
  do {                                                                    \
    const cudaError_t fs_err_ = (expr);                                   \
    if (fs_err_ != cudaSuccess)                                           \
      ::flashsteps::throw_cuda_error(fs_err_, #expr, __FILE__, __LINE__); \
  } while (0)

/// After each kernel launch: catches bad launch configurations (too much shared memory, too
/// many threads) at the launch site instead of at the next synchronization.
#define FS_CHECK_LAUNCH() FS_CUDA_CHECK(cudaPeekAtLastError())

#define FS_CUBLAS_CHECK(expr)                                              \
  do {                                                                     \
    const cublasStatus_t fs_st_ = (expr);                                  \
    if (fs_st_ != CUBLAS_STATUS_SUCCESS)                                   \
      ::flashsteps::throw_cublas_error(fs_st_, #expr, __FILE__, __LINE__); \
  } while (0)
