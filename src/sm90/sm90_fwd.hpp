// The Hopper backend: the persistent forward kernel (FlashAttention-3 class: TMA, wgmma, warp
// specialization, pingpong, intra-warpgroup overlap; TileShape::kLarge) and, for grids too small
// for it, the small-grid tiles (small_grid/: the FA2-class schedule with wgmma, cluster pairs and
// programmatic dependent launch; kSmall, kMedium, kCtaPair). Varlen batches run on the persistent
// kernel, flex problems on the sm90 flex kernel (flex_fwd.hpp). Registry hooks; built only when the
// library is built for sm_90a (FLASHCORE_HAS_SM90), otherwise rejects says so.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "common/problem.hpp"

namespace flashcore::detail {

// Whether the problem runs on the sm90 flex kernel (sm90/flex_fwd.cu): one with a FlexAttention
// part other than sinks alone. A varlen batch without one runs on the persistent kernel, each tile
// bound to its sequence (sm90/sequence_view.hpp), with the dense kernel's window, softcap, GQA and
// LSE. Sinks alone run on the dense kernels: on the persistent kernel's sinks variant (below), or
// without them and then rescaled (sm80/sink_rescale.hpp).
bool sm90_needs_flex_kernel(const Problem& problem);
// Whether attention sinks with no other flex part run on the persistent kernel's sinks variant
// (sm90/fwd_kernel.cuh, Variant::kSinks), which keeps the dense kernel's tiles (192 rows at hd64,
// against the flex kernel's 128): dense and varlen batches, head dims 64 and 128 (instantiated),
// no softcap, grids the persistent kernel runs unsplit with one query head per row (no decode
// packing).
bool sm90_dense_kernel_runs_sinks(const Problem& problem, const cudaDeviceProp& device);

const char* sm90_rejects(const Problem& problem, const cudaDeviceProp& device);
// Non-empty when auto should leave this problem to another backend that was measured faster on
// it: grids too small for the persistent kernel (docs/perf.md, sm90 v4 and v5) where the rule of
// small_grid/heuristics.hpp takes the sm80 backend's large tile, or that have a head dim without
// small-grid tiles.
const char* sm90_auto_declines(const Problem& problem, const cudaDeviceProp& device);
size_t sm90_workspace_bytes(const Problem& problem);
Status launch_sm90(const Problem& problem, void* workspace, cudaStream_t stream);

}  // namespace flashcore::detail
