// Shared-memory tile layout and the data movement around it: cp.async global->shared loads with
// zero fill, and ldmatrix loads of mma fragments.
//
// A tile is rows x kHeadDim elements, row-major, in 16-byte chunks. Chunk c of row r is stored at
// chunk slot (c ^ (r & 7)) of its group of eight chunks: the 8 rows one ldmatrix 8x8 matrix reads
// (same logical chunk, rows r..r+7) then land in 8 different 16-byte bank groups, and so do the 8
// chunks a cp.async phase writes, so neither conflicts. (CuTe's Swizzle<3,3,3> on the flat element
// offset gives this only for 64-wide rows; XORing the row into the chunk index does it for every
// head dim.) Head dims of 4 mod 8 chunks (32, 96, 160, 224) end in a group of four, where chunk c
// sits at (c ^ ((r >> 1) & 3)): their rows are 4 mod 8 chunks long, so rows r and r + 1 start in
// opposite halves of the 128 bytes, and the four slots XORed by r >> 1 fill each half once over
// rows r..r+7. (In the full groups of such rows, r & 7 still gives eight distinct bank groups:
// the half a row starts in only flips bit 2 of its slots.)
#pragma once

#include <cstdint>
#include <cute/arch/copy_sm75.hpp>
#include <cute/arch/copy_sm80.hpp>

#include "sm80/kernel_traits.hpp"

namespace flashcore::sm80 {

using Chunk = cute::uint128_t;

// Whether chunk c is in a row's last group of four (rows of 4 mod 8 chunks only).
template <int kChunksPerRow>
__device__ __forceinline__ bool in_short_group(int chunk) {
  return kChunksPerRow % 8 != 0 && (chunk & ~7) + 8 > kChunksPerRow;
}

template <int kChunksPerRow>
__device__ __forceinline__ int chunk_offset(int row, int chunk) {
  static_assert(kChunksPerRow % 4 == 0, "rows are whole groups of four chunks");
  const int slot = in_short_group<kChunksPerRow>(chunk) ? (chunk & ~3) | ((chunk ^ (row >> 1)) & 3)
                                                        : chunk ^ (row & 7);
  return (row * kChunksPerRow + slot) * static_cast<int>(sizeof(Chunk));
}

// Copies rows [0, kRows) of a tile whose row r starts at gmem + r * row_stride. Rows >= valid_rows
// and dims >= head_dim (the caller's, a multiple of 8; the instantiation may round it up:
// common/head_dim.hpp) are zero-filled and never read from global, so tails and padding contribute
// exact zeros to both GEMMs.
// A thread copies chunks chunk0, chunk0 + kLoadThreadsPerRow, ... of rows row0, row0 + kRowStep,
// ...: the global address advances by one 64-bit add per row, and the chunks of a row are
// immediate offsets from it. Computing each row's address from the tile start let ptxas hoist the
// kRows / kRowStep 64-bit offsets out of the KV loop, registers the MMA accumulators need (hd64
// spilled at 255 registers; it needs 236 now). With kRowStep a multiple of 8 every row keeps
// row0's swizzle and the shared-memory offsets fold to immediates.
template <typename Traits, int kRows>
__device__ __forceinline__ void load_tile_async(char* smem, const typename Traits::Element* gmem,
                                                int64_t row_stride, int valid_rows, int head_dim,
                                                int tid) {
  constexpr int kThreadsPerRow = Traits::kLoadThreadsPerRow;
  constexpr int kRowStep = Traits::kThreads / kThreadsPerRow;
  constexpr int kChunkSteps = Traits::kChunksPerRow / kThreadsPerRow;
  constexpr int kRowPasses = (kRows + kRowStep - 1) / kRowStep;
  // A pass covers kRowStep rows. The small tiles' 32-row Q tile at 4 mod 8 chunks per row is
  // shorter than one pass of their 256 threads (64 rows of four threads): there the last pass
  // leaves the threads past the tile idle.
  auto past_tile = [&](int pass, int row) {
    return kRows % kRowStep != 0 && pass == kRowPasses - 1 && row >= kRows;
  };
  const int row0 = tid / kThreadsPerRow;
  const int chunk0 = tid % kThreadsPerRow;
  const auto* src = gmem + row0 * row_stride + chunk0 * kChunkElems;
  // Whether the caller's head dim is the instantiation's: a uniform test. A per-thread one (is
  // this thread's last chunk < head_dim) was hoisted out of the KV loop into a register, and the
  // hd128 and hd256 large tiles spilled 4 bytes at 255 registers; so a rounded-up head dim takes
  // the predicated path below for every copy.
  const bool all_dims = head_dim == Traits::kHeadDim;
  if (valid_rows >= kRows && all_dims) {
    // Every row and chunk in range (all but a tail tile): no per-row bound test and no address
    // select. These copies are most of the prologue, which is on the critical path of
    // launch-bound grids (docs/perf.md, v7).
#pragma unroll
    for (int i = 0; i < kRowPasses; ++i) {
      if (past_tile(i, row0 + i * kRowStep)) break;
#pragma unroll
      for (int j = 0; j < kChunkSteps; ++j) {
        const int chunk = chunk0 + j * kThreadsPerRow;
        cute::SM80_CP_ASYNC_CACHEGLOBAL<Chunk>::copy(
            *reinterpret_cast<const Chunk*>(src + j * kThreadsPerRow * kChunkElems),
            *reinterpret_cast<Chunk*>(
                smem + chunk_offset<Traits::kChunksPerRow>(row0 + i * kRowStep, chunk)));
      }
      src += kRowStep * row_stride;
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < kRowPasses; ++i) {
    const int row = row0 + i * kRowStep;
    if (past_tile(i, row)) break;
#pragma unroll
    for (int j = 0; j < kChunkSteps; ++j) {
      const int chunk = chunk0 + j * kThreadsPerRow;
      const bool valid = row < valid_rows && (all_dims || chunk * kChunkElems < head_dim);
      // An out-of-range chunk still needs a mapped address for the instruction; it reads 0 bytes.
      cute::SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<Chunk>::copy(
          *reinterpret_cast<const Chunk*>(valid ? src + j * kThreadsPerRow * kChunkElems : gmem),
          *reinterpret_cast<Chunk*>(smem + chunk_offset<Traits::kChunksPerRow>(row, chunk)), valid);
    }
    src += kRowStep * row_stride;
  }
}

// A lane's part of a fragment address: for row r and c = 0 or 1 (the chunk's low bit),
// full = (r & 7) ^ c and, for rows that end in a group of four chunks, short_group =
// ((r >> 1) & 3) ^ c. Every fragment row is a multiple of 8 plus the lane's row_low (r & 7).
struct LaneSwizzle {
  int full, short_group;
};
__device__ __forceinline__ LaneSwizzle lane_swizzle(int row_low, int c) {
  return {row_low ^ c, (row_low >> 1) ^ c};
}

// Byte offset of chunk (kChunk + c) of row r, where kChunk is even and c is 0 or 1, given the
// lane's swizzle for r and c. Equal to chunk_offset(r, kChunk + c) because kChunk's bit 0 is
// clear. With kChunk a compile-time constant in an unrolled loop, the group test folds and
// (kChunk & 7) ^ x takes only four values per lane, so the compiler keeps four offsets live
// instead of one per fragment.
template <int kChunksPerRow>
__device__ __forceinline__ int fragment_offset(int row, int even_chunk, LaneSwizzle x) {
  const int slot = in_short_group<kChunksPerRow>(even_chunk)
                       ? (even_chunk & ~3) + ((even_chunk & 3) ^ x.short_group)
                       : (even_chunk & ~7) + ((even_chunk & 7) ^ x.full);
  return (row * kChunksPerRow + slot) * static_cast<int>(sizeof(Chunk));
}

// ldmatrix.x4: lane l supplies the address of row (l % 8) of 8x8 matrix (l / 8); register j gets
// matrix j with each lane holding row lane/4, columns 2*(lane%4) and +1.
__device__ __forceinline__ void ldsm_x4(const char* smem, int byte_offset, uint32_t (&r)[4]) {
  cute::SM75_U32x4_LDSM_N::copy(*reinterpret_cast<const Chunk*>(smem + byte_offset), r[0], r[1],
                                r[2], r[3]);
}
// Transposed: register j holds matrix j with each lane holding column lane/4, rows 2*(lane%4), +1.
__device__ __forceinline__ void ldsm_x4_trans(const char* smem, int byte_offset, uint32_t (&r)[4]) {
  cute::SM75_U16x8_LDSM_T::copy(*reinterpret_cast<const Chunk*>(smem + byte_offset), r[0], r[1],
                                r[2], r[3]);
}

// Two floats -> one register of two 16-bit elements, the first in the low half (lower column).
template <typename Element>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

}  // namespace flashcore::sm80
