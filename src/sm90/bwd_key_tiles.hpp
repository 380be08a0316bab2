// A varlen batch's key tiles that hold keys, listed before the persistent sm90 backward runs it.
//
// Why: the backward's grid has a tile for every key block of the longest sequence, for every
// sequence and kv head (bwd_tile_order.hpp), so a sequence shorter than the longest leaves tiles
// past its last key that have nothing to do, and each still cost a claim from the tile counter and
// a round through the tile ring to the consumers and the dQ writer. Measured on the H200 (docs/
// perf.md, session 28): one 8192-token document beside 64 of 128 tokens (H16 hd128 bf16), whose
// grid is 97% such tiles, took the kernel 2.21-2.31 ms against 1.16 ms for the long document
// alone; listed, 1.27-1.40 ms.
//
// One selection (cub::DeviceSelect::If over the tile numbers) keeps the tiles whose first key lies
// inside their sequence, in the tile order's own order, so everything that order guarantees holds
// for the list: each section's heaviest key blocks first and, in deterministic mode, every key
// block a tile waits for listed before it. The producer's counter then runs over the list
// (bwd_kernel.cuh) and the rest is the grid's code. A tile left out stores nothing: its keys lie
// past the sequence, so it has no dK or dV rows. Varlen only: without it every tile has keys.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "sm80/bwd_params.hpp"
#include "sm90/bwd_tile_order.hpp"

namespace flashcore::sm90 {

struct BwdKeyTileList {
  int* count = nullptr;     // tiles listed (written by the build)
  int* tiles = nullptr;     // tile numbers (BwdTileOrder's), at most num_tiles; null: no list
  void* scratch = nullptr;  // the selection's temporary storage
  size_t scratch_bytes = 0;

  bool enabled() const { return tiles != nullptr; }
};

// Bytes the list of num_tiles tiles takes in a workspace (its count, the tiles, the scratch, each
// from an aligned boundary).
size_t bwd_key_tile_list_bytes(int num_tiles);
// Describes the list at region (bwd_key_tile_list_bytes(num_tiles) bytes, 256-byte aligned).
BwdKeyTileList bwd_key_tile_list(void* region, int num_tiles);
// Enqueues the selection of order's tiles whose first key lies inside their sequence of p
// (sm80::bwd_sequence's, as the kernel's walk binds it), block_n keys a tile.
cudaError_t build_bwd_key_tile_list(const BwdKeyTileList& list, const BwdTileOrder& order,
                                    const sm80::BwdParams& p, int block_n, cudaStream_t stream);

}  // namespace flashcore::sm90
