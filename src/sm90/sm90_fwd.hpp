// The Hopper forward kernel (FlashAttention-3 class: TMA, wgmma, warp specialization, pingpong,
// intra-warpgroup overlap, persistent tiles). Registry hooks; built only when the library is built
// for sm_90a (FLASHCORE_HAS_SM90), otherwise rejects says so.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "common/problem.hpp"

namespace flashcore::detail {

const char* sm90_rejects(const Problem& problem, const cudaDeviceProp& device);
// Non-empty when auto should leave this problem to another backend that was measured faster on
// it (docs/perf.md, sm90 v4): grids of at most one 128-row tile per two SMs, where the sm80
// backend's small-grid tiles and split-KV win.
const char* sm90_auto_declines(const Problem& problem, const cudaDeviceProp& device);
size_t sm90_workspace_bytes(const Problem& problem);
Status launch_sm90(const Problem& problem, void* workspace, cudaStream_t stream);

}  // namespace flashcore::detail
