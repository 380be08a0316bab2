// Epilogue: normalized O in the input dtype plus LSE, or (split-KV) fp32 partial O plus partial
// LSE for the combine kernel. Only rows < seqlen_q and dims < FwdParams::head_dim are written (the
// instantiation may be wider than the caller's head dim: common/head_dim.hpp).
#pragma once

#include <cstdint>

#include "sm80/fwd_params.hpp"
#include "sm80/kernel_traits.hpp"
#include "sm80/tile_io.hpp"

namespace flashcore::sm80 {

// Where one CTA writes: its (batch, head, first row, split) and the rows that exist.
struct OutputTile {
  int batch, head, row_begin, row_end, split;

  __device__ __forceinline__ int64_t row_index(const FwdParams& p, int row) const {
    return (static_cast<int64_t>(batch) * p.heads + head) * p.seqlen_q + row;
  }
  __device__ __forceinline__ int64_t partial_row_index(const FwdParams& p, int row) const {
    return static_cast<int64_t>(split) * p.batch * p.heads * p.seqlen_q + row_index(p, row);
  }
};

// One warp's share of its rows' O: n8 tiles [first_tile, first_tile + kNTiles) of the rows of
// row_warp (all of them when the warp saw every key; one key group's share after
// merge_key_groups), scaled by 1/sum, plus LSE when write_lse. The O fragments are staged through
// the warp's own rows and columns of the Q tile in shared memory (no other warp reads them) so that
// global stores are whole 16-byte chunks, coalesced along the contiguous head dim.
template <typename Traits, int kNTiles>
__device__ __forceinline__ void store_output(const FwdParams& p, const OutputTile& tile,
                                             char* q_smem, int row_warp, int lane, int first_tile,
                                             const float (&o)[Traits::kWarpMTiles][kNTiles][4],
                                             const float (&inv_sum)[Traits::kWarpMTiles][2],
                                             const float (&lse)[Traits::kWarpMTiles][2],
                                             bool write_lse) {
  using Element = typename Traits::Element;
  constexpr int kChunks = Traits::kChunksPerRow;
  const int g = lane / 4, t = lane % 4;
  const int warp_row0 = row_warp * Traits::kWarpRows;

  if (p.num_splits > 1) {
#pragma unroll
    for (int mt = 0; mt < Traits::kWarpMTiles; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = tile.row_begin + warp_row0 + mt * kMmaM + g + 8 * half;
        if (row >= tile.row_end) continue;
        const int64_t index = tile.partial_row_index(p, row);
        float* out = p.o_partial + index * p.head_dim + first_tile * kMmaN;
#pragma unroll
        for (int j = 0; j < kNTiles; ++j) {
          if ((first_tile + j) * kMmaN >= p.head_dim) break;  // n8 tiles past the caller's dims
          *reinterpret_cast<float2*>(out + j * kMmaN + 2 * t) = make_float2(
              o[mt][j][2 * half] * inv_sum[mt][half], o[mt][j][2 * half + 1] * inv_sum[mt][half]);
        }
        if (write_lse && t == 0) p.lse_partial[index] = lse[mt][half];
      }
    }
    return;
  }

  // Every lane of the warp has finished its ldmatrix reads of these Q rows before any lane
  // overwrites them with O (an intra-warp write-after-read that racecheck reported: lanes of one
  // warp are not guaranteed to run in lockstep).
  __syncwarp();
#pragma unroll
  for (int mt = 0; mt < Traits::kWarpMTiles; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int local_row = warp_row0 + mt * kMmaM + g + 8 * half;
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) {
        // n8 tile dt is exactly chunk dt; this lane's two columns are bytes 4t..4t+3 of it.
        *reinterpret_cast<uint32_t*>(q_smem + chunk_offset<kChunks>(local_row, first_tile + j) +
                                     4 * t) =
            pack2<Element>(o[mt][j][2 * half] * inv_sum[mt][half],
                           o[mt][j][2 * half + 1] * inv_sum[mt][half]);
      }
      const int row = tile.row_begin + local_row;
      if (write_lse && p.lse != nullptr && t == 0 && row < tile.row_end)
        p.lse[tile.row_index(p, row)] = lse[mt][half];
    }
  }
  __syncwarp();

  Element* o_base = static_cast<Element*>(p.o) + tile.batch * p.o_batch + tile.head * p.o_head;
  // The lanes take the warp's chunks in turn. A key group's share need not be a multiple of 32
  // chunks (16 rows x 3 n8 tiles at hd96), and then the last turn is partial.
  constexpr int kWarpChunks = Traits::kWarpRows * kNTiles;
#pragma unroll
  for (int i = 0; i < (kWarpChunks + kWarpSize - 1) / kWarpSize; ++i) {
    const int idx = lane + i * kWarpSize;
    const int local_row = warp_row0 + idx / kNTiles;
    const int chunk = first_tile + idx % kNTiles;
    const int row = tile.row_begin + local_row;
    if ((kWarpChunks % kWarpSize != 0 && idx >= kWarpChunks) || row >= tile.row_end ||
        chunk * kChunkElems >= p.head_dim) {
      continue;
    }
    *reinterpret_cast<uint4*>(o_base + row * p.o_seq + chunk * kChunkElems) =
        *reinterpret_cast<const uint4*>(q_smem + chunk_offset<kChunks>(local_row, chunk));
  }
}

// A CTA whose rows see no key at all (window/causal) or whose split got no KV block: O = 0,
// LSE = -inf (for a split this gives the partial weight 0 in the combine).
template <typename Traits>
__device__ __forceinline__ void store_empty(const FwdParams& p, const OutputTile& tile, int tid) {
  using Element = typename Traits::Element;
  constexpr int kChunks = Traits::kChunksPerRow;
  const int rows = tile.row_end - tile.row_begin;
  for (int idx = tid; idx < rows * kChunks; idx += Traits::kThreads) {
    const int row = tile.row_begin + idx / kChunks;
    const int col = (idx % kChunks) * kChunkElems;
    if (col >= p.head_dim) continue;
    if (p.num_splits > 1) {
      float4* out = reinterpret_cast<float4*>(p.o_partial +
                                              tile.partial_row_index(p, row) * p.head_dim + col);
      out[0] = make_float4(0.f, 0.f, 0.f, 0.f);
      out[1] = make_float4(0.f, 0.f, 0.f, 0.f);
    } else {
      Element* o_base = static_cast<Element*>(p.o) + tile.batch * p.o_batch + tile.head * p.o_head;
      *reinterpret_cast<uint4*>(o_base + row * p.o_seq + col) = make_uint4(0u, 0u, 0u, 0u);
    }
  }
  for (int r = tid; r < rows; r += Traits::kThreads) {
    const int row = tile.row_begin + r;
    if (p.num_splits > 1) {
      p.lse_partial[tile.partial_row_index(p, row)] = -INFINITY;
    } else if (p.lse != nullptr) {
      p.lse[tile.row_index(p, row)] = -INFINITY;
    }
  }
}

}  // namespace flashcore::sm80
