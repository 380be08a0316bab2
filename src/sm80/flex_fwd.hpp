// The sm80 backend's flex path (flex_kernel.cuh): varlen batches, the built-in mods, BlockMasks
// and sinks. sm80_fwd.cu sends every problem that needs it here (common/feature_gates.hpp).
#pragma once

#include <cuda_runtime_api.h>

#include "common/problem.hpp"

namespace flashcore::detail {

const char* sm80_flex_rejects(const Problem& problem, const cudaDeviceProp& device);
Status launch_sm80_flex(const Problem& problem, cudaStream_t stream);

}  // namespace flashcore::detail
