// The merged walks' build (flex_merged_walk.hpp says what they are and why).
#include <algorithm>
#include <climits>
#include <cub/block/block_scan.cuh>

#include "common/block_walk.hpp"
#include "common/launch.hpp"
#include "sm90/dependent_launch.hpp"
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

constexpr int kWarpLanes = 32;

// Whether rows [row_begin, row_end) and keys [key_begin, key_end) of batch b carry one document id
// (FlexStep::with_one_document). Called by every lane of a warp: a lane per row and per key, then
// a min and a max across the warp.
__device__ bool one_document(const flex::DocumentMask& docs, int b, int row_begin, int row_end,
                             int key_begin, int key_end) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpLanes;
  int lowest = INT_MAX, highest = INT_MIN;
  for (int q = row_begin + lane; q < row_end; q += kWarpLanes) {
    const int id = docs.doc_ids_q[b * docs.batch_stride_q + q];
    lowest = min(lowest, id);
    highest = max(highest, id);
  }
  for (int k = key_begin + lane; k < key_end; k += kWarpLanes) {
    const int id = docs.doc_ids_k[b * docs.batch_stride_k + k];
    lowest = min(lowest, id);
    highest = max(highest, id);
  }
  return __reduce_min_sync(0xffffffffu, lowest) >= __reduce_max_sync(0xffffffffu, highest);
}

// One CTA per walk: walk w is query tile w % num_m_blocks of the BlockMask's (batch, head)
// w / num_m_blocks (MergedWalks::walk). docs: the built-in document mask, or none; batch: the
// problem's batches, which a BlockMask of batch 1 serves all of. CTA 0 also zeroes the flex
// kernel's tile counter, which saves the stream a memset between the two launches.
// kUnitKeys: the kernel's key tile, or the paired walk's 64-key blocks.
template <int kUnitKeys, bool kPaired>
__global__ void __launch_bounds__(kBuildThreads)
    merged_walk_kernel(const flex::BlockMask m, int seqlen_q, int seqlen_k, int num_m_blocks,
                       int capacity, int32_t* counts, int32_t* records,
                       const flex::DocumentMask docs, int batch, int* tile_counter) {
  // The flex kernel, launched dependently (flex_kernel.cuh), may start its CTAs' setup as soon as
  // every CTA of this grid is running; it waits for this grid to finish before reading anything.
  DependentLaunch::allow_dependent_launch();
  if (blockIdx.x == 0 && threadIdx.x == 0) *tile_counter = 0;
  using BlockScan = cub::BlockScan<int, kBuildThreads>;
  __shared__ typename BlockScan::TempStorage scan;
  __shared__ uint32_t marks[kChunkUnits];  // each unit's masking per warpgroup (FlexStep's bits)
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
  if (docs.doc_ids_q == nullptr) return;
  // The partial units inside one document, a warp each: their consumers then skip the documents'
  // per-column compares (the diagonal tiles of causal documents at least a tile long:
  // flex_step.hpp). Every record above is this CTA's write, visible to its threads after the
  // barrier.
  __syncthreads();
  const int warp = static_cast<int>(threadIdx.x) / kWarpLanes;
  const int b_begin = m.batch == 1 ? 0 : static_cast<int>(bh / m.heads);
  const int b_end = m.batch == 1 ? batch : b_begin + 1;
  for (int r = warp; r < written; r += kBuildThreads / kWarpLanes) {
    const int word = walk_records[r];  // rank r is word r, paired or not
    if (FlexStep::masking(word, 0) != FlexStep::kPartial &&
        FlexStep::masking(word, 1) != FlexStep::kPartial) {
      continue;
    }
    const int key_begin = FlexStep::tile(word) * kUnitKeys;
    const int key_end = min(key_begin + kUnitKeys, seqlen_k);
    bool one = true;
    for (int b = b_begin; b < b_end && one; ++b) {
      one = one_document(docs, b, row_begin, row_end, key_begin, key_end);
    }
    if (one && threadIdx.x % kWarpLanes == 0) walk_records[r] = FlexStep::with_one_document(word);
  }
}

}  // namespace

cudaError_t build_merged_walks(const flex::BlockMask& block_mask, int seqlen_q, int seqlen_k,
                               int num_m_blocks, int tile_keys, const flex::DocumentMask& documents,
                               int batch, int* tile_counter, void* workspace, MergedWalks* walks,
                               cudaStream_t stream) {
  const int64_t count = merged_walk_count(block_mask, num_m_blocks);
  auto* counts = static_cast<int32_t*>(workspace);
  auto* records = reinterpret_cast<int32_t*>(static_cast<char*>(workspace) +
                                             detail::align_up(count * sizeof(int32_t)));
  const int capacity = static_cast<int>(merged_walk_capacity(block_mask, seqlen_k, tile_keys));
  *walks = {counts, records, capacity};
  detail::LaunchShape shape;
  shape.grid = dim3(static_cast<unsigned>(count));
  shape.threads = kBuildThreads;
  const auto launch = [&](auto kernel) {
    return detail::launch_kernel(kernel, shape, stream, block_mask, seqlen_q, seqlen_k,
                                 num_m_blocks, capacity, counts, records, documents, batch,
                                 tile_counter);
  };
  if (needs_paired_walk(block_mask, tile_keys)) {
    return launch(merged_walk_kernel<kFlexPairedBlockKeys, true>);
  }
  switch (tile_keys) {
    case kFlexTileKeys:
      return launch(merged_walk_kernel<kFlexTileKeys, false>);
    case flex_tile_keys(256):
      return launch(merged_walk_kernel<flex_tile_keys(256), false>);
    default:
      return cudaErrorInvalidValue;  // no flex kernel has such tiles
  }
}

}  // namespace flashcore::sm90
