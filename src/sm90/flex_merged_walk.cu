// The merged walks' build (flex_merged_walk.hpp says what they are and why).
#include <algorithm>
#include <cub/block/block_scan.cuh>

#include "common/block_walk.hpp"
#include "common/launch.hpp"
#include "sm90/flex_launch.hpp"
#include "sm90/flex_merged_walk.hpp"
#include "sm90/flex_step.hpp"

namespace flashcore::sm90 {
namespace {

// A walk is little work (a few list reads, a scan, its records), so CTAs are small: 16 of them fit
// an SM, and the walks of B4 H16 S4096 (2,048) take one wave.
constexpr int kBuildThreads = 128;
// Key units a CTA marks at once: 2 KiB of marks, and a key range of 32-64k keys per pass over the
// lists (a longer one takes more passes; each reads every list again).
constexpr int kChunkUnits = 512;
constexpr int kUnitsPerThread = kChunkUnits / kBuildThreads;

// One CTA per walk: walk w is query tile w % num_m_blocks of the BlockMask's (batch, head)
// w / num_m_blocks (MergedWalks::walk).
template <bool kPaired>
__global__ void __launch_bounds__(kBuildThreads)
    merged_walk_kernel(const flex::BlockMask m, int seqlen_q, int seqlen_k, int num_m_blocks,
                       int capacity, int32_t* counts, int32_t* records) {
  using BlockScan = cub::BlockScan<int, kBuildThreads>;
  __shared__ typename BlockScan::TempStorage scan;
  __shared__ uint32_t marks[kChunkUnits];  // each unit's masking per warpgroup (FlexStep's bits)
  constexpr int kUnitKeys = kPaired ? kFlexTileKeys / 2 : kFlexTileKeys;
  constexpr int kWords = kPaired ? 2 : 1;

  const int64_t walk = blockIdx.x;
  const int m_block = static_cast<int>(walk % num_m_blocks);
  const int64_t bh = walk / num_m_blocks;
  const int q_block_size = static_cast<int>(m.q_block_size);
  const int64_t mq = m.num_q_blocks(), mk = m.num_kv_blocks();
  const int units_per_block = static_cast<int>(m.kv_block_size) / kUnitKeys;
  const int units = (seqlen_k + kUnitKeys - 1) / kUnitKeys;
  const int row_begin = m_block * kFlexTileRows;
  const int row_end = min(row_begin + kFlexTileRows, seqlen_q);
  const int first_block = row_begin / q_block_size;
  // Query blocks are multiples of 64 rows (the backend's check), so a tile that spans two splits
  // at its 64th row: the first block's rows are warpgroup 0's, the second's warpgroup 1's.
  const int num_lists = (row_end - 1) / q_block_size > first_block ? 2 : 1;
  const bool rows_inside = row_begin + kFlexTileRows <= seqlen_q;
  int32_t* walk_records = records + walk * capacity * kWords;

  // The walk's lists (each query block's partial, then full), with every count read up front:
  // the reads of the lists' entries then depend on one global round trip, not on one per list.
  constexpr int kMaxLists = 4;
  const int32_t* list_entries[kMaxLists];
  uint32_t list_marks[kMaxLists];
  int list_ends[kMaxLists];  // the lists' entries as one range: list l's end, inclusive prefix
  int entries = 0;
#pragma unroll
  for (int l = 0; l < kMaxLists; ++l) {
    const int block = l / 2;
    const bool full = l % 2 == 1;
    const int32_t* num_blocks = full ? m.full_kv_num_blocks : m.kv_num_blocks;
    const int64_t row = bh * mq + first_block + block;
    const int n =
        block < num_lists && num_blocks != nullptr ? detail::listed_blocks(num_blocks[row], mk) : 0;
    list_entries[l] = (full ? m.full_kv_indices : m.kv_indices) + row * mk;
    const uint32_t masking = full ? FlexStep::kFull : FlexStep::kPartial;
    list_marks[l] = num_lists == 2 ? masking << (FlexStep::kMaskingBits * block)
                                   : masking | masking << FlexStep::kMaskingBits;
    entries += n;
    list_ends[l] = entries;
  }

  int written = 0;  // units compacted so far, from the last one down
  for (int chunk_end = units; chunk_end > 0; chunk_end -= kChunkUnits) {
    const int chunk_begin = max(0, chunk_end - kChunkUnits);
    for (int u = threadIdx.x; u < kChunkUnits; u += kBuildThreads) marks[u] = 0;
    __syncthreads();
    for (int e = threadIdx.x; e < entries; e += kBuildThreads) {
      int l = 0;
#pragma unroll
      for (int k = 0; k < kMaxLists - 1; ++k) l += e >= list_ends[k];
      const int j = e - (l == 0 ? 0 : list_ends[l - 1]);
      const int64_t first_unit = int64_t{list_entries[l][j]} * units_per_block;
      for (int t = 0; t < units_per_block; ++t) {
        const int64_t u = first_unit + t;
        if (u >= chunk_begin && u < chunk_end) atomicOr(&marks[u - chunk_begin], list_marks[l]);
      }
    }
    __syncthreads();

    // Thread t compacts the chunk's units chunk_end - 1 - (t * kUnitsPerThread + k), so the walk
    // runs from the last unit down (the kernel's order: a causal row's diagonal tile first).
    uint32_t mine[kUnitsPerThread];
    int marked = 0;
#pragma unroll
    for (int k = 0; k < kUnitsPerThread; ++k) {
      const int u = chunk_end - 1 - (static_cast<int>(threadIdx.x) * kUnitsPerThread + k);
      mine[k] = u >= chunk_begin ? marks[u - chunk_begin] : 0u;
      marked += mine[k] != 0u;
    }
    int rank = 0, chunk_marked = 0;
    BlockScan(scan).ExclusiveSum(marked, rank, chunk_marked);
    rank += written;
#pragma unroll
    for (int k = 0; k < kUnitsPerThread; ++k) {
      if (mine[k] == 0u) continue;
      const int u = chunk_end - 1 - (static_cast<int>(threadIdx.x) * kUnitsPerThread + k);
      int masking[2];
      for (int wg = 0; wg < 2; ++wg) {
        masking[wg] = FlexStep::masking(static_cast<int>(mine[k]), wg);
        // Listed as partial and as full: partial (both marks ORed give kClassify's bits).
        if (masking[wg] == (FlexStep::kPartial | FlexStep::kFull)) masking[wg] = FlexStep::kPartial;
      }
      const bool all_visible = masking[0] == FlexStep::kFull && masking[1] == FlexStep::kFull &&
                               rows_inside && (u + 1) * kUnitKeys <= seqlen_k;
      const int step = kPaired ? rank / 2 : rank;
      walk_records[step * kWords + (kPaired ? rank % 2 : 0)] =
          FlexStep::pack(u, masking[0], masking[1], all_visible);
      ++rank;
    }
    written += chunk_marked;
    __syncthreads();  // the marks and the scan's storage are reused by the next chunk
  }
  if (threadIdx.x == 0) {
    // An odd count leaves the last paired step's second half empty: the block past the keys.
    if (kPaired && written % 2 != 0) {
      walk_records[written / 2 * kWords + 1] =
          FlexStep::pack(past_key_block<kUnitKeys>(seqlen_k), FlexStep::kSkip, false);
    }
    counts[walk] = kPaired ? (written + 1) / 2 : written;
  }
}

}  // namespace

cudaError_t build_merged_walks(const flex::BlockMask& block_mask, int seqlen_q, int seqlen_k,
                               int num_m_blocks, void* workspace, MergedWalks* walks,
                               cudaStream_t stream) {
  const int64_t count = merged_walk_count(block_mask, num_m_blocks);
  auto* counts = static_cast<int32_t*>(workspace);
  auto* records = reinterpret_cast<int32_t*>(static_cast<char*>(workspace) +
                                             detail::align_up(count * sizeof(int32_t)));
  const int capacity = static_cast<int>(merged_walk_capacity(block_mask, seqlen_k));
  *walks = {counts, records, capacity};
  detail::LaunchShape shape;
  shape.grid = dim3(static_cast<unsigned>(count));
  shape.threads = kBuildThreads;
  return needs_paired_walk(block_mask)
             ? detail::launch_kernel(merged_walk_kernel<true>, shape, stream, block_mask, seqlen_q,
                                     seqlen_k, num_m_blocks, capacity, counts, records)
             : detail::launch_kernel(merged_walk_kernel<false>, shape, stream, block_mask, seqlen_q,
                                     seqlen_k, num_m_blocks, capacity, counts, records);
}

}  // namespace flashcore::sm90
