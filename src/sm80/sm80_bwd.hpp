// The sm80 backward (FlashAttention-2's backward on mma.sync, sm_80 and newer): the hooks
// run_backward() calls (api/run_backward.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "common/backward_problem.hpp"

namespace flashcore::detail {

// "" when the sm80 backward implements the problem on this device, else why not.
const char* sm80_backward_rejects(const BackwardProblem& problem, const cudaDeviceProp& device);
size_t sm80_backward_workspace_bytes(const BackwardProblem& problem);
Status launch_sm80_backward(const BackwardProblem& problem, void* workspace, cudaStream_t stream);
// launch_sm80_backward with the tile a GPU that gives a block smem_per_block bytes of shared memory
// runs (bwd_kernel_traits.hpp's large-shared-memory tiles where they fit): the tests run an A100's
// tiles on an H100 through it. The workspace is sm80_backward_workspace_bytes'.
Status launch_sm80_backward_tile(const BackwardProblem& problem, void* workspace,
                                 size_t smem_per_block, cudaStream_t stream);

}  // namespace flashcore::detail
