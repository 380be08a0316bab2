// The sm90 backward's consumer warpgroups (bwd_kernel.cuh runs them): per step of the walk, the
// five GEMMs of bwd_traits.hpp on the stage's Q and dO, P and dS in registers, dS to shared memory
// for dQ, and dQ handed to the dQ writer warp through shared memory. dK and dV stay in registers
// for the whole walk (GQA's sum over a group's query heads is the walk itself) and are stored at
// its end.
#pragma once

#include <cutlass/arch/barrier.h>

#include <cute/atom/copy_traits_sm90.hpp>

#include "common/flex_sequence.hpp"
#include "common/key_block_rows.hpp"
#include "common/online_softmax.hpp"
#include "common/score_scaling.hpp"
#include "sm80/bwd_dq_order.hpp"
#include "sm80/bwd_params.hpp"
#include "sm90/bwd_convert.cuh"
#include "sm90/bwd_key_grad_fixup.hpp"
#include "sm90/bwd_tail_split.hpp"
#include "sm90/bwd_tile_order.hpp"
#include "sm90/bwd_traits.hpp"
#include "sm90/named_barriers.hpp"
#include "sm90/tile_scheduler.hpp"
#include "sm90/wgmma.hpp"

namespace flashcore::sm90 {

template <typename Traits>
struct BwdKernelParams {
  sm80::BwdParams p;  // the problem and the workspace, as the preprocess and convert kernels see it
  typename Traits::TmaQ tma_q, tma_do;
  typename Traits::TmaK tma_k, tma_v;
  // The persistent schedule (bwd_tile_order.hpp, bwd_tail_split.hpp), computed on the host.
  BwdTileOrder order;
  BwdTail tail;
  // Varlen: the order's tiles that hold keys, listed before the launch (bwd_key_tiles.hpp), and
  // how many; null: the counter runs over the order itself.
  const int* listed_tiles;
  const int* listed_count;
};

// The query blocks a tile (one key block of one kv head) walks: for each query head of the kv
// head's group, the blocks that see any of its keys (common/key_block_rows.hpp). Every role of
// the CTA derives the same sequence from it.
//
// Varlen (kVarlen): batch is the sequence, whose rows start at q_start and k_start of the packed
// tensors and at workspace_start of the workspace (sm80::workspace_row0), and whose window is
// mask (p.mask bound to its lengths). Tiles that run past the sequence's last key or query read
// the next sequence's rows: the mask hides those keys (P = 0, dK and dV not stored), and the
// workspace gives the query rows past the end LSE +inf (P = 0) and dQ rows of this sequence's
// padding. A tile past the sequence's keys has no steps and stores nothing.
struct BwdWalk {
  int n_block, kv_head, batch;
  int kv_group;
  int first_m_block, blocks_per_head;
  int steps;  // 0: no query sees these keys, whose dK and dV are zeros
  // The piece of the walk this CTA runs (bwd_tail_split.hpp): steps [first_step, first_step +
  // steps) of the tile's, one of pieces pieces; a cut tile's slot of partial sums.
  int first_step = 0;
  int pieces = 1;
  int slot = 0;
  // Varlen only:
  int q_start, k_start;
  int64_t workspace_start;
  WindowMask<int> mask;

  // The walk of key block n_block of (kv_head, batch); which CTA runs it, and when, is
  // BwdSchedule's (below).
  template <int kBlockM, int kBlockN, bool kVarlen = false>
  __device__ static BwdWalk at(const sm80::BwdParams& p, int n_block, int kv_head, int batch) {
    BwdWalk w{n_block, kv_head, batch, p.kv_group, 0, 0, 0};
    const int key_begin = w.n_block * kBlockN;
    if constexpr (kVarlen) {
      const detail::FlexSequence seq = sm80::bwd_sequence(p, w.batch);
      w.q_start = seq.q_start;
      w.k_start = seq.k_start;
      w.workspace_start = sm80::workspace_row0(p, w.batch, 0);
      w.mask = p.mask.with_seqlens(seq.seqlen_q, seq.seqlen_k);
      if (key_begin >= seq.seqlen_k) return w;
    }
    const WindowMask<int>& mask = kVarlen ? w.mask : p.mask;
    const RowRange<int> rows =
        rows_seeing_keys(mask, key_begin, min(key_begin + kBlockN, mask.seqlen_k));
    if (rows.begin < rows.end) {
      w.first_m_block = rows.begin / kBlockM;
      w.blocks_per_head = (rows.end + kBlockM - 1) / kBlockM - w.first_m_block;
      w.steps = w.blocks_per_head * p.kv_group;
    }
    return w;
  }
  // The walk's (query head, query block) a step at a time: from a step number they cost an integer
  // division a step, which ncu's stall samples found on the consumers' path (9% of the "wait"
  // stalls).
  struct Position {
    int head, m_block;
  };
  __device__ Position first() const {
    if (first_step == 0) return {kv_head * kv_group, first_m_block};
    const int head_offset = first_step / blocks_per_head;
    return {kv_head * kv_group + head_offset,
            first_m_block + (first_step - head_offset * blocks_per_head)};
  }
  // Only this piece of the walk (a whole tile's piece keeps every step).
  __device__ void select(const BwdPiece& piece) {
    pieces = piece.pieces;
    slot = piece.slot;
    if (piece.steps == BwdPiece::kWholeWalk) return;
    first_step = piece.first_step;
    steps = piece.steps;
  }
  __device__ void advance(Position& at) const {
    if (++at.m_block == first_m_block + blocks_per_head) {
      at.m_block = first_m_block;
      ++at.head;
    }
  }
  // The first workspace row (of LSE and D; of the dQ accumulators times head_dim) of query head
  // head in this walk's batch entry or sequence.
  template <bool kVarlen>
  __device__ int64_t workspace_row(const sm80::BwdParams& p, int head) const {
    if constexpr (kVarlen) {
      return workspace_start + static_cast<int64_t>(head) * p.seqlen_q_rounded;
    } else {
      return (static_cast<int64_t>(batch) * p.heads_q + head) * p.seqlen_q_rounded;
    }
  }
  // The window of this walk's keys: the problem's, or bound to the sequence's lengths.
  template <bool kVarlen>
  __device__ const WindowMask<int>& window(const sm80::BwdParams& p) const {
    if constexpr (kVarlen) {
      return mask;
    } else {
      return p.mask;
    }
  }
};

// The persistent schedule as each role of a backward CTA sees it (bwd_kernel.cuh,
// bwd256_kernel.cuh): the producer warp takes each unit of work (BwdPieceCursor) and hands its
// pieces' numbers to the other roles through a TileRing; every role derives the piece's walk from
// the number (params.tail.split, params.order).
template <typename Traits>
struct BwdSchedule {
  using SharedStorage = typename Traits::SharedStorage;
  const BwdKernelParams<Traits>& params;

  // The producer warp: names piece number index as the CTA's taken-th piece. False past the last
  // piece (the other roles stop there too), else the piece's walk.
  __device__ bool publish(SharedStorage& smem, int taken, int index, BwdWalk* walk) const {
    TileRing::publish(smem.tiles, taken, index);
    return walk_of(index, walk);
  }
  // A consumer thread or a dQ writer lane: the CTA's taken-th piece, as publish().
  __device__ bool take(SharedStorage& smem, int taken, BwdWalk* walk) const {
    return walk_of(TileRing::take(smem.tiles, taken), walk);
  }

 private:
  __device__ bool walk_of(int index, BwdWalk* walk) const {
    if (index >= params.tail.split.end_piece()) return false;
    const BwdPiece piece = params.tail.split.piece(index);
    const BwdTileOrder::Tile tile = params.order.tile(piece.tile);
    *walk = BwdWalk::at<Traits::kBlockM, Traits::kBlockN, Traits::kVarlen>(
        params.p, tile.n_block, tile.kv_head, tile.batch);
    walk->select(piece);
    return true;
  }
};

// The producer warp's side of the schedule: units of work (whole tiles, then the split tail's
// ranges), the first wave by CTA index and the rest from the counter as the CTA frees up, each
// expanded into its pieces in walk order. published counts the pieces named so far.
struct BwdPieceCursor {
  TileCursor<1> units;
  int unit = 0;
  int piece = 0;   // of the unit
  int pieces = 0;  // the unit's
  int published = 0;

  // The first piece's number (or split.end_piece()).
  __device__ int first(const BwdTailSplit& split) { return start_unit(split, units.first()); }
  // The next piece's number: the unit's next, or the next unit's first.
  __device__ int next(const BwdTailSplit& split, int* tile_counter) {
    ++published;
    if (++piece < pieces) return split.piece_of_unit(unit, piece);
    return start_unit(split, units.next(tile_counter));
  }

 private:
  __device__ int start_unit(const BwdTailSplit& split, int index) {
    unit = index;
    piece = 0;
    pieces = split.pieces_of_unit(unit);
    return pieces > 0 ? split.piece_of_unit(unit, 0) : split.end_piece();
  }
};

template <typename Traits>
struct BwdMainloop {
  using Element = typename Traits::Element;
  using Pipeline = typename Traits::Pipeline;
  using SharedStorage = typename Traits::SharedStorage;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;
  using ScoreShape = Shape<Int<kBlockN>, Int<kBlockM>>;  // S^T, dP^T: keys x queries
  using KeyGradShape = Shape<Int<kBlockN>, Int<kHeadDim>>;

  typename Traits::TiledMmaSdP mma_sdp;
  typename Traits::TiledMmaDkv mma_dkv;
  typename Traits::TiledMmaDq mma_dq;

  // dK (times the softmax scale) and dV of this thread's accumulator registers, in the output
  // dtype; keys past seqlen_k (the sequence's) are not stored. Rows are keys 0..127 over both
  // warpgroups (AccumulatorCoords), columns head dims.
  template <typename Frag>
  __device__ static void store_key_grads(const sm80::BwdParams& p, const BwdWalk& walk, int thread,
                                         const Frag& dk, const Frag& dv) {
    // Varlen: the sequence's keys start at row k_start of the packed tensors (one batch entry).
    const int64_t dk_batch = Traits::kVarlen ? walk.k_start * p.dk_seq : walk.batch * p.dk_batch;
    const int64_t dv_batch = Traits::kVarlen ? walk.k_start * p.dv_seq : walk.batch * p.dv_batch;
    auto* dk_out = static_cast<Element*>(p.dk) + dk_batch + walk.kv_head * p.dk_head;
    auto* dv_out = static_cast<Element*>(p.dv) + dv_batch + walk.kv_head * p.dv_head;
    const int seqlen_k = walk.window<Traits::kVarlen>(p).seqlen_k;
    const AccumulatorCoords coords = AccumulatorCoords::of(thread);
    const int key0 = walk.n_block * kBlockN;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(dk); i += 2) {
      const int key = key0 + coords.row(i);
      const int dim = coords.col(i);
      if (key < seqlen_k) {
        *reinterpret_cast<uint32_t*>(dk_out + key * p.dk_seq + dim) =
            pack(dk(i) * p.scale, dk(i + 1) * p.scale);
        *reinterpret_cast<uint32_t*>(dv_out + key * p.dv_seq + dim) = pack(dv(i), dv(i + 1));
      }
    }
  }
  // Two fp32 values as one 32-bit pair of the element type.
  __device__ static uint32_t pack(float a, float b) {
    const Element pair[2] = {static_cast<Element>(a), static_cast<Element>(b)};
    uint32_t bits;
    memcpy(&bits, pair, sizeof(bits));
    return bits;
  }

  // thread: 0..255 over both consumer warpgroups. Runs the tiles the producer hands over until it
  // names none.
  __device__ void run(const BwdKernelParams<Traits>& params, SharedStorage& smem,
                      Pipeline& pipeline, int thread) {
    const sm80::BwdParams& p = params.p;
    const int warpgroup = thread / kWarpgroupThreads;
    Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQ{});
    Tensor sQt = make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQt{});
    Tensor sdO = make_tensor(make_smem_ptr(smem.d_o.data()), typename Traits::SmemLayoutQ{});
    Tensor sdOt = make_tensor(make_smem_ptr(smem.d_o.data()), typename Traits::SmemLayoutQt{});
    Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename Traits::SmemLayoutK{});
    Tensor sKt = make_tensor(make_smem_ptr(smem.k.data()), typename Traits::SmemLayoutKt{});
    Tensor sV = make_tensor(make_smem_ptr(smem.v.data()), typename Traits::SmemLayoutK{});
    Tensor sDs = make_tensor(make_smem_ptr(smem.ds.data()), typename Traits::SmemLayoutDs{});
    Tensor sDst = make_tensor(make_smem_ptr(smem.ds.data()), typename Traits::SmemLayoutDst{});

    // Shared-memory operands depend only on the warpgroup: slice by its first thread (the wgmma
    // descriptors then stay warp-uniform).
    auto wg_sdp = mma_sdp.get_slice(warpgroup * kWarpgroupThreads);
    auto wg_dkv = mma_dkv.get_slice(warpgroup * kWarpgroupThreads);
    auto wg_dq = mma_dq.get_slice(warpgroup * kWarpgroupThreads);
    Tensor tSrK = wg_sdp.partition_fragment_A(sK);
    Tensor tSrV = wg_sdp.partition_fragment_A(sV);
    Tensor tSrQ = wg_sdp.partition_fragment_B(sQ);
    Tensor tSrdO = wg_sdp.partition_fragment_B(sdO);
    Tensor tdVrdOt = wg_dkv.partition_fragment_B(sdOt);
    Tensor tdKrQt = wg_dkv.partition_fragment_B(sQt);
    Tensor tdQrdS = wg_dq.partition_fragment_A(sDs);
    Tensor tdQrKt = wg_dq.partition_fragment_B(sKt);
    // dS^T to shared memory with stmatrix: each 8 x 8 block of the S^T accumulator (8 keys, 8
    // adjacent queries) is one 16-byte row per key, contiguous in the query-contiguous layout, so
    // a warp stores 4 blocks per instruction with one address per lane (scalar 32-bit stores took
    // 4x the instructions, each behind its own swizzled address math).
    auto ds_copy = make_tiled_copy_C(Copy_Atom<SM90_U32x4_STSM_N, Element>{}, mma_sdp);
    auto thread_ds_copy = ds_copy.get_thread_slice(thread);
    Tensor tdSsdS = thread_ds_copy.partition_D(sDst);

    Tensor dk = partition_fragment_C(mma_dkv, KeyGradShape{});
    Tensor dv = partition_fragment_C(mma_dkv, KeyGradShape{});
    const AccumulatorCoords coords = AccumulatorCoords::of(thread);
    const BwdSchedule<Traits> schedule{params};
    typename Pipeline::PipelineState read;
    int kv_loads = 0;    // tiles whose K and V this CTA loaded
    int steps_done = 0;  // over every tile: the dS buffers alternate across tiles too
    BwdWalk walk;
    for (int taken = 0; schedule.take(smem, taken, &walk); ++taken) {
      clear(dk);
      clear(dv);
      if (walk.steps > 0) {
        cutlass::arch::ClusterTransactionBarrier::wait(&smem.kv_full, kv_loads & 1);
        ++kv_loads;
      }
      const int key0 = walk.n_block * kBlockN;
      const int wg_key0 = key0 + warpgroup * kRowsPerWarpgroup;
      const WindowMask<int>& mask = walk.window<Traits::kVarlen>(p);
      BwdWalk::Position at = walk.first();
      for (int step = 0; step < walk.steps; ++step, walk.advance(at), ++steps_done) {
        const int row0 = at.m_block * kBlockM;
        const int stage = read.index();
        const int ds_stage = steps_done % Traits::kDsStages;
        pipeline.consumer_wait(read);
        Tensor s = partition_fragment_C(mma_sdp, ScoreShape{});
        issue_gemm</*kZeroInit=*/true>(mma_sdp, tSrK, tSrQ(_, _, _, stage), s);
        Tensor dp = partition_fragment_C(mma_sdp, ScoreShape{});
        issue_gemm</*kZeroInit=*/true>(mma_sdp, tSrV, tSrdO(_, _, _, stage), dp);

        // P^T = exp2(S^T * scale log2 e - LSE log2 e), zero where the mask hides the key (the key
        // tail included, and varlen's next sequence). Rows past seqlen_q have LSE +inf: P = 0 there
        // without a test. With softcap the log2-domain score is softcap_out * tanh(S^T *
        // softcap_in) (tanh.approx, as the sm90 forward computes it, so P is the P its LSE
        // normalized), and s keeps G = P (1 - tanh^2) instead of P: dS = G (dP - D) is the raw
        // score's gradient through the cap.
        const bool masked = !mask.tile_fully_visible(row0, min(row0 + kBlockM, mask.seqlen_q),
                                                     wg_key0, wg_key0 + kRowsPerWarpgroup);
        const float* lse = smem.lse[stage];
        const float* delta = smem.delta[stage];
        // The S^T accumulator of 16 queries is exactly the m64k16 A operand of dV += P^T dO.
        Tensor p_elems = make_tensor<Element>(partition_shape_A(mma_dkv, ScoreShape{}));
        CUTE_STATIC_ASSERT_V(size(p_elems) == size(s));
        warpgroup_wait<1>();
        // Two copies of the loop: with the mask test inside, every element became a branch around
        // its exp2 and the MUFU latencies serialized.
        if (masked) {
          probabilities<true>(p, mask, coords, row0, key0, lse, s, p_elems);
        } else {
          probabilities<false>(p, mask, coords, row0, key0, lse, s, p_elems);
        }
        issue_gemm</*kZeroInit=*/false>(mma_dkv, p_elems, tdVrdOt(_, _, _, stage), dv);
        warpgroup_wait<1>();

        // dS^T = G (dP^T - D), D per query.
        Tensor ds_elems = make_tensor<Element>(partition_shape_A(mma_dkv, ScoreShape{}));
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < size(dp); ++i) {
          ds_elems(i) = static_cast<Element>(s(i) * (dp(i) - delta[coords.col(i)]));
        }

        // dS^T to shared memory for dQ = dS K, which needs both warpgroups' keys. The other buffer
        // is still read by the other warpgroup's previous dQ GEMM; it finished that before it
        // arrived here, so one barrier a step orders both.
        // ds_elems is in the S^T accumulator's register order (the A operand of dK); stmatrix
        // takes it through the accumulator's layout.
        Tensor ds_acc_view = make_tensor(ds_elems.data(), dp.layout());
        cute::copy(ds_copy, thread_ds_copy.retile_S(ds_acc_view), tdSsdS(_, _, _, ds_stage));
        // dK's place (Traits::kDkBeforeDsBarrier): under the dS barrier, or under the dQ staging.
        if constexpr (Traits::kDkBeforeDsBarrier) {
          issue_gemm</*kZeroInit=*/false>(mma_dkv, ds_elems, tdKrQt(_, _, _, stage), dk);
        }
        cutlass::arch::fence_view_async_shared();  // generic-proxy stores before wgmma reads them
        cutlass::arch::NamedBarrier::sync(Traits::kConsumerThreads,
                                          barrier_id(BwdBarrierId::kDsReady));
        Tensor dq = partition_fragment_C(mma_dq, Shape<Int<kBlockM>, Int<kHeadDim>>{});
        issue_gemm</*kZeroInit=*/true>(mma_dq, tdQrdS(_, _, _, ds_stage), tdQrKt, dq);
        if constexpr (Traits::kDkBeforeDsBarrier) {
          warpgroup_wait<0>();
          // Every GEMM that read this stage's Q and dO has retired (dQ reads dS and K only).
          pipeline.consumer_release(read);
          ++read;
        } else {
          // wgmma batches retire in order: dV and dQ first, dK while this thread stages dQ.
          issue_gemm</*kZeroInit=*/false>(mma_dkv, ds_elems, tdKrQt(_, _, _, stage), dk);
          warpgroup_wait<1>();
        }

        // dQ to the writer warp's staging buffer, once it has read out the previous step's.
        constexpr int kDqThreads = Traits::kConsumerThreads + cutlass::NumThreadsPerWarp;
        cutlass::arch::NamedBarrier::sync(kDqThreads, barrier_id(BwdBarrierId::kDqEmpty));
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < size(dq); i += 4) {
          *reinterpret_cast<float4*>(smem.dq + DqTileOrder<Traits>::offset(thread, i / 2)) =
              make_float4(dq(i), dq(i + 1), dq(i + 2), dq(i + 3));
        }
        if constexpr (!Traits::kDkBeforeDsBarrier) {
          // dK retires first, so that the staging stores have drained when the fence waits for
          // them (ncu: 23% of the long-scoreboard stalls sat on that fence, behind the stores).
          warpgroup_wait<0>();
          // Every GEMM that read this stage's Q and dO has retired.
          pipeline.consumer_release(read);
          ++read;
        }
        cutlass::arch::fence_view_async_shared();  // the writer's bulk reduction reads it (async)
        cutlass::arch::NamedBarrier::arrive(kDqThreads, barrier_id(BwdBarrierId::kDqFull));
      }
      if (walk.steps > 0) {
        // Every GEMM that read K and V has retired: the producer may load the next tile's while
        // this one's dK and dV are stored.
        cutlass::arch::ClusterBarrier::arrive(&smem.kv_empty);
      }
      if (gather_key_grads<Traits::kConsumerThreads, 2 * kBlockN * kHeadDim>(
              params.tail, walk.slot, walk.pieces, thread, barrier_id(BwdBarrierId::kKeyGradsAdded),
              &smem.last_piece, dk, dv)) {
        store_key_grads(p, walk, thread, dk, dv);
      }
    }
  }

  // P^T of the S^T accumulator s into p_elems (the element type), and s to G: P^T, or with
  // softcap P^T (1 - tanh^2) (see run()). kMasked: the tile has pairs the mask hides.
  template <bool kMasked, typename Frag, typename ElemFrag>
  __device__ static void probabilities(const sm80::BwdParams& p, const WindowMask<int>& mask,
                                       const AccumulatorCoords& coords, int row0, int key0,
                                       const float* lse, Frag& s, ElemFrag& p_elems) {
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(s); ++i) {
      const int query = coords.col(i);
      float prob;
      float g = 1.f;
      if constexpr (Traits::kSoftcap) {
        const float u = fast_tanh(s(i) * p.softcap_in);
        prob = fast_exp2(fmaf(u, p.softcap_out, -lse[query]));
        g = fmaf(-u, u, 1.f);
      } else {
        prob = fast_exp2(fmaf(s(i), p.scale_log2, -lse[query]));
      }
      if constexpr (kMasked) {
        if (!mask.visible(row0 + query, key0 + coords.row(i))) prob = 0.f;
      }
      p_elems(i) = static_cast<Element>(prob);
      s(i) = Traits::kSoftcap ? g * prob : prob;
    }
  }
};

}  // namespace flashcore::sm90
