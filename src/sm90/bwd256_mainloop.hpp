// The hd256 backward's consumer warpgroups (bwd256_kernel.cuh runs them; the split of the work is
// bwd256_traits.hpp's), over the tiles the producer names (the persistent schedule, below). Per
// step of a tile's walk, every consumer thread runs the same sequence of GEMMs, with the operands
// of its warpgroup:
//   1. S^T = K Q^T (warpgroup 0) or dP^T = V dO^T (warpgroup 1), then both wait for it;
//   2. warpgroup 0: P^T (and G^T with softcap) to shared memory; barrier kPReady;
//   3. dV += P^T dO (each warpgroup its half of D);
//   4. warpgroup 1, while dV runs: dS^T = G (dP^T - D) to shared memory; barrier kDsReady;
//   5. dQ = dS K, then dK += dS^T Q; dV retires (the dO stage is released), dQ retires and is
//      staged for the dQ writer warp (warpgroup 1's half first, then warpgroup 0's into the same
//      buffer), dK retires (the Q stage is released).
// The GEMMs sit outside the warpgroup branches, which hold only register and shared-memory work on
// retired accumulators, so that no wgmma is issued behind a branch.
#pragma once

#include <cutlass/arch/barrier.h>

#include "common/online_softmax.hpp"
#include "common/score_scaling.hpp"
#include "sm80/bwd_params.hpp"
#include "sm90/bwd256_traits.hpp"
#include "sm90/bwd_mainloop.hpp"
#include "sm90/named_barriers.hpp"
#include "sm90/wgmma.hpp"

namespace flashcore::sm90 {

// Where the second stage of the Q ring starts, in elements.
template <typename Traits>
constexpr int q_stage_offset() {
  constexpr typename Traits::SmemLayoutQ layout{};
  return layout(0, 0, 1);
}

template <typename Traits>
struct Bwd256Mainloop {
  using Element = typename Traits::Element;
  using SharedStorage = typename Traits::SharedStorage;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kHeadDim = Traits::kHeadDim;
  using ScoreShape = Shape<Int<kBlockN>, Int<kBlockM>>;  // S^T, dP^T: keys x queries
  using KeyGradShape = Shape<Int<kBlockN>, Int<kHeadDim>>;
  using DqShape = Shape<Int<kBlockM>, Int<kHeadDim>>;
  // kDqFull and kDqEmpty: the dQ writer warp and one consumer warpgroup.
  static constexpr int kDqThreads = kWarpgroupThreads + cutlass::NumThreadsPerWarp;
  static_assert(q_stage_offset<Traits>() == kBlockM * kHeadDim, "a Q stage is one dO-shaped tile");
  static_assert(Traits::kPStages == 2, "the P^T buffer alternates");
  static_assert(ds_views_agree<Traits>(), "dS and dS^T must be the same bytes");

  typename Traits::TiledMmaSdP mma_sdp;
  typename Traits::TiledMmaDkv mma_dkv;
  typename Traits::TiledMmaDq mma_dq;

  // thread: 0..255 over both consumer warpgroups. Runs the tiles the producer hands over until it
  // names none.
  __device__ void run(const BwdKernelParams<Traits>& params, SharedStorage& smem,
                      typename Traits::PipelineQ& pipe_q, typename Traits::PipelineDo& pipe_do,
                      int thread) {
    const sm80::BwdParams& p = params.p;
    const int warpgroup = thread / kWarpgroupThreads;
    const int wg_thread = thread % kWarpgroupThreads;
    Tensor sQt = make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQt{});
    Tensor sdOt = make_tensor(make_smem_ptr(smem.d_o.data()), typename Traits::SmemLayoutDot{});
    Tensor sKt = make_tensor(make_smem_ptr(smem.k.data()), typename Traits::SmemLayoutKt{});
    Tensor sPt = make_tensor(make_smem_ptr(smem.pt.data()), typename Traits::SmemLayoutPt{});
    Tensor sDst = make_tensor(make_smem_ptr(smem.ds.data()), typename Traits::SmemLayoutDst{});
    Tensor sDs = make_tensor(make_smem_ptr(smem.ds.data()), typename Traits::SmemLayoutDs{});

    // Step 1's A operand: K (warpgroup 0) or V (warpgroup 1); its B is chosen per step.
    auto wg_sdp = mma_sdp.get_slice(0);
    Tensor tSrA = wg_sdp.partition_fragment_A(
        make_tensor(make_smem_ptr(warpgroup == 0 ? smem.k.data() : smem.v.data()),
                    typename Traits::SmemLayoutK{}));
    // Shared-memory operands of the split GEMMs depend only on the warpgroup: slice by its first
    // thread (the wgmma descriptors then stay warp-uniform).
    auto wg_dkv = mma_dkv.get_slice(warpgroup * kWarpgroupThreads);
    auto wg_dq = mma_dq.get_slice(warpgroup * kWarpgroupThreads);
    Tensor tdVrP = wg_dkv.partition_fragment_A(sPt);
    Tensor tdVrdOt = wg_dkv.partition_fragment_B(sdOt);
    Tensor tdKrdS = wg_dkv.partition_fragment_A(sDst);
    Tensor tdKrQt = wg_dkv.partition_fragment_B(sQt);
    Tensor tdQrdS = wg_dq.partition_fragment_A(sDs);
    Tensor tdQrKt = wg_dq.partition_fragment_B(sKt);
    // This thread's elements of P^T, G^T and dS^T in shared memory: its accumulator's layout.
    auto thread_sdp = mma_sdp.get_slice(wg_thread);
    Tensor tPsP = thread_sdp.partition_C(sPt);
    Tensor tSsDs = thread_sdp.partition_C(sDst);
    Tensor tGsG = thread_sdp.partition_C(
        make_tensor(make_smem_ptr(smem.g.data()), typename Traits::SmemLayoutDst{}));
    const AccumulatorCoords coords = AccumulatorCoords::of(wg_thread);

    Tensor dk = partition_fragment_C(mma_dkv, KeyGradShape{});
    Tensor dv = partition_fragment_C(mma_dkv, KeyGradShape{});
    const BwdSchedule<Traits> schedule{params};
    typename Traits::PipelineQ::PipelineState read_q;
    typename Traits::PipelineDo::PipelineState read_do;
    int kv_loads = 0;  // tiles whose K and V this CTA loaded
    int p_stage = 0;   // the P^T buffer of the next step, alternating across tiles too
    BwdWalk walk;
    for (int taken = 0; schedule.take(smem, taken, &walk); ++taken) {
      clear(dk);
      clear(dv);
      if (walk.steps > 0) {
        cutlass::arch::ClusterTransactionBarrier::wait(&smem.kv_full, kv_loads & 1);
        ++kv_loads;
        const int key0 = walk.n_block * kBlockN;
        BwdWalk::Position at = walk.first();
        for (int step = 0; step < walk.steps; ++step, walk.advance(at)) {
          const int row0 = at.m_block * kBlockM;
          const int stage = read_q.index();

          // 1. S^T or dP^T.
          if (warpgroup == 0) {
            pipe_q.consumer_wait(read_q);
          } else {
            pipe_do.consumer_wait(read_do);
          }
          Element* b_tile =
              warpgroup == 0 ? smem.q.data() + stage * (kBlockM * kHeadDim) : smem.d_o.data();
          Tensor tSrB = wg_sdp.partition_fragment_B(
              make_tensor(make_smem_ptr(b_tile), typename Traits::SmemLayoutDo{}));
          Tensor acc = partition_fragment_C(mma_sdp, ScoreShape{});
          issue_gemm</*kZeroInit=*/true>(mma_sdp, tSrA, tSrB, acc);
          warpgroup_wait<0>();

          // 2. P^T = exp2(S^T * scale log2 e - LSE log2 e), zero where the mask hides the key (the
          // key tail included); rows past seqlen_q have LSE +inf. Softcap as in bwd_mainloop.hpp.
          if (warpgroup == 0) {
            const bool masked = !p.mask.tile_fully_visible(row0, min(row0 + kBlockM, p.seqlen_q),
                                                           key0, key0 + kBlockN);
            Tensor tPsP_stage = tPsP(_, _, _, p_stage);
            // Two copies of the loop, as in bwd_mainloop.hpp: the mask test inside one serialized
            // the exp2s.
            if (masked) {
              probabilities<true>(p, coords, row0, key0, smem.lse[stage], acc, tPsP_stage, tGsG);
            } else {
              probabilities<false>(p, coords, row0, key0, smem.lse[stage], acc, tPsP_stage, tGsG);
            }
            cutlass::arch::fence_view_async_shared();  // generic-proxy stores before wgmma reads
          }
          cutlass::arch::NamedBarrier::sync(Traits::kConsumerThreads,
                                            barrier_id(Bwd256BarrierId::kPReady));

          // 3. dV.
          pipe_do.consumer_wait(read_do);
          issue_gemm</*kZeroInit=*/false>(mma_dkv, tdVrP(_, _, _, p_stage), tdVrdOt, dv);

          // 4. dS^T = G (dP^T - D), D per query; G is P^T (in the element type) or with softcap
          // G^T.
          pipe_q.consumer_wait(read_q);
          if (warpgroup == 1) {
            const float* delta = smem.delta[stage];
            Tensor tGs = tPsP(_, _, _, p_stage);
            CUTLASS_PRAGMA_UNROLL
            for (int i = 0; i < size(acc); i += 2) {
              Element g[2];
              load_shared_pair(Traits::kSoftcap ? &tGsG(i) : &tGs(i), g);
              store_shared_pair(
                  &tSsDs(i),
                  static_cast<Element>(static_cast<float>(g[0]) * (acc(i) - delta[coords.col(i)])),
                  static_cast<Element>(static_cast<float>(g[1]) *
                                       (acc(i + 1) - delta[coords.col(i + 1)])));
            }
            cutlass::arch::fence_view_async_shared();
          }
          cutlass::arch::NamedBarrier::sync(Traits::kConsumerThreads,
                                            barrier_id(Bwd256BarrierId::kDsReady));

          // 5. dQ, then dK.
          Tensor dq = partition_fragment_C(mma_dq, DqShape{});
          issue_gemm</*kZeroInit=*/true>(mma_dq, tdQrdS, tdQrKt, dq);
          issue_gemm</*kZeroInit=*/false>(mma_dkv, tdKrdS, tdKrQt(_, _, _, stage), dk);
          warpgroup_wait<2>();
          pipe_do.consumer_release(read_do);  // dV, the stage's last reader, retired
          warpgroup_wait<1>();
          stage_dq(smem, warpgroup, wg_thread, dq);
          warpgroup_wait<0>();
          // Every GEMM that read this stage's Q (and its LSE and D) has retired.
          pipe_q.consumer_release(read_q);
          ++read_q;
          ++read_do;
          p_stage ^= 1;
        }
        // Every GEMM that read K and V has retired: the producer may load the next tile's while
        // this one's dK and dV are stored.
        cutlass::arch::ClusterBarrier::arrive(&smem.kv_empty);
      }
      if (gather_key_grads<Traits::kConsumerThreads, 2 * kBlockN * Traits::kHeadDim>(
              params.tail, walk.slot, walk.pieces, thread,
              barrier_id(Bwd256BarrierId::kKeyGradsAdded), &smem.last_piece, dk, dv)) {
        store_key_grads(p, walk, warpgroup, coords, dk, dv);
      }
    }
  }

  // The step's dQ into the staging buffer, one warpgroup's half at a time (warpgroup 1's first),
  // each added by the writer warp once staged (kDqFull). Before a warpgroup stores, the writer has
  // read out the other half (kDqEmpty: the writer arrives after its bulk reduction's reads, the
  // warpgroup waits), and the other warpgroup's stores into the same bytes are ordered before
  // these by a barrier both warpgroups wait on (bar.sync): warpgroup 1's by kDqHandOver, warpgroup
  // 0's of the step before by this step's kPReady. A bar.arrive orders the arriving thread's
  // earlier stores too (PTX: it synchronizes with the bar.sync that completes the barrier), but
  // compute-sanitizer's racecheck does not follow it: with warpgroup 1 arriving on warpgroup 0's
  // kDqEmpty instead, it reported the stores of thread t of both warpgroups to the same bytes as
  // write-write hazards.
  template <typename Frag>
  __device__ static void stage_dq(SharedStorage& smem, int warpgroup, int wg_thread,
                                  const Frag& dq) {
    // Warpgroup 0 is here about when warpgroup 1 has stored: their dQ GEMMs were issued together.
    if (warpgroup == 1) stage_dq_half(smem, 1, wg_thread, dq);
    // One bar.sync instruction for both warpgroups: all threads of an aligned barrier execute the
    // same one (with a call site per warpgroup, synccheck reported divergent threads).
    cutlass::arch::NamedBarrier::sync(Traits::kConsumerThreads,
                                      barrier_id(Bwd256BarrierId::kDqHandOver));
    if (warpgroup == 0) stage_dq_half(smem, 0, wg_thread, dq);
  }

  template <typename Frag>
  __device__ static void stage_dq_half(SharedStorage& smem, int warpgroup, int wg_thread,
                                       const Frag& dq) {
    cutlass::arch::NamedBarrier::sync(kDqThreads,
                                      barrier_id(Bwd256BarrierId::kDqEmpty0, warpgroup));
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(dq); i += 2) {
      *reinterpret_cast<float2*>(smem.dq + (i / 2 * kWarpgroupThreads + wg_thread) * 2) =
          make_float2(dq(i), dq(i + 1));
    }
    cutlass::arch::fence_view_async_shared();  // the writer's bulk reduction reads it (async)
    cutlass::arch::NamedBarrier::arrive(kDqThreads,
                                        barrier_id(Bwd256BarrierId::kDqFull0, warpgroup));
  }

  // P^T of the S^T accumulator acc into shared memory (this thread's elements tPs), and with
  // softcap G^T = P^T (1 - tanh^2) into tGs. kMasked: the tile has pairs the mask hides.
  template <bool kMasked, typename Frag, typename SmemFrag, typename GFrag>
  __device__ static void probabilities(const sm80::BwdParams& p, const AccumulatorCoords& coords,
                                       int row0, int key0, const float* lse, Frag& acc,
                                       SmemFrag& tPs, GFrag& tGs) {
    Tensor p_elems = make_tensor<Element>(shape(acc));
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(acc); ++i) {
      const int query = coords.col(i);
      float prob;
      float g = 1.f;
      if constexpr (Traits::kSoftcap) {
        const float u = fast_tanh(acc(i) * p.softcap_in);
        prob = fast_exp2(fmaf(u, p.softcap_out, -lse[query]));
        g = fmaf(-u, u, 1.f);
      } else {
        prob = fast_exp2(fmaf(acc(i), p.scale_log2, -lse[query]));
      }
      if constexpr (kMasked) {
        if (!p.mask.visible(row0 + query, key0 + coords.row(i))) prob = 0.f;
      }
      p_elems(i) = static_cast<Element>(prob);
      acc(i) = g * prob;
    }
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(acc); i += 2) {
      store_shared_pair(&tPs(i), p_elems(i), p_elems(i + 1));
      if constexpr (Traits::kSoftcap) {
        store_shared_pair(&tGs(i), static_cast<Element>(acc(i)), static_cast<Element>(acc(i + 1)));
      }
    }
  }

  // dK (times the softmax scale) and dV of this thread's registers, in the output dtype: rows are
  // the CTA's 64 keys (those past seqlen_k not stored), columns this warpgroup's half of D.
  template <typename Frag>
  __device__ static void store_key_grads(const sm80::BwdParams& p, const BwdWalk& walk,
                                         int warpgroup, const AccumulatorCoords& coords,
                                         const Frag& dk, const Frag& dv) {
    auto* dk_out = static_cast<Element*>(p.dk) + walk.batch * p.dk_batch + walk.kv_head * p.dk_head;
    auto* dv_out = static_cast<Element*>(p.dv) + walk.batch * p.dv_batch + walk.kv_head * p.dv_head;
    const int key0 = walk.n_block * kBlockN;
    const int dim0 = warpgroup * Traits::kHalfDim;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(dk); i += 2) {
      const int key = key0 + coords.row(i);
      const int dim = dim0 + coords.col(i);
      if (key < p.seqlen_k) {
        *reinterpret_cast<uint32_t*>(dk_out + key * p.dk_seq + dim) =
            pack(dk(i) * p.scale, dk(i + 1) * p.scale);
        *reinterpret_cast<uint32_t*>(dv_out + key * p.dv_seq + dim) = pack(dv(i), dv(i + 1));
      }
    }
  }

  __device__ static uint32_t pack(float a, float b) {
    return pack_elements(static_cast<Element>(a), static_cast<Element>(b));
  }
  // Two adjacent elements (4-byte aligned) as one 32-bit shared-memory access: the address comes
  // through CuTe's swizzled layout as a generic pointer, which the compiler would access through
  // generic loads and stores.
  __device__ static void store_shared_pair(const Element* at, Element a, Element b) {
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(cute::cast_smem_ptr_to_uint(at)),
                 "r"(pack_elements(a, b))
                 : "memory");
  }
  __device__ static void load_shared_pair(const Element* at, Element (&out)[2]) {
    uint32_t bits;
    asm volatile("ld.shared.b32 %0, [%1];\n"
                 : "=r"(bits)
                 : "r"(cute::cast_smem_ptr_to_uint(at))
                 : "memory");
    memcpy(out, &bits, sizeof(bits));
  }
  __device__ static uint32_t pack_elements(Element a, Element b) {
    const Element pair[2] = {a, b};
    uint32_t bits;
    memcpy(&bits, pair, sizeof(bits));
    return bits;
  }
};

}  // namespace flashcore::sm90
