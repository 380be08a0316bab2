// The lab's "tensor cores, first try": one fused kernel whose two GEMMs run on nvcuda::wmma
// 16x16x16 fragments, with the online softmax done on CUDA cores through shared memory. Correct
// on every problem the API accepts with head_dim % 16 == 0; not tuned.
#pragma once

#include <cuda_runtime_api.h>

#include "common/problem.hpp"

namespace flashcore::detail {

const char* wmma_rejects(const Problem& problem, const cudaDeviceProp& device);
Status launch_wmma(const Problem& problem, void* workspace, cudaStream_t stream);

}  // namespace flashcore::detail
