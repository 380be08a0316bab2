// The FlashCore journey's first step: one fused kernel, K/V tiles staged through shared memory,
// online softmax, all arithmetic on CUDA cores in fp32 (no tensor cores).
#pragma once

#include <cuda_runtime_api.h>

#include "common/problem.hpp"

namespace flashcore::detail {

const char* scalar_rejects(const Problem& problem, const cudaDeviceProp& device);
Status launch_scalar(const Problem& problem, void* workspace, cudaStream_t stream);

}  // namespace flashcore::detail
