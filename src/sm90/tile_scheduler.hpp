// Persistent tile scheduler: one CTA per SM walks a fixed sequence of tiles that the producer
// and the consumers both compute, so they need no queue between them. A tile is (query block,
// batch, head, split).
//
// Order: (batch, head) pairs are taken head_group at a time, and inside a group every query block
// of those heads runs before the next group starts, so the CTAs working at the same time read the
// same few heads' K and V and those stay in L2 (without grouping, 132 CTAs on 132 different heads
// re-read K/V from DRAM once per query block). Inside a group the query blocks go last-first: with
// a causal or windowed mask the last blocks see the most keys, and starting the longest tiles first
// (longest-processing-time-first) keeps the short diagonal tiles for the end, where they fill the
// gaps instead of forming a tail.
#pragma once

#include "sm90/fwd_params.hpp"

namespace flashcore::sm90 {

struct Tile {
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
struct TileSequence {
  int round = 0;
  int cta;
  int ctas;
  int num_tiles;

  __device__ __forceinline__ TileSequence(int num_tiles_)
      : cta(blockIdx.x), ctas(gridDim.x), num_tiles(num_tiles_) {}
  __device__ __forceinline__ int index_of(int r) const {
    return r * ctas + ((r & 1) ? ctas - 1 - cta : cta);
  }
  __device__ __forceinline__ int index() const { return index_of(round); }
  __device__ __forceinline__ bool valid() const { return index() < num_tiles; }
  __device__ __forceinline__ bool has_next() const { return index_of(round + 1) < num_tiles; }
  __device__ __forceinline__ void next() { ++round; }
};

struct TileScheduler {
  __device__ __forceinline__ static Tile decode(const FwdArgs& a, int index) {
    Tile tile;
    tile.split = index % a.num_splits;
    index /= a.num_splits;
    const int pairs = a.batch * a.heads;
    const int group_tiles = a.head_group * a.num_m_blocks;
    const int group = index / group_tiles;
    const int in_group = index - group * group_tiles;
    const int first_pair = group * a.head_group;
    const int heads_in_group = min(a.head_group, pairs - first_pair);
    const int reversed_m = in_group / heads_in_group;
    const int pair = first_pair + (in_group - reversed_m * heads_in_group);
    tile.m_block = a.num_m_blocks - 1 - reversed_m;
    tile.head = pair % a.heads;
    tile.batch = pair / a.heads;
    return tile;
  }
};

// The key blocks one tile visits: [begin, end) in units of kBlockN. Empty when every row of the
// tile is fully masked (then nothing is loaded and the epilogue writes O = 0, LSE = -inf).
struct BlockRange {
  int begin;
  int end;
  __device__ __forceinline__ bool empty() const { return end <= begin; }
};

template <int kBlockM, int kBlockN>
__device__ __forceinline__ BlockRange key_blocks(const FwdArgs& a, const Tile& tile) {
  const int row_begin = tile.m_block * kBlockM;
  const int row_end = min(row_begin + kBlockM, a.seqlen_q);
  const int key_begin = a.mask.block_first_key(row_begin);
  const int key_end = a.mask.block_end_key(row_end);
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
