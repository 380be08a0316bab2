// The ceilings every result is put against, measured in the same run with the same timer: a
// cuBLAS bf16 GEMM for compute (TFLOP/s) and a device-to-device copy for memory (GB/s).
#pragma once

#include <cstddef>
#include <string>

namespace flashcore::bench {

inline constexpr int kCeilingGemmSize = 8192;
// Far larger than any L2 (50 MB on H100), so the copy streams from and to DRAM.
inline constexpr size_t kCeilingCopyBytes = size_t{1} << 30;

// TFLOP/s of an 8192^3 bf16 cublasGemmEx (fp32 accumulate) on random inputs, p50 over timed runs.
// Returns false with a message when cuBLAS fails.
bool measure_gemm_ceiling(double* tflops, std::string* problem, std::string* error);

// GB/s of a device-to-device cudaMemcpyAsync of kCeilingCopyBytes of random data, counting bytes
// read plus bytes written, p50 over timed runs. Returns false with a message on a CUDA failure.
bool measure_copy_ceiling(double* gbps, std::string* problem, std::string* error);

}  // namespace flashcore::bench
