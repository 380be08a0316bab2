// The sm80 backend's flex path (flex_kernel.cuh): varlen batches, the built-in mods, BlockMasks
// and sinks, split over the keys when the grid is small. sm80_fwd.cu sends every problem that
// needs it here (common/feature_gates.hpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "common/problem.hpp"

namespace flashcore::detail {

const char* sm80_flex_rejects(const Problem& problem, const cudaDeviceProp& device);
// Whether the flex kernel packs a decode's query heads into its rows (flex_view.hpp). builtin_mask:
// the mask is the params' built-in one; run_flex and the JIT pass false for a mask_mod of their
// own, which may read the head.
bool sm80_flex_packs_heads(const Problem& problem, bool builtin_mask = true);
// Split-KV of the flex kernel (flash-decoding): AttentionParams::num_splits when set, else as many
// splits as fill the GPU once when the grid of query tiles (packed ones counted as packed) leaves
// SMs idle (decode), never for a varlen batch; 1 = unsplit. The workspace holds the splits' fp32
// partials.
int sm80_flex_splits(const Problem& problem, const cudaDeviceProp& device,
                     bool builtin_mask = true);
// The partials' bytes of `splits` splits (0 for one), and those of sm80_flex_splits' count.
size_t sm80_flex_split_bytes(const Problem& problem, int splits);
size_t sm80_flex_workspace_bytes(const Problem& problem);
Status launch_sm80_flex(const Problem& problem, void* workspace, cudaStream_t stream);

}  // namespace flashcore::detail
