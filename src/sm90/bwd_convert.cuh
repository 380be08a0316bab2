// The sm90 backward's dQ tile order and its last kernel. The main kernel adds each step's fp32 dQ
// tile (kBlockM x D) to the workspace with one bulk reduction of its whole staging buffer, so the
// accumulators are kept in the order the consumer threads stage them, not row-major: registers
// 4j .. 4j + 3 of consumer thread t at floats 4 (j * 256 + t) of the tile, so each warp-wide
// staging store is one 16-byte store a thread, 512 contiguous bytes (no bank conflicts, no address
// math beyond an immediate offset, half the store instructions of 8-byte pairs). The
// convert kernel reads that order back: dQ = scale * accumulators, in the output dtype, with the
// caller's strides.
#pragma once

#include <cstdint>

#include "common/launch.hpp"
#include "sm80/bwd_params.hpp"
#include "sm80/tile_io.hpp"
#include "sm90/bwd_traits.hpp"
#include "sm90/wgmma.hpp"

namespace flashcore::sm90 {

template <typename Traits>
struct DqTileOrder {
  static constexpr int kThreads = Traits::kConsumerThreads;
  static constexpr int kPairs = Traits::kBlockM * Traits::kHeadDim / kThreads / 2;

  // Float offset in the tile of register pair k (registers 2k, 2k + 1) of consumer thread t:
  // pairs 2j and 2j + 1 are the two halves of the thread's 16-byte chunk j.
  __device__ __forceinline__ static int offset(int thread, int k) {
    return ((k / 2) * kThreads + thread) * 4 + (k % 2) * 2;
  }
  // Row and column of that pair's first element: the dQ accumulator of warpgroup t / 128, which
  // covers all rows and half the dims (kDqSplitsDims) or half the rows and all dims.
  __device__ __forceinline__ static int2 coords(int thread, int k) {
    const int warpgroup = thread / kWarpgroupThreads;
    const AccumulatorCoords c =
        AccumulatorCoords::of(Traits::kDqSplitsDims ? thread % kWarpgroupThreads : thread);
    const int col_offset = Traits::kDqSplitsDims ? warpgroup * (Traits::kHeadDim / 2) : 0;
    return make_int2(c.row(2 * k), col_offset + c.col(2 * k));
  }
};

// One CTA per (query block, head, batch), one thread per consumer thread of the main kernel.
// Varlen: one per (workspace query block, head), whose sequence (sm80::workspace_row_owner) has its
// rows go to their place in the packed dq.
//
// The tile goes through shared memory so that dq is written in whole 16-byte row chunks: written
// straight from the accumulator order, each warp store covered 8 rows x 16 bytes, and every load
// sat behind the previous pair's row test and store (SASS: LDG, STG, BRA per pair, one load in
// flight a thread): ncu timed that at 212 us for hd128's 192 MiB (B4 H16 S4096) and 445 us for
// hd256's 384 MiB. The loads come first and need no row test: the workspace holds whole query
// blocks.
template <typename Traits, typename Element>
__global__ void __launch_bounds__(Traits::kConsumerThreads)
    bwd_convert_kernel(const __grid_constant__ sm80::BwdParams p) {
  using Order = DqTileOrder<Traits>;
  constexpr int kRows = Traits::kBlockM;
  constexpr int kChunksPerRow = Traits::kHeadDim * static_cast<int>(sizeof(Element)) / 16;
  static_assert(kChunksPerRow % 8 == 0, "the chunk swizzle spreads 8 rows over 8 chunks");
  // Chunk c of row r at slot c ^ (r % 8): the 8 rows a warp's pair stores cover land on 8
  // distinct bank groups.
  __shared__ uint4 staged[kRows * kChunksPerRow];
  auto slot = [](int row, int chunk) { return row * kChunksPerRow + (chunk ^ (row % 8)); };

  int row0 = blockIdx.x * kRows;
  const int head = blockIdx.y;
  int seqlen_q = p.seqlen_q;
  int64_t q_start = 0, batch_index = blockIdx.z;
  int64_t tile_row = (batch_index * p.heads_q + head) * p.seqlen_q_rounded + row0;
  if constexpr (Traits::kVarlen) {
    // The grid covers the workspace rows, a query block of one sequence per CTA.
    const sm80::WorkspaceRowOwner owner = sm80::workspace_row_owner(p, row0);
    if (owner.batch < 0) return;
    row0 = owner.row;
    q_start = owner.seq.q_start;
    seqlen_q = owner.seq.seqlen_q;
    if (row0 >= seqlen_q) return;
    batch_index = 0;
    tile_row = owner.row0(p, head) + row0;
  }
  const float* tile = p.dq_accum + tile_row * Traits::kHeadDim;
  Element* dq = static_cast<Element*>(p.dq) + batch_index * p.dq_batch + q_start * p.dq_seq +
                head * p.dq_head;
  const int thread = threadIdx.x;
  float2 pairs[Order::kPairs];
  CUTLASS_PRAGMA_UNROLL
  for (int k = 0; k < Order::kPairs; ++k) {
    pairs[k] = *reinterpret_cast<const float2*>(tile + Order::offset(thread, k));
  }
  CUTLASS_PRAGMA_UNROLL
  for (int k = 0; k < Order::kPairs; ++k) {
    const int2 at = Order::coords(thread, k);
    constexpr int kElementsPerChunk = 16 / static_cast<int>(sizeof(Element));
    auto* chunk = reinterpret_cast<uint32_t*>(&staged[slot(at.x, at.y / kElementsPerChunk)]);
    chunk[(at.y % kElementsPerChunk) / 2] =
        sm80::pack2<Element>(pairs[k].x * p.scale, pairs[k].y * p.scale);
  }
  __syncthreads();
  const int rows = min(kRows, seqlen_q - row0);
  for (int c = thread; c < rows * kChunksPerRow; c += Traits::kConsumerThreads) {
    const int row = c / kChunksPerRow, chunk = c % kChunksPerRow;
    *reinterpret_cast<uint4*>(dq + (row0 + row) * p.dq_seq + chunk * (16 / sizeof(Element))) =
        staged[slot(row, chunk)];
  }
}

// Element: __half or __nv_bfloat16.
template <typename Traits, typename Element>
cudaError_t launch_bwd_convert(const sm80::BwdParams& p, cudaStream_t stream) {
  detail::LaunchShape shape;
  // Dense: num_m_blocks (seqlen_q_rounded / kBlockM) blocks of each batch entry. Varlen: the
  // workspace's seqlen_q_rounded rows in blocks (sm80::workspace_row_owner).
  const int blocks = Traits::kVarlen ? p.seqlen_q_rounded / Traits::kBlockM : p.num_m_blocks;
  shape.grid = dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(p.heads_q),
                    static_cast<unsigned>(Traits::kVarlen ? 1 : p.batch));
  shape.threads = Traits::kConsumerThreads;
  return detail::launch_kernel(bwd_convert_kernel<Traits, Element>, shape, stream, p);
}

}  // namespace flashcore::sm90
