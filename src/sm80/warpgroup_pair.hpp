// The cluster-pair tile's kernels (WarpgroupPairTileConfig, hd64, sm_90a) live in their own
// translation unit, sm80_fwd_pair.cu: compiled next to the other tiles, their instantiation
// changed every other kernel's machine code (register allocation and the epilogue's unrolling;
// docs/perf.md v11), and those tiles' SASS stays fixed unless a change is meant for them.
// sm80_fwd.cu reaches the pair only through these two functions.
#pragma once

#include <cuda_runtime.h>

#include "sm80/fwd_params.hpp"

namespace flashcore::sm80 {

// cudaFuncGetAttributes of the pair kernel for this dtype (__half or __nv_bfloat16).
template <typename Element>
cudaError_t warpgroup_pair_attributes(cudaFuncAttributes* attributes);

// Launches the pair kernel on a planned grid of clusters of two: gridDim.x is
// 2 * p.num_m_blocks, p.num_splits is 1 (the pair splits the keys itself). dependent: with
// programmatic dependent launch (launch.hpp).
template <typename Element>
cudaError_t launch_warpgroup_pair(const FwdParams& p, bool dependent, cudaStream_t stream);

}  // namespace flashcore::sm80
