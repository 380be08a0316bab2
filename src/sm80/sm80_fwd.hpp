// The production forward kernel for sm80+ (FlashAttention-2 class): mma.sync m16n8k16, ldmatrix,
// cp.async pipeline, split-KV for small grids. Registry hooks.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "common/problem.hpp"

namespace flashcore::detail {

const char* sm80_rejects(const Problem& problem, const cudaDeviceProp& device);
size_t sm80_workspace_bytes(const Problem& problem);
Status launch_sm80(const Problem& problem, void* workspace, cudaStream_t stream);

}  // namespace flashcore::detail
