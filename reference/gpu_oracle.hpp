// fp32 GPU oracle: one warp per query row, no tiling, exact two-pass softmax in fp32. It checks the
// fast kernels at shapes too large for the float64 CPU reference. Uses the production mask and
// softcap functors.
#pragma once

#include <cuda_runtime_api.h>

#include "flashcore/attention.hpp"

namespace flashcore::reference {

// Reads q, k, v (device, any valid strides, fp16/bf16) as described by params. Writes o as fp32
// contiguous [B, Sq, Hq, D] and lse as fp32 [B, Hq, Sq] (both device); a varlen batch (device
// cu_seqlens) gives o [total_q, Hq, D] and lse [Hq, total_q]. Fully masked rows get o = 0 and
// lse = -inf. No flex mods. Validates params first and launches nothing on failure.
Status gpu_oracle(const AttentionParams& params, float* o, float* lse, cudaStream_t stream);

}  // namespace flashcore::reference
