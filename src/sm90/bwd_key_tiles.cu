// The selection of a varlen batch's key tiles (bwd_key_tiles.hpp says what it is and why).
#include <thrust/iterator/counting_iterator.h>

#include <cub/device/device_select.cuh>

#include "common/workspace_align.hpp"
#include "sm90/bwd_key_tiles.hpp"

namespace flashcore::sm90 {
namespace {

// Whether tile number t's first key lies inside its sequence, as the kernel's walk binds it
// (sm80::bwd_sequence: clamped into the packed keys and to max_seqlen_k; BwdWalk::at).
struct TileHasKeys {
  BwdTileOrder order;
  sm80::BwdParams p;
  int block_n;

  __device__ bool operator()(int t) const {
    const BwdTileOrder::Tile tile = order.tile(t);
    return int64_t{tile.n_block} * block_n < sm80::bwd_sequence(p, tile.batch).seqlen_k;
  }
};

cudaError_t select(void* scratch, size_t& scratch_bytes, const TileHasKeys& has_keys, int* tiles,
                   int* count, int num_tiles, cudaStream_t stream) {
  return cub::DeviceSelect::If(scratch, scratch_bytes, thrust::counting_iterator<int>(0), tiles,
                               count, num_tiles, has_keys, stream);
}

// The selection's scratch for num_tiles tiles (a size query: nothing runs).
size_t scratch_bytes(int num_tiles) {
  size_t bytes = 0;
  if (select(nullptr, bytes, TileHasKeys{}, nullptr, nullptr, num_tiles, nullptr) != cudaSuccess) {
    return 0;
  }
  return bytes;
}

}  // namespace

size_t bwd_key_tile_list_bytes(int num_tiles) {
  return detail::align_up(sizeof(int)) +
         detail::align_up(sizeof(int) * static_cast<size_t>(num_tiles)) +
         detail::align_up(scratch_bytes(num_tiles));
}

BwdKeyTileList bwd_key_tile_list(void* region, int num_tiles) {
  char* base = static_cast<char*>(region);
  BwdKeyTileList list;
  list.count = reinterpret_cast<int*>(base);
  list.tiles = reinterpret_cast<int*>(base + detail::align_up(sizeof(int)));
  list.scratch_bytes = scratch_bytes(num_tiles);
  list.scratch = base + detail::align_up(sizeof(int)) +
                 detail::align_up(sizeof(int) * static_cast<size_t>(num_tiles));
  return list;
}

cudaError_t build_bwd_key_tile_list(const BwdKeyTileList& list, const BwdTileOrder& order,
                                    const sm80::BwdParams& p, int block_n, cudaStream_t stream) {
  size_t bytes = list.scratch_bytes;
  return select(list.scratch, bytes, TileHasKeys{order, p, block_n}, list.tiles, list.count,
                order.num_tiles(), stream);
}

}  // namespace flashcore::sm90
