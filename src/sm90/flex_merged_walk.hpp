// The merged walks of the sm90 flex kernel's BlockMasks: each query tile's walk built before the
// kernel, by one launch into its workspace (after the tile counter), as the FlexStep records the
// producer hands the consumers. Two reasons, both measured (docs/perf.md, session 23):
//  - Query blocks shorter than the 128-row tile (q_block_size 64, 192, ...): such a tile spans two
//    query blocks, one per consumer warpgroup, each with its own lists. Walked one list after the
//    other, every step was for one warpgroup's rows while the other computed the GEMMs and masked
//    them out: half the tensor work thrown away (causal at BLOCK_SIZE 64 ran at 0.45x the dense
//    kernel on the H200). Merged, a key tile listed for both blocks is one step with a masking
//    per warpgroup, and a step is for one warpgroup only where the lists differ: 2.1x faster.
//  - Every other BlockMask: the producer's walk of a tile was a chain of dependent global reads
//    (the counts, then the lists' entries, then the TMA issue) at the start of every tile. A built
//    walk is one read of its count and one of its records: 0.5-2.5% less kernel time, net of the
//    build's launch (3-4 us on B4 H16 S4096).
//  - Under the built-in document mask, the build also marks the partial steps whose rows and keys
//    carry one document id (FlexStep::with_one_document), whose consumers then read no id: causal
//    documents of 128 at B4 H16 S4096 D128 (H200, kernel time) 95-97 us -> 85-86 us, the time of
//    the same lists under causal alone. (A test by each warp in the kernel, a min and a max of its
//    ids over two warp reductions, got 91-93 us there and cost every step that straddles
//    documents; docs/perf.md, session 27.)
// The workspace is the walks' worst case, every key unit listed: 4 bytes per key unit (64-key
// block when paired, else the kernel's key tile) per walk, at most the size of the BlockMask's
// kv_indices.
//
// The lists need not be sorted (a BlockMask of one's own may list blocks in any order), so the
// merge is by marks, not by a merge of sorted runs: one CTA per walk marks each key unit (a
// kernel key tile, or a 64-key block for the paired walk) with each warpgroup's masking in shared
// memory, a chunk of units at a time, and compacts the marked units, last first (the kernel's
// order), into FlexStep records with a block-wide scan. A unit listed twice is one step; listed
// as both partial and full, it is partial (mask_mod decides). Units past the keys are dropped,
// and list entries outside the key units are ignored: nothing is written outside the walk's own
// records. Functors of one's own (api/run_flex_sm90.cuh) take the same walks
// (prepare_sm90_flex_workspace builds them for every BlockMask).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "common/workspace_align.hpp"
#include "flashcore/flex/block_mask_layout.hpp"
#include "flashcore/flex/mask_mods.hpp"
#include "sm90/flex_launch.hpp"
#include "sm90/flex_params.hpp"

namespace flashcore::sm90 {

// Whether the launch builds merged walks: for every BlockMask (see above).
inline bool needs_merged_walks(const flex::BlockMask& block_mask) {
  return block_mask.kv_num_blocks != nullptr;
}

// The walks' key units on a kernel of tile_keys keys (flex_tile_keys): 64-key blocks for the
// paired walk (kv_block_size 64 under 128-key tiles), else the kernel's tiles.
inline int merged_walk_unit_keys(const flex::BlockMask& block_mask, int tile_keys) {
  return needs_paired_walk(block_mask, tile_keys) ? kFlexPairedBlockKeys : tile_keys;
}
// Steps a walk can have: every key unit, two to a step when paired.
inline int64_t merged_walk_capacity(const flex::BlockMask& block_mask, int64_t seqlen_k,
                                    int tile_keys) {
  const int64_t unit_keys = merged_walk_unit_keys(block_mask, tile_keys);
  const int64_t units = (seqlen_k + unit_keys - 1) / unit_keys;
  return needs_paired_walk(block_mask, tile_keys) ? (units + 1) / 2 : units;
}
// One walk per (BlockMask batch, head, query tile); num_m_blocks: the kernel's query tiles.
inline int64_t merged_walk_count(const flex::BlockMask& block_mask, int num_m_blocks) {
  return block_mask.batch * block_mask.heads * num_m_blocks;
}

// Bytes of the merged walks of a problem with seqlen_k keys under block_mask on a kernel of
// tile_keys keys (0 where it needs none).
inline size_t merged_walk_bytes(const flex::BlockMask& block_mask, int64_t seqlen_k,
                                int num_m_blocks, int tile_keys) {
  if (!needs_merged_walks(block_mask)) return 0;
  const int64_t walks = merged_walk_count(block_mask, num_m_blocks);
  const int64_t words = merged_walk_capacity(block_mask, seqlen_k, tile_keys) *
                        (needs_paired_walk(block_mask, tile_keys) ? 2 : 1);
  // The records start aligned after the counts.
  return detail::align_up(static_cast<size_t>(walks) * sizeof(int32_t)) +
         static_cast<size_t>(walks * words) * sizeof(int32_t);
}

// Enqueues the build of the merged walks of a kernel of tile_keys keys into workspace
// (merged_walk_bytes of it, 256-byte aligned) and describes them in *walks. documents: the built-in
// document mask (doc_ids_q null: none), whose ids mark the partial steps inside one document
// (FlexStep::with_one_document) over the problem's `batch` batches. The build zeroes the flex
// kernel's tile_counter too, and lets that kernel, launched next, start dependently.
cudaError_t build_merged_walks(const flex::BlockMask& block_mask, int seqlen_q, int seqlen_k,
                               int num_m_blocks, int tile_keys, const flex::DocumentMask& documents,
                               int batch, int* tile_counter, void* workspace, MergedWalks* walks,
                               cudaStream_t stream);

}  // namespace flashcore::sm90
