// The lab's "matmul + softmax + matmul" baseline: cuBLAS batched GEMM for S = scale * Q K^T into an
// fp32 workspace, one kernel for softcap/mask/softmax writing P (in the input dtype) and LSE, and a
// cuBLAS batched GEMM for O = P V.
#pragma once

#include <cuda_runtime_api.h>

#include "common/problem.hpp"

namespace flashcore::detail {

const char* unfused_rejects(const Problem& problem, const cudaDeviceProp& device);
size_t unfused_workspace_bytes(const Problem& problem);
Status launch_unfused(const Problem& problem, void* workspace, cudaStream_t stream);

}  // namespace flashcore::detail
