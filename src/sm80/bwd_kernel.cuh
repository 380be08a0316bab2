// The sm80 backward kernel (FlashAttention-2's backward schedule, on mma.sync): one CTA per
// (key block, kv head, batch). K and V of its kBlockN keys stay in shared memory; it walks the
// query blocks that see any of its keys (common/key_block_rows.hpp), for every query head of the
// kv head's group, and per step recomputes P from Q K^T and the forward's LSE:
//   dP^T = V dO^T,  S^T = K Q^T,  P and dS (bwd_mainloop.hpp) into shared memory,
//   dV += P^T dO,   dK += dS^T Q  (registers, the whole walk: GQA's sum over the group's heads is
//                                  this loop, with no atomics),
//   dQ += dS K      (fp32 atomics into the workspace; bwd_convert.cuh scales and converts it).
// How the warps split each GEMM: bwd_kernel_traits.hpp. Q, dO and the step's LSE and D rows are
// double-buffered: step s + 1's copies land while step s computes. Deterministic mode orders the dQ
// adds (bwd_dq_order.hpp).
#pragma once

#include <cstdint>

#include "common/key_block_rows.hpp"
#include "common/launch.hpp"
#include "sm80/bwd_dq_order.hpp"
#include "sm80/bwd_mainloop.hpp"
#include "sm80/bwd_params.hpp"
#include "sm80/tile_io.hpp"

namespace flashcore::sm80 {

// dK or dV of a warp's DkvSplit tile, fp32, held for the whole walk.
template <typename Traits>
using KeyGradFrag = WarpFrag<Traits::DkvSplit::kMTiles, Traits::DkvSplit::kNTiles>;

// The query blocks [begin, end) that key block n_block sees.
template <typename Traits>
__device__ __forceinline__ RowRange<int> query_blocks_of(const BwdParams& p, int n_block) {
  const int key_begin = n_block * Traits::kBlockN;
  const int key_end = min(key_begin + Traits::kBlockN, p.seqlen_k);
  const RowRange<int> rows = rows_seeing_keys(p.mask, key_begin, key_end);
  if (rows.begin == rows.end) return {0, 0};
  return {rows.begin / Traits::kBlockM, (rows.end + Traits::kBlockM - 1) / Traits::kBlockM};
}

// dK (times the softmax scale) and dV of the warp's tile (DkvSplit: keys from key_row0, the n8
// tiles of dims from first_ntile), in the output dtype, into dk_out / dv_out (the kv head's key 0);
// keys past seqlen_k are not stored. One 32-bit store per fragment register pair.
template <typename Traits>
__device__ __forceinline__ void store_key_grads(const BwdParams& p,
                                                typename Traits::Element* dk_out,
                                                typename Traits::Element* dv_out, int seqlen_k,
                                                int key_row0, int first_ntile, int lane,
                                                const KeyGradFrag<Traits>& dk,
                                                const KeyGradFrag<Traits>& dv) {
  using Element = typename Traits::Element;
  using Split = typename Traits::DkvSplit;
#pragma unroll
  for (int mt = 0; mt < Split::kMTiles; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int key = key_row0 + mt * kMmaM + lane / 4 + 8 * half;
      if (key >= seqlen_k) continue;
#pragma unroll
      for (int dt = 0; dt < Split::kNTiles; ++dt) {
        const int dim = (first_ntile + dt) * kMmaN + 2 * (lane % 4);
        *reinterpret_cast<uint32_t*>(dk_out + key * p.dk_seq + dim) =
            pack2<Element>(dk[mt][dt][2 * half] * p.scale, dk[mt][dt][2 * half + 1] * p.scale);
        *reinterpret_cast<uint32_t*>(dv_out + key * p.dv_seq + dim) =
            pack2<Element>(dv[mt][dt][2 * half], dv[mt][dt][2 * half + 1]);
      }
    }
  }
}

// Adds the warp's dQ tile (DqSplit: rows from dq_rows, the n8 tiles of dims from first_ntile) to
// the workspace accumulators; rows from rows_left on lie past the sequence and are skipped.
template <typename Traits>
__device__ __forceinline__ void add_dq_tile(
    float* dq_rows, int rows_left, int first_ntile, int lane,
    const float (&dq)[Traits::DqSplit::kMTiles][Traits::DqSplit::kNTiles][4]) {
  using Dq = typename Traits::DqSplit;
#pragma unroll
  for (int mt = 0; mt < Dq::kMTiles; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = mt * kMmaM + lane / 4 + 8 * half;
      if (r >= rows_left) continue;
      float* row = dq_rows + r * Traits::kHeadDim;
#pragma unroll
      for (int dt = 0; dt < Dq::kNTiles; ++dt) {
        const int dim = (first_ntile + dt) * kMmaN + 2 * (lane % 4);
        atomic_add2(row + dim, dq[mt][dt][2 * half], dq[mt][dt][2 * half + 1]);
      }
    }
  }
}

template <typename Traits, bool kDeterministic>
__global__ void __launch_bounds__(Traits::kThreads, Traits::kMinCtasPerSm)
    bwd_kernel(const __grid_constant__ BwdParams p) {
  using Element = typename Traits::Element;
  using Sdp = typename Traits::SdpSplit;
  using Dkv = typename Traits::DkvSplit;
  using Dq = typename Traits::DqSplit;
  constexpr int kChunks = Traits::kChunksPerRow;
  constexpr int kScoreChunks = Traits::kScoreChunksPerRow;
  extern __shared__ __align__(128) char smem[];
  char* const k_tile = smem;
  char* const v_tile = smem + Traits::kVOffset;
  char* const p_tile = smem + Traits::kPOffset;
  char* const ds_tile = smem + Traits::kDsOffset;

  const int tid = threadIdx.x, lane = tid % kWarpSize, warp = tid / kWarpSize;
  const int n_block = key_block_of_cta(kDeterministic);
  const int kv_head = blockIdx.y, batch = blockIdx.z;
  const int key0 = n_block * Traits::kBlockN;
  // The warp's tile in each phase (bwd_kernel_traits.hpp): keys x query rows of S^T and dP^T,
  // keys x dims of dK and dV, query rows x dims of dQ.
  const int sdp_key0 = Sdp::row0(warp), sdp_first_ntile = Sdp::first_ntile(warp);
  const int dkv_key0 = Dkv::row0(warp), dkv_first_ntile = Dkv::first_ntile(warp);
  const int dq_row0 = Dq::row0(warp), dq_first_ntile = Dq::first_ntile(warp);

  KeyGradFrag<Traits> dk, dv;
  zero_frag(dk);
  zero_frag(dv);

  const RowRange<int> m_blocks = query_blocks_of<Traits>(p, n_block);
  const int blocks_per_head = m_blocks.end - m_blocks.begin;
  // Keys no query sees (all of this CTA's when the range is empty) get zero gradients.
  const int steps = blocks_per_head * p.kv_group;

  struct Step {
    int head, m_block;
  };
  auto step_at = [&](int s) {
    return Step{kv_head * p.kv_group + s / blocks_per_head, m_blocks.begin + s % blocks_per_head};
  };
  // Q, dO, LSE (log2) and D of a step into its stage's buffers; zero-filled past seqlen_q.
  auto load_step = [&](int s, int stage) {
    const Step at = step_at(s);
    const int row0 = at.m_block * Traits::kBlockM;
    load_tile_async<Traits, Traits::kBlockM>(
        smem + Traits::kQOffset + stage * Traits::kQBytes,
        static_cast<const Element*>(p.q) + batch * p.q_batch + at.head * p.q_head + row0 * p.q_seq,
        p.q_seq, p.seqlen_q - row0, Traits::kHeadDim, tid);
    load_tile_async<Traits, Traits::kBlockM>(smem + Traits::kDoOffset + stage * Traits::kQBytes,
                                             static_cast<const Element*>(p.d_o) +
                                                 batch * p.do_batch + at.head * p.do_head +
                                                 row0 * p.do_seq,
                                             p.do_seq, p.seqlen_q - row0, Traits::kHeadDim, tid);
    // The workspace rows are padded to whole blocks: plain 16-byte copies, the first threads LSE
    // and the next D.
    constexpr int kStatChunks = Traits::kRowStatBytes / static_cast<int>(sizeof(Chunk));
    if (tid < 2 * kStatChunks) {
      const bool is_lse = tid < kStatChunks;
      const int chunk = is_lse ? tid : tid - kStatChunks;
      const int64_t row_at =
          (static_cast<int64_t>(batch) * p.heads_q + at.head) * p.seqlen_q_rounded + row0;
      const float* src = (is_lse ? p.lse_log2 : p.delta) + row_at + chunk * 4;
      char* dst = smem + (is_lse ? Traits::kLseOffset : Traits::kDeltaOffset) +
                  stage * Traits::kRowStatBytes + chunk * static_cast<int>(sizeof(Chunk));
      cute::SM80_CP_ASYNC_CACHEGLOBAL<Chunk>::copy(*reinterpret_cast<const Chunk*>(src),
                                                   *reinterpret_cast<Chunk*>(dst));
    }
  };

  if (steps > 0) {
    const Element* k_src =
        static_cast<const Element*>(p.k) + batch * p.k_batch + kv_head * p.k_head + key0 * p.k_seq;
    const Element* v_src =
        static_cast<const Element*>(p.v) + batch * p.v_batch + kv_head * p.v_head + key0 * p.v_seq;
    load_tile_async<Traits, Traits::kBlockN>(k_tile, k_src, p.k_seq, p.seqlen_k - key0,
                                             Traits::kHeadDim, tid);
    load_tile_async<Traits, Traits::kBlockN>(v_tile, v_src, p.v_seq, p.seqlen_k - key0,
                                             Traits::kHeadDim, tid);
    load_step(0, 0);
    cute::cp_async_fence();
  }
  for (int s = 0; s < steps; ++s) {
    const int stage = s % Traits::kStages;
    cute::cp_async_wait<0>();
    // Step s's tiles have landed for every thread, and every warp is done with step s - 1: its
    // Q, dO, LSE and D stage (which the copies below refill) and the P^T and dS^T tiles (which this
    // step overwrites). Two barriers a step.
    __syncthreads();
    if (s + 1 < steps) {
      load_step(s + 1, (s + 1) % Traits::kStages);
      cute::cp_async_fence();
    }
    const Step at = step_at(s);
    const int row0 = at.m_block * Traits::kBlockM;
    const char* q_tile = smem + Traits::kQOffset + stage * Traits::kQBytes;
    const char* do_tile = smem + Traits::kDoOffset + stage * Traits::kQBytes;
    const auto* lse_log2 =
        reinterpret_cast<const float*>(smem + Traits::kLseOffset + stage * Traits::kRowStatBytes);
    const auto* delta =
        reinterpret_cast<const float*>(smem + Traits::kDeltaOffset + stage * Traits::kRowStatBytes);

    // The warp's tile of P^T and dS^T into shared memory.
    {
      const int query0 = sdp_first_ntile * kMmaN;
      const int tile_row0 = row0 + query0;
      // Interior tiles of the mask skip the per-element test (the key tail is a boundary: end_key
      // never passes seqlen_k). Rows past seqlen_q need none: their LSE is +inf.
      const bool needs_mask =
          tile_row0 < p.seqlen_q &&
          !p.mask.tile_fully_visible(tile_row0, min(tile_row0 + Sdp::kNTiles * kMmaN, p.seqlen_q),
                                     key0 + sdp_key0, key0 + sdp_key0 + Sdp::kMTiles * kMmaM);
      // S^T first, to P^T in shared memory and G in registers, then dP^T: the two fp32 tiles
      // are never live at once.
      __half2 g[Sdp::kMTiles][Sdp::kNTiles][2];
      {
        WarpFrag<Sdp::kMTiles, Sdp::kNTiles> st;
        zero_frag(st);
        warp_gemm<Traits, Traits::kHeadKSteps>(RowsA<kChunks>(k_tile, sdp_key0, lane),
                                               RowsB<kChunks>(q_tile, query0, lane), st);
        probabilities(p, needs_mask, tile_row0, key0 + sdp_key0, lane, lse_log2 + query0, st, g);
        store_key_major<Traits>(p_tile, sdp_key0, sdp_first_ntile, lane, st);
      }
      WarpFrag<Sdp::kMTiles, Sdp::kNTiles> dp;
      zero_frag(dp);
      warp_gemm<Traits, Traits::kHeadKSteps>(RowsA<kChunks>(v_tile, sdp_key0, lane),
                                             RowsB<kChunks>(do_tile, query0, lane), dp);
      score_gradients(lane, delta + query0, g, dp);
      store_key_major<Traits>(ds_tile, sdp_key0, sdp_first_ntile, lane, dp);
    }
    __syncthreads();
    warp_gemm<Traits, Traits::kQueryKSteps>(RowsA<kScoreChunks>(p_tile, dkv_key0, lane),
                                            ColsB<kChunks>(do_tile, dkv_first_ntile, lane), dv);
    warp_gemm<Traits, Traits::kQueryKSteps>(RowsA<kScoreChunks>(ds_tile, dkv_key0, lane),
                                            ColsB<kChunks>(q_tile, dkv_first_ntile, lane), dk);

    // dQ of the warp's query rows and dims, over this CTA's keys.
    WarpFrag<Dq::kMTiles, Dq::kNTiles> dq;
    zero_frag(dq);
    warp_gemm<Traits, Traits::kKeyKSteps>(ColsA<kScoreChunks>(ds_tile, dq_row0, lane),
                                          ColsB<kChunks>(k_tile, dq_first_ntile, lane), dq);
    int* const semaphore =
        kDeterministic
            ? p.dq_semaphore +
                  (static_cast<int64_t>(batch) * p.heads_q + at.head) * p.num_m_blocks + at.m_block
            : nullptr;
    if constexpr (kDeterministic) {
      wait_for_turn(semaphore, dq_turn<Traits::kBlockM, Traits::kBlockN>(p, row0, n_block));
    }
    float* const dq_rows =
        p.dq_accum + ((static_cast<int64_t>(batch) * p.heads_q + at.head) * p.seqlen_q_rounded +
                      row0 + dq_row0) *
                         Traits::kHeadDim;
    add_dq_tile<Traits>(dq_rows, p.seqlen_q - (row0 + dq_row0), dq_first_ntile, lane, dq);
    if constexpr (kDeterministic) pass_turn(semaphore);
  }
  store_key_grads<Traits>(p, static_cast<Element*>(p.dk) + batch * p.dk_batch + kv_head * p.dk_head,
                          static_cast<Element*>(p.dv) + batch * p.dv_batch + kv_head * p.dv_head,
                          p.seqlen_k, key0 + dkv_key0, dkv_first_ntile, lane, dk, dv);
}

template <typename Traits, bool kDeterministic>
cudaError_t launch_bwd_kernel(const BwdParams& p, cudaStream_t stream) {
  const auto kernel = bwd_kernel<Traits, kDeterministic>;
  if (cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             Traits::kSmemBytes);
      err != cudaSuccess) {
    return err;
  }
  detail::LaunchShape shape;
  // Key blocks fastest (in deterministic mode from the last): its waits point only at CTAs
  // dispatched earlier.
  shape.grid = dim3(static_cast<unsigned>(p.num_n_blocks), static_cast<unsigned>(p.heads_kv),
                    static_cast<unsigned>(p.batch));
  shape.threads = Traits::kThreads;
  shape.smem_bytes = Traits::kSmemBytes;
  return detail::launch_kernel(kernel, shape, stream, p);
}

}  // namespace flashcore::sm80
