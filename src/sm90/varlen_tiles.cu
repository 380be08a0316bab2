// The build of a varlen batch's tile list (varlen_tiles.hpp says what it is and why).
#include <cub/block/block_scan.cuh>

#include "common/launch.hpp"
#include "sm90/dependent_launch.hpp"
#include "sm90/tile_scheduler.hpp"
#include "sm90/varlen_tiles.hpp"

namespace flashcore::sm90 {
namespace {

// One CTA: the list is a few hundred entries for 16k tokens of documents (a few thousand for a
// million), so the build is one block-wide scan per chunk of sequences and a store per entry.
constexpr int kListThreads = 512;
using BlockScan = cub::BlockScan<int, kListThreads>;
// Query blocks of sequence b, clamped to [0, levels] (a length outside [0, max_seqlen_q] is the
// caller's error; clamping keeps every entry inside the list).
__device__ int query_blocks(const int32_t* cu_seqlens_q, int b, int block_m, int levels) {
  const int64_t length = int64_t{cu_seqlens_q[b + 1]} - cu_seqlens_q[b];
  if (length <= 0) return 0;
  const int64_t blocks = (length + block_m - 1) / block_m;
  return blocks < levels ? static_cast<int>(blocks) : levels;
}

// Sequence b's entries start at the sum of the query blocks of the sequences before it, deepest
// block first, each entry's heads next to each other: a chunk of sequences at a time, each chunk's
// entries spread over the threads (a long sequence's blocks are not one thread's loop).
__global__ void __launch_bounds__(kListThreads)
    list_varlen_tiles_kernel(VarlenTileList list, const FwdArgs grid, int block_m) {
  __shared__ BlockScan::TempStorage scan;
  __shared__ int chunk_ends[kListThreads];  // the chunk's entries, inclusive prefix by sequence
  // The flex kernel, launched dependently after the list (flex_kernel.cuh), may set up its CTAs
  // meanwhile; it waits for this grid to finish before reading anything.
  DependentLaunch::allow_dependent_launch();
  const int thread = static_cast<int>(threadIdx.x);
  if (thread == 0) *list.tile_counter = 0;
  int listed = 0;  // entries of the chunks before
  for (int first = 0; first < grid.batch; first += kListThreads) {
    const int b = first + thread;
    const int blocks =
        b < grid.batch ? query_blocks(grid.cu_seqlens_q, b, block_m, grid.num_m_blocks) : 0;
    int end = 0, chunk_entries = 0;
    BlockScan(scan).InclusiveSum(blocks, end, chunk_entries);
    chunk_ends[thread] = end;
    __syncthreads();
    for (int e = thread; e < chunk_entries; e += kListThreads) {
      // The chunk's sequence of entry e: the first whose inclusive end is past e.
      int lo = 0, hi = kListThreads - 1;
      while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (chunk_ends[mid] > e) {
          hi = mid;
        } else {
          lo = mid + 1;
        }
      }
      const int slot = listed + e;
      if (slot >= list.capacity) continue;
      Tile tile{};
      tile.batch = first + lo;
      tile.m_block = chunk_ends[lo] - 1 - e;  // the sequence's last block first
      for (tile.head = 0; tile.head < grid.heads; ++tile.head) {
        list.tiles[slot * grid.heads + tile.head] = TileScheduler<1>::index_of(grid, tile);
      }
    }
    listed += chunk_entries;
    __syncthreads();  // chunk_ends and the scan's storage are reused
  }
  if (thread == 0) *list.count = min(listed, list.capacity) * grid.heads;
}

}  // namespace

VarlenTileList varlen_tile_list(int* tile_counter, void* region, int capacity) {
  char* base = static_cast<char*>(region);
  VarlenTileList list{};
  list.tile_counter = tile_counter;
  list.count = reinterpret_cast<int*>(base);
  list.tiles = reinterpret_cast<int*>(base + detail::align_up(sizeof(int)));
  list.capacity = capacity;
  return list;
}

cudaError_t build_varlen_tile_list(const VarlenTileList& list, const FwdArgs& grid, int block_m,
                                   cudaStream_t stream) {
  detail::LaunchShape shape;
  shape.grid = dim3(1);
  shape.threads = kListThreads;
  return detail::launch_kernel(list_varlen_tiles_kernel, shape, stream, list, grid, block_m);
}

}  // namespace flashcore::sm90
