// The cluster-pair tile's kernels (CtaPairTileConfig, hd64) live in their own translation unit,
// cta_pair_fwd.cu: compiled next to the other tiles, their instantiation changed every other
// kernel's machine code (register allocation and the epilogue's unrolling; docs/perf.md v11), and
// those tiles' SASS stays fixed unless a change is meant for them. small_grid_fwd.cu reaches the
// pair only through this function.
#pragma once

#include <cuda_runtime.h>

#include "sm80/fwd_params.hpp"

namespace flashcore::sm90::small_grid {

// Launches the pair kernel for this dtype (__half or __nv_bfloat16) on a planned grid of clusters
// of two: gridDim.x is 2 * p.num_m_blocks, p.num_splits is 1 (the pair splits the keys itself).
// dependent: with programmatic dependent launch (common/launch.hpp).
template <typename Element>
cudaError_t launch_cta_pair(const sm80::FwdParams& p, bool dependent, cudaStream_t stream);

}  // namespace flashcore::sm90::small_grid
