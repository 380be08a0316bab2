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
// Every load first: with each pair's row test between its load and its store (and the store able
// to alias the next load) the compiler kept one load in flight a thread (SASS: LDG, STG, BRA per
// pair), and ncu timed hd256's convert at 0.9 TB/s, 445 us of a 4.7 ms causal backward. The
// workspace holds whole query blocks, so the loads need no row test.
template <typename Traits, typename Element>
__global__ void __launch_bounds__(Traits::kConsumerThreads)
    bwd_convert_kernel(const __grid_constant__ sm80::BwdParams p) {
  using Order = DqTileOrder<Traits>;
  const int row0 = blockIdx.x * Traits::kBlockM;
  const int head = blockIdx.y, batch = blockIdx.z;
  const float* tile =
      p.dq_accum + ((static_cast<int64_t>(batch) * p.heads_q + head) * p.seqlen_q_rounded + row0) *
                       Traits::kHeadDim;
  Element* dq = static_cast<Element*>(p.dq) + batch * p.dq_batch + head * p.dq_head;
  const int thread = threadIdx.x;
  float2 pairs[Order::kPairs];
  CUTLASS_PRAGMA_UNROLL
  for (int k = 0; k < Order::kPairs; ++k) {
    pairs[k] = *reinterpret_cast<const float2*>(tile + Order::offset(thread, k));
  }
  CUTLASS_PRAGMA_UNROLL
  for (int k = 0; k < Order::kPairs; ++k) {
    const int2 at = Order::coords(thread, k);
    const int row = row0 + at.x;
    if (row < p.seqlen_q) {
      *reinterpret_cast<uint32_t*>(dq + row * p.dq_seq + at.y) =
          sm80::pack2<Element>(pairs[k].x * p.scale, pairs[k].y * p.scale);
    }
  }
}

// Element: __half or __nv_bfloat16.
template <typename Traits, typename Element>
cudaError_t launch_bwd_convert(const sm80::BwdParams& p, cudaStream_t stream) {
  detail::LaunchShape shape;
  shape.grid = dim3(static_cast<unsigned>(p.seqlen_q_rounded / Traits::kBlockM),
                    static_cast<unsigned>(p.heads_q), static_cast<unsigned>(p.batch));
  shape.threads = Traits::kConsumerThreads;
  return detail::launch_kernel(bwd_convert_kernel<Traits, Element>, shape, stream, p);
}

}  // namespace flashcore::sm90
