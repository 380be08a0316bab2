// The sm80 flex backward: bwd_kernel.cuh's schedule (one CTA per key block, kv head and batch
// entry; K and V in shared memory; Q, dO, LSE and D double-buffered; the same five GEMMs and the
// same warp splits) for varlen batches and the forward's flex options. What differs:
//  - Varlen: CTA (n, h, b) takes sequence b's keys [n * kBlockN, ...) and walks its query blocks
//    (cu_seqlens); CTAs past the sequence's keys exit at once. The workspace rows of a sequence
//    are padded to whole query blocks (bwd_params.hpp's workspace_row0).
//  - The walk: every query block the window lets see the keys (all of them with a BlockMask), each
//    classified as the forward classifies its KV tiles (bwd_flex_scores.hpp): skipped when
//    nothing is visible (no loads, no math), full (no mask code), or partial (mask_mod per
//    element, where the mask's block_visibility does not clear the warp's own tile).
//  - P is recomputed with the forward's score_mod, and dS takes its derivative.
//  - Deterministic mode (a runtime choice here: it adds a count and a wait to each step, not to
//    the math) keeps the dense kernel's order, the key blocks adding to a query block from the
//    highest down (bwd_dq_order.hpp), but a flex mask need not make the key blocks that see a query
//    block a contiguous range, so each step counts the CTAs ahead of it by the walk's own test.
//    Not with a BlockMask (sm80_bwd.cu refuses it).
// A separate kernel, so that the dense one (bwd_kernel.cuh) compiles exactly as before.
#pragma once

#include <cstdint>
#include <new>

#include "common/flex_sequence.hpp"
#include "common/launch.hpp"
#include "sm80/bwd_flex_scores.hpp"
#include "sm80/bwd_kernel.cuh"

namespace flashcore::sm80 {

template <typename Traits, typename Mask, typename ScoreMod>
__global__ void __launch_bounds__(Traits::kThreads, Traits::kMinCtasPerSm)
    bwd_flex_kernel(const __grid_constant__ BwdFlexParams<Mask, ScoreMod> fp) {
  using Element = typename Traits::Element;
  using Sdp = typename Traits::SdpSplit;
  using Dkv = typename Traits::DkvSplit;
  using Dq = typename Traits::DqSplit;
  using detail::TileMasking;
  constexpr int kChunks = Traits::kChunksPerRow;
  constexpr int kScoreChunks = Traits::kScoreChunksPerRow;
  const BwdParams& p = fp.bwd;
  extern __shared__ __align__(128) char smem[];
  char* const k_tile = smem;
  char* const v_tile = smem + Traits::kVOffset;
  char* const p_tile = smem + Traits::kPOffset;
  char* const ds_tile = smem + Traits::kDsOffset;

  const int tid = threadIdx.x, lane = tid % kWarpSize, warp = tid / kWarpSize;
  const bool deterministic = p.dq_semaphore != nullptr;
  const int n_block = key_block_of_cta(deterministic), kv_head = blockIdx.y, batch = blockIdx.z;
  const int key0 = n_block * Traits::kBlockN;
  const detail::FlexSequence seq = bwd_sequence(p, batch);
  if (key0 >= seq.seqlen_k) return;  // varlen: past this sequence's keys (uniform)
  const int key_end = min(key0 + Traits::kBlockN, seq.seqlen_k);
  const int64_t batch_index = p.cu_seqlens_q != nullptr ? 0 : batch;  // packed: one slab

  // The mods bound to the sequence live in shared memory, read where used: the dense kernel's
  // accumulators already fill the registers (hd128: 255).
  struct CtaState {
    Mask mask;
    ScoreMod score_mod;
    int dq_turn;  // deterministic mode: the adds to the step's query block before this CTA's
  };
  __shared__ __align__(16) unsigned char state_bytes[sizeof(CtaState)];
  CtaState& state = *reinterpret_cast<CtaState*>(state_bytes);
  if (tid == 0) {
    new (&state) CtaState{flex::bind_seqlens(fp.mask, seq.seqlen_q, seq.seqlen_k),
                          flex::bind_seqlens(fp.score_mod, seq.seqlen_q, seq.seqlen_k), 0};
  }
  __syncthreads();
  const Mask& mask = state.mask;
  const ScoreMod& score_mod = state.score_mod;
  bool identity = false;
  if constexpr (detail::HasIsIdentity<ScoreMod>::value) identity = score_mod.is_identity();
  const bool has_block_mask = fp.block_mask.kv_num_blocks != nullptr;

  const int sdp_key0 = Sdp::row0(warp), sdp_first_ntile = Sdp::first_ntile(warp);
  const int dkv_key0 = Dkv::row0(warp), dkv_first_ntile = Dkv::first_ntile(warp);
  const int dq_row0 = Dq::row0(warp), dq_first_ntile = Dq::first_ntile(warp);

  KeyGradFrag<Traits> dk, dv;
  zero_frag(dk);
  zero_frag(dv);

  // The query blocks [begin, end) the CTA of keys [key_begin, key_end) walks, each then
  // classified: every one with a BlockMask, else those of the rows the window lets see the keys.
  auto walked_m_blocks = [&](int key_begin, int key_end_) {
    RowRange<int> rows{0, seq.seqlen_q};
    if (!has_block_mask) rows = flex_rows_seeing_keys(mask, key_begin, key_end_, seq.seqlen_q);
    if (rows.begin >= rows.end) return RowRange<int>{0, 0};
    return RowRange<int>{rows.begin / Traits::kBlockM,
                         (rows.end + Traits::kBlockM - 1) / Traits::kBlockM};
  };
  const RowRange<int> m_blocks = walked_m_blocks(key0, key_end);
  const int m_begin = m_blocks.begin;
  const int blocks_per_head = m_blocks.end - m_blocks.begin;
  const int steps = blocks_per_head * p.kv_group;

  struct Step {
    int head, m_block;
  };
  auto step_at = [&](int s) {
    return Step{kv_head * p.kv_group + s / blocks_per_head, m_begin + s % blocks_per_head};
  };
  // Step s's masking; uniform over the CTA (every thread takes part in a BlockMask's lookup).
  auto classify = [&](int s) {
    const Step at = step_at(s);
    const int row_begin = at.m_block * Traits::kBlockM;
    if (has_block_mask) {
      return block_mask_listing(fp.block_mask, batch, at.head,
                                row_begin / static_cast<int>(fp.block_mask.q_block_size),
                                key0 / static_cast<int>(fp.block_mask.kv_block_size));
    }
    const int row_end = min(row_begin + Traits::kBlockM, seq.seqlen_q);
    switch (flex::block_visibility(mask, batch, at.head, row_begin, row_end, key0, key_end)) {
      case BlockVisibility::kEmpty:
        return TileMasking::kSkip;
      case BlockVisibility::kFull:
        return TileMasking::kFull;
      default:
        return TileMasking::kPartial;
    }
  };
  // Whether the CTA of key block n walks query block m_block of head, by the walk's own tests
  // (walked_m_blocks, then classify's visibility or BlockMask listing), so that deterministic mode
  // counts exactly the CTAs that add to the query block. Per thread: each asks for its own n.
  auto cta_walks = [&](int n, int head, int m_block) {
    const int begin = n * Traits::kBlockN;
    if (begin >= seq.seqlen_k) return false;
    if (has_block_mask) {  // every query block is walked; the lists say which are skipped
      return block_mask_lists(
          fp.block_mask, batch, head,
          m_block * Traits::kBlockM / static_cast<int>(fp.block_mask.q_block_size),
          begin / static_cast<int>(fp.block_mask.kv_block_size));
    }
    const int end = min(begin + Traits::kBlockN, seq.seqlen_k);
    const RowRange<int> walked = walked_m_blocks(begin, end);
    if (m_block < walked.begin || m_block >= walked.end) return false;
    const int row_begin = m_block * Traits::kBlockM;
    const int row_end = min(row_begin + Traits::kBlockM, seq.seqlen_q);
    return flex::block_visibility(mask, batch, head, row_begin, row_end, begin, end) !=
           BlockVisibility::kEmpty;
  };
  // The first step from s on that has anything visible, and its masking; steps when none.
  auto next_step = [&](int s, TileMasking* masking) {
    for (; s < steps; ++s) {
      *masking = classify(s);
      if (*masking != TileMasking::kSkip) break;
    }
    return s;
  };

  const int64_t ws_base = workspace_row0(p, batch, 0);  // + head * seqlen_q_rounded
  const Element* q_base = static_cast<const Element*>(p.q) + batch_index * p.q_batch +
                          static_cast<int64_t>(seq.q_start) * p.q_seq;
  const Element* do_base = static_cast<const Element*>(p.d_o) + batch_index * p.do_batch +
                           static_cast<int64_t>(seq.q_start) * p.do_seq;
  auto load_step = [&](int s, int stage) {
    const Step at = step_at(s);
    const int row0 = at.m_block * Traits::kBlockM;
    load_tile_async<Traits, Traits::kBlockM>(smem + Traits::kQOffset + stage * Traits::kQBytes,
                                             q_base + at.head * p.q_head + row0 * p.q_seq, p.q_seq,
                                             seq.seqlen_q - row0, Traits::kHeadDim, tid);
    load_tile_async<Traits, Traits::kBlockM>(smem + Traits::kDoOffset + stage * Traits::kQBytes,
                                             do_base + at.head * p.do_head + row0 * p.do_seq,
                                             p.do_seq, seq.seqlen_q - row0, Traits::kHeadDim, tid);
    constexpr int kStatChunks = Traits::kRowStatBytes / static_cast<int>(sizeof(Chunk));
    if (tid < 2 * kStatChunks) {
      const bool is_lse = tid < kStatChunks;
      const int chunk = is_lse ? tid : tid - kStatChunks;
      const int64_t row_at = ws_base + static_cast<int64_t>(at.head) * p.seqlen_q_rounded + row0;
      const float* src = (is_lse ? p.lse_log2 : p.delta) + row_at + chunk * 4;
      char* dst = smem + (is_lse ? Traits::kLseOffset : Traits::kDeltaOffset) +
                  stage * Traits::kRowStatBytes + chunk * static_cast<int>(sizeof(Chunk));
      cute::SM80_CP_ASYNC_CACHEGLOBAL<Chunk>::copy(*reinterpret_cast<const Chunk*>(src),
                                                   *reinterpret_cast<Chunk*>(dst));
    }
  };

  TileMasking masking = TileMasking::kSkip;
  int s = next_step(0, &masking);
  const int64_t k_row0 = static_cast<int64_t>(seq.k_start) + key0;
  if (s < steps) {
    load_tile_async<Traits, Traits::kBlockN>(k_tile,
                                             static_cast<const Element*>(p.k) +
                                                 batch_index * p.k_batch + kv_head * p.k_head +
                                                 k_row0 * p.k_seq,
                                             p.k_seq, seq.seqlen_k - key0, Traits::kHeadDim, tid);
    load_tile_async<Traits, Traits::kBlockN>(v_tile,
                                             static_cast<const Element*>(p.v) +
                                                 batch_index * p.v_batch + kv_head * p.v_head +
                                                 k_row0 * p.v_seq,
                                             p.v_seq, seq.seqlen_k - key0, Traits::kHeadDim, tid);
    load_step(s, 0);
    cute::cp_async_fence();
  }
  for (int stage = 0; s < steps; stage ^= 1) {
    cute::cp_async_wait<0>();
    // As the dense kernel: step s's tiles have landed and every warp is done with the previous
    // step's buffers, which the next step's copies refill.
    __syncthreads();
    TileMasking next_masking = TileMasking::kSkip;
    const int next = next_step(s + 1, &next_masking);
    if (next < steps) {
      load_step(next, stage ^ 1);
      cute::cp_async_fence();
    }
    const Step at = step_at(s);
    const int row0 = at.m_block * Traits::kBlockM;
    if (deterministic) {
      // The key blocks above this one that add to the query block, which come first; a barrier
      // per kThreads of them (uniform: every thread runs the same trips).
      int ahead = 0;
      for (int n = n_block + 1; n * Traits::kBlockN < seq.seqlen_k; n += Traits::kThreads) {
        ahead += __syncthreads_count(cta_walks(n + tid, at.head, at.m_block));
      }
      if (tid == 0) state.dq_turn = ahead;
    }
    const char* q_tile = smem + Traits::kQOffset + stage * Traits::kQBytes;
    const char* do_tile = smem + Traits::kDoOffset + stage * Traits::kQBytes;
    const auto* lse_log2 =
        reinterpret_cast<const float*>(smem + Traits::kLseOffset + stage * Traits::kRowStatBytes);
    const auto* delta =
        reinterpret_cast<const float*>(smem + Traits::kDeltaOffset + stage * Traits::kRowStatBytes);
    {
      const int query0 = sdp_first_ntile * kMmaN;
      const KeyMajorPlace place{batch,        at.head,      row0 + query0, key0 + sdp_key0,
                                seq.seqlen_q, seq.seqlen_k, lane};
      // A partial tile's warp skips the mask where the mask clears its own sub-tile.
      bool call_mask = masking == TileMasking::kPartial;
      const int warp_row_end = min(place.row0 + Sdp::kNTiles * kMmaN, seq.seqlen_q);
      const int warp_key_end = min(place.key0 + Sdp::kMTiles * kMmaM, seq.seqlen_k);
      if (call_mask && place.row0 < warp_row_end && place.key0 < warp_key_end &&
          flex::block_visibility(mask, batch, at.head, place.row0, warp_row_end, place.key0,
                                 warp_key_end) == BlockVisibility::kFull) {
        call_mask = false;
      }
      __half2 g[Sdp::kMTiles][Sdp::kNTiles][2];
      {
        WarpFrag<Sdp::kMTiles, Sdp::kNTiles> st;
        zero_frag(st);
        warp_gemm<Traits, Traits::kHeadKSteps>(RowsA<kChunks>(k_tile, sdp_key0, lane),
                                               RowsB<kChunks>(q_tile, query0, lane), st);
        flex_probabilities(call_mask, identity, mask, score_mod, place, p.scale, lse_log2 + query0,
                           st, g);
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
    WarpFrag<Dq::kMTiles, Dq::kNTiles> dq;
    zero_frag(dq);
    warp_gemm<Traits, Traits::kKeyKSteps>(ColsA<kScoreChunks>(ds_tile, dq_row0, lane),
                                          ColsB<kChunks>(k_tile, dq_first_ntile, lane), dq);
    float* const dq_rows =
        p.dq_accum +
        (ws_base + static_cast<int64_t>(at.head) * p.seqlen_q_rounded + row0 + dq_row0) *
            Traits::kHeadDim;
    int* const semaphore =
        deterministic
            ? p.dq_semaphore +
                  (static_cast<int64_t>(batch) * p.heads_q + at.head) * p.num_m_blocks + at.m_block
            : nullptr;
    if (deterministic) wait_for_turn(semaphore, state.dq_turn);
    add_dq_tile<Traits>(dq_rows, seq.seqlen_q - (row0 + dq_row0), dq_first_ntile, lane, dq);
    if (deterministic) pass_turn(semaphore);
    s = next;
    masking = next_masking;
  }
  store_key_grads<Traits>(p,
                          static_cast<Element*>(p.dk) + batch_index * p.dk_batch +
                              kv_head * p.dk_head + static_cast<int64_t>(seq.k_start) * p.dk_seq,
                          static_cast<Element*>(p.dv) + batch_index * p.dv_batch +
                              kv_head * p.dv_head + static_cast<int64_t>(seq.k_start) * p.dv_seq,
                          seq.seqlen_k, key0 + dkv_key0, dkv_first_ntile, lane, dk, dv);
}

template <typename Traits, typename Mask, typename ScoreMod>
cudaError_t launch_bwd_flex_kernel(const BwdFlexParams<Mask, ScoreMod>& fp, cudaStream_t stream) {
  const auto kernel = bwd_flex_kernel<Traits, Mask, ScoreMod>;
  if (cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             Traits::kSmemBytes);
      err != cudaSuccess) {
    return err;
  }
  detail::LaunchShape shape;
  // Key blocks fastest (in deterministic mode from the last): its waits point only at CTAs
  // dispatched earlier.
  shape.grid = dim3(static_cast<unsigned>(fp.bwd.num_n_blocks),
                    static_cast<unsigned>(fp.bwd.heads_kv), static_cast<unsigned>(fp.bwd.batch));
  shape.threads = Traits::kThreads;
  shape.smem_bytes = Traits::kSmemBytes;
  return detail::launch_kernel(kernel, shape, stream, fp);
}

}  // namespace flashcore::sm80
