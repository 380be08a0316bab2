// Shared-memory tile layout and the data movement around it: cp.async global->shared loads with
// zero fill, and ldmatrix loads of mma fragments.
//
// A tile is rows x kHeadDim elements, row-major, in 16-byte chunks. Chunk c of row r is stored at
// chunk slot (c ^ (r & 7)): the 8 rows one ldmatrix 8x8 matrix reads (same logical chunk, rows
// r..r+7) then land in 8 different 16-byte bank groups, and so do the 8 chunks a cp.async phase
// writes, so neither conflicts. (CuTe's Swizzle<3,3,3> on the flat element offset gives this only
// for 64-wide rows; XORing the row into the chunk index does it for every head dim.)
#pragma once

#include <cstdint>
#include <cute/arch/copy_sm75.hpp>
#include <cute/arch/copy_sm80.hpp>

#include "sm80/kernel_traits.hpp"

namespace flashcore::sm80 {

using Chunk = cute::uint128_t;

template <int kChunksPerRow>
__device__ __forceinline__ int chunk_offset(int row, int chunk) {
  return (row * kChunksPerRow + (chunk ^ (row & 7))) * static_cast<int>(sizeof(Chunk));
}

// Copies rows [0, kRows) of a tile whose row r starts at gmem + r * row_stride; rows >= valid_rows
// are zero-filled (never read from global), so tails contribute exact zeros to both GEMMs.
// A thread copies one chunk column, rows row0, row0 + kRowStep, ...: the global address advances
// by one 64-bit add per row. Computing each row's address from the tile start let ptxas hoist the
// kRows / kRowStep 64-bit offsets out of the KV loop, registers the MMA accumulators need (hd64
// spilled at 255 registers; it needs 236 now). With kRowStep a multiple of 8 every row keeps row0's
// swizzle and the shared-memory offsets fold to immediates.
template <typename Traits, int kRows>
__device__ __forceinline__ void load_tile_async(char* smem, const typename Traits::Element* gmem,
                                                int64_t row_stride, int valid_rows, int tid) {
  constexpr int kRowStep = Traits::kThreads / Traits::kChunksPerRow;
  static_assert(Traits::kThreads % Traits::kChunksPerRow == 0 && kRows % kRowStep == 0,
                "every thread copies the same number of chunks of one column");
  const int row0 = tid / Traits::kChunksPerRow;
  const int chunk = tid % Traits::kChunksPerRow;
  const auto* src = gmem + row0 * row_stride + chunk * kChunkElems;
  if (valid_rows >= kRows) {
    // Every row in range (all but a tail tile): no per-row bound test and no address select.
    // These copies are most of the prologue, which is on the critical path of launch-bound
    // grids (docs/perf.md, v7).
#pragma unroll
    for (int i = 0; i < kRows / kRowStep; ++i) {
      cute::SM80_CP_ASYNC_CACHEGLOBAL<Chunk>::copy(
          *reinterpret_cast<const Chunk*>(src),
          *reinterpret_cast<Chunk*>(
              smem + chunk_offset<Traits::kChunksPerRow>(row0 + i * kRowStep, chunk)));
      src += kRowStep * row_stride;
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < kRows / kRowStep; ++i) {
    const int row = row0 + i * kRowStep;
    const bool valid = row < valid_rows;
    // An out-of-range row still needs a mapped address for the instruction; it reads 0 bytes.
    cute::SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<Chunk>::copy(
        *reinterpret_cast<const Chunk*>(valid ? src : gmem),
        *reinterpret_cast<Chunk*>(smem + chunk_offset<Traits::kChunksPerRow>(row, chunk)), valid);
    src += kRowStep * row_stride;
  }
}

// Byte offset of chunk (kChunk + c) of row r, where kChunk is even and c is 0 or 1, given
// lane_xor = (r & 7) ^ c. Equal to chunk_offset(r, kChunk + c) because kChunk's bit 0 is clear.
// With kChunk a compile-time constant in an unrolled loop, (kChunk & 7) ^ lane_xor takes only four
// values per lane, so the compiler keeps four offsets live instead of one per fragment.
template <int kChunksPerRow>
__device__ __forceinline__ int fragment_offset(int row, int even_chunk, int lane_xor) {
  return (row * kChunksPerRow + (even_chunk & ~7) + ((even_chunk & 7) ^ lane_xor)) *
         static_cast<int>(sizeof(Chunk));
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
