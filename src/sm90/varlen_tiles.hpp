// A varlen batch's tiles, listed before the dense sm90 kernel runs it. The grid of a varlen batch
// is planned for its longest sequence (max_seqlen_q), so every sequence gets that many query
// blocks, and the tiles past a shorter sequence's rows did nothing but still cost the persistent
// kernel a claim each: the producer's counter atomic and its reads of cu_seqlens, one chain after
// another, with the consumers waiting behind it through the tile ring. Measured on the H200
// (docs/perf.md, session 25): 128 documents of 128 tokens with max_seqlen 1024 took 174 us
// against 74 us with max_seqlen 128, about 0.9 us per empty tile.
//
// One small launch (in place of the tile counter's memset) lists the tiles that have rows, by
// their grid index (the index TileScheduler::decode maps back to them), in the grid's own order:
// sequence after sequence, each one's deepest query block first, all its heads next to each
// other. So under a causal mask each sequence's longest tiles go first, and a sequence's tiles
// share its K and V in L2 while they run. The producer's counter runs over the list instead of the
// grid (a kernel of its own, Variant::kListed), and everything after it is the grid's code.
// (Listing all sequences' deepest blocks first, across the batch, lost 3-6% on documents of
// 256-2047 tokens: the CTAs at work then read many sequences' K/V at once.)
//
// Where every sequence has max_seqlen_q rows (batch * max_seqlen_q == total_q) no tile is empty,
// and the grid runs without the list. Only head dims 64 and 128 without softcap have the listed
// dense kernel (has_listed_varlen_kernel): each is one more kernel per dtype to build. The flex
// kernel (varlen batches with mods) takes the list at every head dim, by a runtime test in its
// producer (flex_load.hpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "common/workspace_align.hpp"
#include "sm90/fwd_params.hpp"

namespace flashcore::sm90 {

// The head dims (instantiated) whose kernels have a listed varlen variant, without softcap.
constexpr bool has_listed_varlen_kernel(int head_dim) { return head_dim == 64 || head_dim == 128; }

// Where the list lives in the workspace, after the dynamic schedule's tile counter.
struct VarlenTileList {
  int* tile_counter;  // zeroed by the build (it replaces the counter's memset)
  int* count;         // tiles listed: entries times heads (at most capacity times heads)
  int* tiles;         // [capacity * heads]: grid indices
  int capacity;       // {sequence, query block} entries the workspace holds
};

// Entries a batch can need: every sequence's query blocks, sum ceil(len_b / block_m), which is at
// most total_q / block_m + batch, and at most batch * levels.
inline int64_t varlen_tile_capacity(int64_t batch, int64_t total_q, int64_t levels, int block_m) {
  const int64_t by_rows = total_q / block_m + batch;
  return by_rows < batch * levels ? by_rows : batch * levels;
}

// Bytes of the list of a grid of `heads` heads (its count, then its tiles from the next aligned
// boundary). Inline: the host's workspace query needs it in builds without sm_90a code too.
inline size_t varlen_tile_list_bytes(int64_t capacity, int64_t heads) {
  return detail::align_up(sizeof(int)) + static_cast<size_t>(capacity * heads) * sizeof(int);
}

// Describes the list at region (varlen_tile_list_bytes of workspace, 256-byte aligned).
VarlenTileList varlen_tile_list(int* tile_counter, void* region, int capacity);

// Enqueues the list's build for the grid that grid describes (FwdArgs' batch, heads, num_m_blocks
// and head_group; its cu_seqlens_q, batch + 1 entries, gives the sequences) in query blocks of
// block_m rows. Sequence lengths are clamped to [0, num_m_blocks * block_m], and nothing is
// written past capacity, whatever cu_seqlens_q holds (the entries past it are dropped).
cudaError_t build_varlen_tile_list(const VarlenTileList& list, const FwdArgs& grid, int block_m,
                                   cudaStream_t stream);

}  // namespace flashcore::sm90
