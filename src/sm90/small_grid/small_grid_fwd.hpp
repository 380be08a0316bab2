// The sm90 backend's small-grid tiles (tile_table.hpp), as sm90_fwd.cu reaches them: defined in
// small_grid_fwd.cu, which is compiled for sm_90a only, so callers compiled for every architecture
// call them only when the build has sm_90a code (FLASHCORE_HAS_SM90).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "common/problem.hpp"

namespace flashcore::sm90::small_grid {

// TileShape::kAuto's pick among the small-grid tiles (heuristics.hpp): kSmall, kMedium or
// kCtaPair, each one that rejects() accepts; kLarge when none of them wins (the sm80 backend's
// large tile does).
TileShape auto_tile(const detail::Problem& problem, const cudaDeviceProp& device);
// Empty when `tile` (kSmall, kMedium or kCtaPair) runs the problem on this sm_90 device, else why
// not. Assumes the device checks of sm90_rejects passed.
const char* rejects(const detail::Problem& problem, const cudaDeviceProp& device, TileShape tile);
size_t workspace_bytes(const detail::Problem& problem, const cudaDeviceProp& device,
                       TileShape tile);
Status launch(const detail::Problem& problem, const cudaDeviceProp& device, TileShape tile,
              void* workspace, cudaStream_t stream);

}  // namespace flashcore::sm90::small_grid
