// Persistent tile scheduler: one CTA per SM runs tiles until none are left. A tile is (query
// block, batch, head, split).
//
// Order: (batch, head) pairs are taken head_group at a time, and inside a group every query block
// of those heads runs before the next group starts, so the CTAs working at the same time read the
// same few heads' K and V and those stay in L2 (without grouping, 132 CTAs on 132 different heads
// re-read K/V from DRAM once per query block). Inside a group the query blocks go last-first: with
// a causal or windowed mask the last blocks see the most keys, and starting the longest tiles first
// (longest-processing-time-first) keeps the short diagonal tiles for the end, where they fill the
// gaps instead of forming a tail.
//
// Who decides: the producer warp picks each tile and hands its index to the consumers through a
// two-slot ring in shared memory (TileRing), so only one place computes the sequence. Uniform
// tiles (no mask) follow a fixed sequence (TileSequence). Masked tiles differ in work by up to the
// number of query blocks, and a fixed sequence leaves some CTAs with more than others; there each
// CTA takes its next tile from a global counter when it is ready for one (FwdArgs::tile_counter,
// zeroed before the launch), which is longest-processing-time-first on tiles already sorted
// longest first.
//
// Clusters (KernelTraits::kClusterCtas > 1, unmasked problems only): a tile index names a group of
// kClusterCtas neighbouring query blocks of one head, and CTA r of the cluster runs block r of the
// group. Both CTAs follow the same fixed sequence, by cluster index, so they walk the same heads'
// K/V in lockstep (the TMA multicasts each K/V tile to both). A group past the last query block
// (an odd count) gives its CTA an all-out-of-range block: its Q loads as zeros, it takes part in
// the K/V ring as usual, and its epilogue stores nothing.
#pragma once

#include <cutlass/arch/barrier.h>

#include <cute/arch/cluster_sm90.hpp>

#include "sm90/fwd_params.hpp"

namespace flashcore::sm90 {

// 16-byte aligned: one shared-memory load or store in TileRing.
struct alignas(16) Tile {
  int m_block;
  int head;
  int batch;
  int split;
};

// Which tiles CTA c of G runs: in round r, tile r * G + c when r is even and r * G + (G - 1 - c)
// when r is odd (a snake). Tiles come longest first (below), so a CTA that took one of the longest
// tiles of a round takes one of the shortest of the next: with a causal mask, where the first
// tiles see up to num_m_blocks times more keys than the last, a plain stride gave the CTAs that
// started on the long tiles every long tile after them too (hd256 S16k causal: 0.67x cuDNN).
//
// The producer's side of both schedules: the index of the CTA's first tile and of each next one;
// an index at or past num_tiles ends the CTA. Called by the 32 lanes of the producer warp
// together. It keeps only the count of tiles taken: the producer runs on 24 registers, so the CTA
// index, grid size and counter pointer are re-read where needed (special registers and kernel
// parameters), and the counter is read when the next tile is due rather than ahead (the producer
// runs a K/V ring ahead of the consumers, which hides the atomic's latency from them).
template <int kClusterCtas>
struct TileCursor {
  int taken = 0;  // tiles before the current one

  __device__ __forceinline__ static int fixed_index(int round) {
    const int cluster = blockIdx.x / kClusterCtas;
    const int clusters = gridDim.x / kClusterCtas;
    return round * clusters + ((round & 1) ? clusters - 1 - cluster : cluster);
  }
  __device__ __forceinline__ int first() const { return fixed_index(0); }
  __device__ __forceinline__ int next(const FwdArgs& a) { return next(a.tile_counter); }
  // tile_counter: the dynamic schedule's counter (zeroed before the launch), or null (fixed).
  __device__ __forceinline__ int next(int* tile_counter) {
    ++taken;
    if (tile_counter == nullptr) return fixed_index(taken);
    int index = 0;
    if (threadIdx.x % 32 == 0) index = atomicAdd(tile_counter, 1) + static_cast<int>(gridDim.x);
    return __shfl_sync(0xffffffffu, index, 0);
  }
};

// Tile indices from the producer warp to the consumers: two slots, so the producer can name the
// next tile while the consumers still read the current one. The producer decodes each tile it
// loads anyway and passes the decoded Tile along, so the consumer warps, which would otherwise
// all repeat its divisions (about 150 instructions a warp and a tile, on the path from one tile's
// epilogue to the next tile's first GEMM; docs/perf.md, session 34), read it instead. Each side
// counts the indices it has passed (slot = count % 2, mbarrier phase = count / 2 % 2). Plain
// mbarriers in shared memory rather than a CUTLASS pipeline object, whose pointers and parameters
// would take registers the 24-register producer does not have.
struct TileRing {
  static constexpr int kSlots = 2;
  struct SharedStorage {
    int index[kSlots];
    int payload[kSlots];  // one int the producer tells about the tile (the flex kernel's steps)
    Tile tile[kSlots];    // the decoded index (a forward kernel's; the end index carries none)
    cutlass::arch::ClusterBarrier full[kSlots];   // lane 0 of the producer arrives
    cutlass::arch::ClusterBarrier empty[kSlots];  // every consumer thread arrives
  };

  // One thread, before the CTA-wide sync that publishes barrier initialization.
  __device__ static void init(SharedStorage& ring, int consumer_threads) {
    for (int slot = 0; slot < kSlots; ++slot) {
      ring.full[slot].init(1);
      ring.empty[slot].init(consumer_threads);
    }
  }
  // The producer warp: waits for the slot's previous index to be read (a fresh barrier counts as
  // read), then lane 0 writes the index and arrives (release), which publishes it.
  __device__ static void publish(SharedStorage& ring, int count, int index, int payload = 0,
                                 const Tile& tile = {}) {
    const int slot = count % kSlots;
    ring.empty[slot].wait(((count / kSlots) & 1) ^ 1);
    if (threadIdx.x % 32 == 0) {
      ring.index[slot] = index;
      ring.payload[slot] = payload;
      ring.tile[slot] = tile;
      ring.full[slot].arrive();
    }
  }
  // Every consumer thread: waits (acquire), reads, and frees the slot.
  __device__ static int take(SharedStorage& ring, int count, int* payload = nullptr,
                             Tile* tile = nullptr) {
    const int slot = count % kSlots;
    ring.full[slot].wait((count / kSlots) & 1);
    const int index = ring.index[slot];
    if (payload != nullptr) *payload = ring.payload[slot];
    if (tile != nullptr) *tile = ring.tile[slot];
    ring.empty[slot].arrive();
    return index;
  }
};

// Query blocks per tile index: kClusterCtas neighbouring ones (one per CTA of a cluster).
template <int kClusterCtas>
__host__ __device__ constexpr int m_groups_of(int num_m_blocks) {
  return (num_m_blocks + kClusterCtas - 1) / kClusterCtas;
}

template <int kClusterCtas>
struct TileScheduler {
  __device__ __forceinline__ static Tile decode(const FwdArgs& a, int index) {
    Tile tile;
    tile.split = index % a.num_splits;
    index /= a.num_splits;
    const int pairs = a.batch * a.heads;
    const int m_groups = m_groups_of<kClusterCtas>(a.num_m_blocks);
    const int group_tiles = a.head_group * m_groups;
    const int group = index / group_tiles;
    const int in_group = index - group * group_tiles;
    const int first_pair = group * a.head_group;
    const int heads_in_group = min(a.head_group, pairs - first_pair);
    const int reversed_m = in_group / heads_in_group;
    const int pair = first_pair + (in_group - reversed_m * heads_in_group);
    const int m_group = m_groups - 1 - reversed_m;
    if constexpr (kClusterCtas == 1) {
      tile.m_block = m_group;
    } else {
      tile.m_block = m_group * kClusterCtas + static_cast<int>(cute::block_rank_in_cluster());
    }
    tile.head = pair % a.heads;
    tile.batch = pair / a.heads;
    return tile;
  }

  // The index decode() maps to tile: the inverse of decode, for one-CTA tiles, unsplit (the grid a
  // varlen batch runs on; its tile list holds these, varlen_tiles.hpp).
  __device__ __forceinline__ static int index_of(const FwdArgs& a, const Tile& tile) {
    static_assert(kClusterCtas == 1, "a varlen batch's grid has one-CTA tiles");
    const int pairs = a.batch * a.heads;
    const int pair = tile.batch * a.heads + tile.head;
    const int group = pair / a.head_group;
    const int first_pair = group * a.head_group;
    const int heads_in_group = min(a.head_group, pairs - first_pair);
    const int reversed_m = a.num_m_blocks - 1 - tile.m_block;
    return group * a.head_group * a.num_m_blocks + reversed_m * heads_in_group +
           (pair - first_pair);
  }
};

// The key blocks one tile visits: [begin, end) in units of kBlockN. Empty when every row of the
// tile is fully masked (then nothing is loaded and the epilogue writes O = 0, LSE = -inf).
struct BlockRange {
  int begin;
  int end;
  __device__ __forceinline__ bool empty() const { return end <= begin; }
};

// mask: the window bound to the tile's sequence (sequence_view.hpp), whose lengths it holds.
template <int kBlockM, int kBlockN>
__device__ __forceinline__ BlockRange key_blocks(const FwdArgs& a, const WindowMask<int>& mask,
                                                 const Tile& tile) {
  const int row_begin = tile.m_block * kBlockM;
  const int row_end = min(row_begin + kBlockM, mask.seqlen_q);
  const int key_begin = mask.block_first_key(row_begin);
  const int key_end = mask.block_end_key(row_end);
  BlockRange range{key_begin / kBlockN, (key_end + kBlockN - 1) / kBlockN};
  if (key_end <= key_begin) return {0, 0};
  if (a.num_splits > 1) {
    // Contiguous chunks of the tile's blocks, one per split; trailing splits may get none.
    const int blocks = range.end - range.begin;
    const int per_split = (blocks + a.num_splits - 1) / a.num_splits;
    const int begin = range.begin + tile.split * per_split;
    range = {begin, min(begin + per_split, range.end)};
  }
  return range;
}

}  // namespace flashcore::sm90
