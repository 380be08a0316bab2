// The compute ceiling every TFLOP/s is put against: a cuBLAS bf16 GEMM measured in the same run.
#pragma once

#include <string>

namespace flashcore::bench {

inline constexpr int kCeilingGemmSize = 8192;

// TFLOP/s of an 8192^3 bf16 cublasGemmEx (fp32 accumulate), p50 over timed runs. Returns false
// with a message when cuBLAS fails.
bool measure_gemm_ceiling(double* tflops, std::string* problem, std::string* error);

}  // namespace flashcore::bench
