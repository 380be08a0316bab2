#include "gemm_ceiling.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "timer.hpp"

namespace flashcore::bench {

bool measure_gemm_ceiling(double* tflops, std::string* problem, std::string* error) {
  constexpr int n = kCeilingGemmSize;
  const size_t bytes = static_cast<size_t>(n) * n * 2;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  cublasHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;
  bool ok = cudaMalloc(&a, bytes) == cudaSuccess && cudaMalloc(&b, bytes) == cudaSuccess &&
            cudaMalloc(&c, bytes) == cudaSuccess && cudaStreamCreate(&stream) == cudaSuccess &&
            cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS;
  if (!ok) {
    *error = "cannot set up the cuBLAS GEMM ceiling (memory or cuBLAS handle)";
  } else {
    // Zeros: GEMM speed on H100 barely depends on values, and zeros cannot overflow.
    cudaMemsetAsync(a, 0, bytes, stream);
    cudaMemsetAsync(b, 0, bytes, stream);
    cublasSetStream(handle, stream);
    const float alpha = 1.f, beta = 0.f;
    const Launch gemm = [&](int, std::string* err) {
      const cublasStatus_t s =
          cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a, CUDA_R_16BF, n, b,
                       CUDA_R_16BF, n, &beta, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT);
      if (s != CUBLAS_STATUS_SUCCESS) *err = std::string("cublasGemmEx: ") + cublasGetStatusString(s);
      return s == CUBLAS_STATUS_SUCCESS;
    };
    Summary summary;
    TimingConfig config;
    config.warmup_ms = 50;
    config.budget_ms = 100;
    ok = time_launches(gemm, 1, config, stream, &summary, error);
    if (ok) {
      *tflops = 2.0 * n * static_cast<double>(n) * n / (summary.p50_us * 1e-6) / 1e12;
      *problem = "cublasGemmEx bf16 " + std::to_string(n) + "^3, fp32 accumulate, p50";
    }
  }
  if (handle != nullptr) cublasDestroy(handle);
  if (stream != nullptr) cudaStreamDestroy(stream);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return ok;
}

}  // namespace flashcore::bench
