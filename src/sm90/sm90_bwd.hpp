// The sm90 backward (wgmma, TMA, warp specialization; sm_90a only): the hooks run_backward() calls
// (api/run_backward.cpp), and the tile sizes the host needs to lay out the workspace and the grid
// (bwd_traits.hpp checks them against the kernel's).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "common/backward_problem.hpp"
#include "sm80/bwd_params.hpp"
#include "sm90/bwd_key_tiles.hpp"
#include "sm90/bwd_tail_split.hpp"

namespace flashcore::sm90 {

// Keys per CTA: two consumer warpgroups of 64 keys each (bwd_traits.hpp), or at hd256 one block of
// 64 keys whose head dims the warpgroups split (bwd256_traits.hpp).
constexpr int bwd_block_n(int head_dim) { return head_dim <= 128 ? 128 : 64; }
// Query rows per step of the walk.
constexpr int bwd_block_m(int head_dim) { return head_dim <= 64 ? 128 : 64; }

// The preprocess, main and convert launches of one backward (bwd_kernel.cuh), defined in
// sm90_bwd_hd<D>.cu for D = 64 and 128 when the build has them.
// split: how the schedule's last tiles are cut (bwd_tail_split.hpp), with p's workspace sized
// for its slots; key_tiles: a varlen batch's key tile list to build and run (bwd_key_tiles.hpp),
// or disabled.
template <int kHeadDim>
cudaError_t launch_backward_head_dim(const sm80::BwdParams& p, const BwdTail& tail,
                                     const BwdKeyTileList& key_tiles, bool bf16,
                                     cudaStream_t stream);
// The same for head dim 256 (bwd256_kernel.cuh, sm90_bwd_hd256.cu).
cudaError_t launch_backward_hd256(const sm80::BwdParams& p, const BwdTail& tail, bool bf16,
                                  cudaStream_t stream);

}  // namespace flashcore::sm90

namespace flashcore::detail {

// "" when the sm90 backward implements the problem on this device, else why not (the sm80
// backward then runs it).
const char* sm90_backward_rejects(const BackwardProblem& problem, const cudaDeviceProp& device);
size_t sm90_backward_workspace_bytes(const BackwardProblem& problem);
// How a launch on ctas CTAs cuts the schedule's last tiles (sm90/bwd_tail_split.hpp); its tiles
// are the tile order's, which the launch checks.
sm90::BwdTailSplit sm90_backward_tail_split(const BackwardProblem& problem, int ctas);
Status launch_sm90_backward(const BackwardProblem& problem, void* workspace, cudaStream_t stream);

}  // namespace flashcore::detail
