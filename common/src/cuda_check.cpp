#include "flashsteps/cuda_check.hpp"

#include <sstream>

namespace flashsteps {

void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  std::ostringstream s;
  s << "CUDA error " << cudaGetErrorName(err) << " (" << cudaGetErrorString(err) << ") in " << expr
    << " at " << file << ':' << line;
  throw CudaError(s.str());
}

void throw_cublas_error(cublasStatus_t st, const char* expr, const char* file, int line) {
  std::ostringstream s;
  s << "cuBLAS error " << cublasGetStatusName(st) << " (" << cublasGetStatusString(st) << ") in "
    << expr << " at " << file << ':' << line;
  throw CudaError(s.str());
}

}  // namespace flashsteps
