// The sm90 backend's flex path (flex_kernel.cuh): varlen batches, the built-in mods, BlockMasks
// and sinks on the persistent warp-specialized kernel. sm90_fwd.cu sends every problem that needs
// it here (common/feature_gates.hpp); what it cannot run it rejects with a reason, and auto then
// runs the problem on the sm80 flex kernel.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "common/problem.hpp"
#include "sm90/flex_params.hpp"
#include "sm90/launch_args.hpp"

namespace flashcore::detail {

const char* sm90_flex_rejects(const Problem& problem, const cudaDeviceProp& device);
// The head dim of the library's sm90 flex kernel that runs a problem of head_dim (64, 128 or 256;
// 0 above 256: none). Its tile (flex_tile_keys) is what the plan's BlockMask checks and merged
// walks below follow, so they take it as kernel_head_dim: this for the library's kernels, the
// head dim a functor kernel of one's own was compiled for (api/flex_functors.hpp), which may be
// above the problem's (a head dim 256 functor kernel running a head dim 128 problem has 64-key
// tiles all the same).
int sm90_flex_kernel_head_dim(int64_t head_dim);
// What the sm90 flex kernel of kernel_head_dim cannot run whatever its mods (head dim, splits,
// tile, BlockMask block sizes, TMA strides): sm90_flex_rejects' checks without the library's
// instantiations (a functor kernel of one's own is compiled outside them). "" if none.
const char* sm90_flex_shape_rejects(const Problem& problem, int kernel_head_dim);
// Why auto leaves a flex problem this kernel could run to the sm80 flex kernel: a decode step under
// GQA that the sm80 kernel packs (sm80_flex_packs_heads; builtin_mask as there), which reads K/V
// once per kv head where this kernel reads it once per query head; or one query tile per (batch,
// head) and under half as many as SMs (decode, short chunks), whose keys the sm80 kernel splits
// (flash-decoding), where this kernel would walk every key in one CTA per tile. "" if it keeps
// the problem.
const char* sm90_flex_auto_declines(const Problem& problem, const cudaDeviceProp& device,
                                    bool builtin_mask = true);
// The grid and views of problem on device for the sm90 flex kernel of kernel_head_dim
// (tile_counter left null).
sm90::LaunchArgs sm90_flex_plan(const Problem& problem, const cudaDeviceProp& device,
                                int kernel_head_dim);
// That kernel's scratch: its tile counter, then the merged walks of a BlockMask
// (sm90/flex_merged_walk.hpp) or the tile list of a varlen batch whose sequences are not all the
// longest (sm90/varlen_tiles.hpp).
size_t sm90_flex_workspace_bytes(const Problem& problem, int kernel_head_dim);
// Enqueues that kernel's scratch in workspace (sm90_flex_workspace_bytes of it) on stream: points
// plan at the tile counter and resets it, builds the merged walks of a BlockMask into *walks (left
// disabled without one), or a varlen batch's tile list. The library's launch and the functors'
// (api/flex_functors.cu).
Status prepare_sm90_flex_workspace(const Problem& problem, int kernel_head_dim, void* workspace,
                                   sm90::LaunchArgs* plan, sm90::MergedWalks* walks,
                                   cudaStream_t stream);
Status launch_sm90_flex(const Problem& problem, void* workspace, cudaStream_t stream);

}  // namespace flashcore::detail
