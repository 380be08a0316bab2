// The sm90 forward kernel (FlashAttention-3 class): a persistent, warp-specialized CTA of one
// producer warpgroup (a warp of TMA loads, mainloop_load.hpp, and one of TMA stores of O,
// o_store.hpp) and two or three consumer warpgroups (wgmma and the online softmax,
// mainloop_mma.hpp; epilogue.hpp), composed here. Q, K and V flow through TMA
// rings (CUTLASS's PipelineTmaAsync: mbarriers with transaction counts): two stages each of K and
// V, one or two of Q (KernelTraits::kQStages). Varlen batches run here too, each tile bound to its
// sequence (sequence_view.hpp).
#pragma once

#include <cutlass/arch/reg_reconfig.h>

#include <cutlass/pipeline/sm90_pipeline.hpp>

#include "sm90/epilogue.hpp"
#include "sm90/fwd_params.hpp"
#include "sm90/kernel_traits.hpp"
#include "sm90/mainloop_load.hpp"
#include "sm90/mainloop_mma.hpp"
#include "sm90/named_barriers.hpp"
#include "sm90/o_store.hpp"
#include "sm90/sequence_view.hpp"
#include "sm90/tile_scheduler.hpp"
#include "sm90/wgmma.hpp"

namespace flashcore::sm90 {

// The hot-loop switches of one kernel: softcap (per element tanh), and the two overlaps that
// docs/perf.md measures one at a time (production runs both). kListed: the producer takes a
// varlen batch's tiles from its tile list (varlen_tiles.hpp). That is a kernel of its own because
// any change to the producer's loop recompiles the consumers' loop differently (ptxas), and the
// dense kernel lost 0.2-0.8% that way (docs/perf.md, session 25). kSinks: each row's softmax
// denominator gets its head's sink term (FwdArgs::sink_logits, flashcore/flex/sinks.hpp). Its own
// kernel for the same reason: a run-time sink branch in the one epilogue made every dense hd128
// forward 3-4% slower (docs/perf.md, session 29).
template <bool kSoftcap_, bool kPingpong_ = true, bool kIntraOverlap_ = true, bool kListed_ = false,
          bool kSinks_ = false>
struct Variant {
  static constexpr bool kSoftcap = kSoftcap_;
  static constexpr bool kPingpong = kPingpong_;
  static constexpr bool kIntraOverlap = kIntraOverlap_;
  static constexpr bool kListed = kListed_;
  static constexpr bool kSinks = kSinks_;
};

template <typename Traits, typename Variant>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    fwd_kernel(const __grid_constant__ FwdParams<Traits> params) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Pipeline = typename Traits::Pipeline;
  using PipelineQ = typename Traits::PipelineQ;
  using SharedStorage = typename Traits::SharedStorage;
  using Element = typename Traits::Element;
  extern __shared__ __align__(1024) char smem_bytes[];
  SharedStorage& smem = *reinterpret_cast<SharedStorage*>(smem_bytes);
  const FwdArgs& a = params.args;

  // Through a shuffle, so the compiler knows it is warp-uniform: the wgmma descriptors derived from
  // it then live in uniform registers (per-thread copies of them spilled).
  const int warpgroup = cutlass::canonical_warp_group_idx();
  const WarpgroupRole role = warpgroup_role(warpgroup);
  const bool is_producer = role == WarpgroupRole::kProducer;
  const int warp_in_warpgroup = cutlass::canonical_warp_idx_sync() % 4;

  // The constructors initialize the barriers (warp 0); the CTA-wide sync below publishes them.
  const auto kv_params =
      tma_pipeline_params<Pipeline>(is_producer, Traits::kConsumerThreads, Traits::kKVBytes);
  // In a cluster, every consumer warpgroup releases a K/V stage in every CTA of it (the stage is
  // refilled by all of their TMA multicasts).
  using ClusterShape = typename Traits::ClusterShape;
  Pipeline pipeline_k(smem.pipeline_k, kv_params, ClusterShape{});
  Pipeline pipeline_v(smem.pipeline_v, kv_params, ClusterShape{});
  // O by TMA (o_store.hpp; never for a varlen batch's listed kernel): the storer warp takes every
  // tile from the ring beside the consumers and is the Q ring's only releasing thread.
  const bool o_by_tma = Traits::kStoresOByTma && !Variant::kListed && a.o_by_tma;
  PipelineQ pipeline_q(
      smem.pipeline_q,
      tma_pipeline_params<PipelineQ>(is_producer, OStore<Traits>::q_stage_releasers(o_by_tma),
                                     Traits::kQBytes),
      Shape<_1, _1, _1>{});
  if (threadIdx.x == 0) {
    TileRing::init(smem.tiles, OStore<Traits>::tile_ring_takers(o_by_tma));
    if (o_by_tma) OStore<Traits>::init(smem);
  }
  cutlass::arch::fence_barrier_init();
  // The other CTAs of a cluster arrive on this CTA's barriers and multicast into its shared
  // memory: all of them must be initialized first.
  if constexpr (Traits::kClusterCtas > 1) {
    cute::cluster_arrive_relaxed();
    cute::cluster_wait();
  } else {
    __syncthreads();
  }

  if (is_producer) {
    cutlass::arch::warpgroup_reg_dealloc<kProducerRegisters>();
    const ProducerWarp warp_role = producer_warp(warp_in_warpgroup);
    if (warp_role == ProducerWarp::kLoad) {
      MainloopLoad<Traits>::template run<Variant::kListed>(params, smem, pipeline_q, pipeline_k,
                                                           pipeline_v);
    } else if (warp_role == ProducerWarp::kStoreO && o_by_tma) {
      using Store = typename OStore<Traits>::TileStore;
      // The consumers' own tests below: no rows, or no key, means no Q and nothing staged.
      OStore<Traits>::run(params, smem, [&](const Tile& tile, int) {
        const SequenceView seq = sequence_view(a, tile.batch);
        if (past_sequence<Traits::kBlockM>(a, seq, tile.m_block)) return Store::kNone;
        if (key_blocks<Traits::kBlockM, Traits::kBlockN>(a, seq.mask, tile).empty()) {
          return Store::kNone;
        }
        return Store::kStore;
      });
    }
    return;
  }

  cutlass::arch::warpgroup_reg_alloc<Traits::kConsumerRegisters>();
  using Mma = MainloopMma<Traits, Variant>;
  const int thread = threadIdx.x - kWarpgroupThreads;  // over all consumer warpgroups
  Mma mma;
  mma.warpgroup = warpgroup - 1;
  mma.start_turns();
  // The shared-memory operands depend only on the warpgroup: slice by its first thread.
  auto thr_qk = mma.mma_qk.get_slice(mma.warpgroup * kWarpgroupThreads);
  auto thr_pv = mma.mma_pv.get_slice(mma.warpgroup * kWarpgroupThreads);
  Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Traits::SmemLayoutQ{});
  Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename Traits::SmemLayoutK{});
  Tensor sVt = make_tensor(make_smem_ptr(smem.v.data()), typename Traits::SmemLayoutVt{});
  Tensor tSrQ = thr_qk.partition_fragment_A(sQ);
  Tensor tSrK = thr_qk.partition_fragment_B(sK);
  Tensor tOrV = thr_pv.partition_fragment_B(sVt);
  Tensor tOrO = partition_fragment_C(mma.mma_pv, select<0, 2>(typename Traits::TileShape{}));

  typename Pipeline::PipelineState read_k, read_v;
  typename PipelineQ::PipelineState read_q;
  int stores = 0;  // tiles this warpgroup staged for the storer warp
  for (int tiles_taken = 0;; ++tiles_taken) {
    Tile tile;  // decoded by the producer
    const int tile_index = TileRing::take(smem.tiles, tiles_taken, nullptr, &tile);
    if (tile_index >= a.num_tiles) break;
    // The head's sink logit (-inf: none), read before the mainloop so that its latency hides there.
    const float sink = Variant::kSinks ? a.sink_logits[tile.head] : -INFINITY;
    const SequenceView seq = sequence_view(a, tile.batch);
    if (past_sequence<Traits::kBlockM>(a, seq, tile.m_block)) continue;  // the producer skips it
    const BlockRange range = key_blocks<Traits::kBlockM, Traits::kBlockN>(a, seq.mask, tile);
    // The epilogue's view of the sequence's rows (a varlen sequence: batch 0 from its first row).
    const int row_end = seq.mask.seqlen_q;
    if (is_varlen_batch(a)) tile.batch = 0;
    if (range.empty()) {  // the producer loads nothing for it either
      // A row that sees no key keeps only the sink's term: LSE = its logit (-inf without sinks).
      Epilogue<Traits>::store_empty_rows(sequence_output<Element>(a, seq.q_start), tile, row_end,
                                         sink, mma.warpgroup, thread);
      continue;
    }
    pipeline_q.consumer_wait(read_q);
    OnlineSoftmax<1> softmax;
    // With one Q stage every consumer thread frees it once its last S GEMM has retired (Q's ring
    // is this CTA's own, so the arrival is local; the wgmma reads are complete at the wait).
    const int q_stage = read_q.index();
    auto q_read = [&] {
      if constexpr (Traits::kReleasesQEarly) smem.pipeline_q.empty_barrier_[q_stage].arrive();
    };
    if constexpr (Traits::kRemakesQOperand) {
      mma.run(a, seq.mask, tile, range, remade_q_operand<Traits>(smem.q.data(), thr_qk, q_stage),
              tSrK, tOrV, tOrO, softmax, pipeline_k, pipeline_v, read_k, read_v, thread, q_read);
    } else {
      mma.run(a, seq.mask, tile, range, tSrQ(_, _, _, q_stage), tSrK, tOrV, tOrO, softmax,
              pipeline_k, pipeline_v, read_k, read_v, thread, q_read);
    }
    Element* o_stage = smem.q.data() + q_stage * Traits::kQTileElements;
    if constexpr (Traits::kReleasesQEarly) {
      Epilogue<Traits>::template store_unstaged<Variant::kSinks>(
          sequence_output<Element>(a, seq.q_start), tile, row_end, tOrO, softmax, sink);
    } else if (o_by_tma) {
      Epilogue<Traits>::template stage_for_tma<Variant::kSinks>(a, tile, tOrO, softmax, sink,
                                                                mma.mma_pv, o_stage);
      OStore<Traits>::staged(smem, mma.warpgroup, stores++);
    } else {
      Epilogue<Traits>::template store<Variant::kSinks>(sequence_output<Element>(a, seq.q_start),
                                                        tile, row_end, mma.warpgroup, tOrO, softmax,
                                                        sink, mma.mma_pv, o_stage);
      // This thread's reads of O (generic proxy) happen before the next Q lands in the stage
      // (async proxy); every consumer thread arrives on the stage's empty barrier. Q's ring is this
      // CTA's own, so the arrival is local (consumer_release of a ring built for a one-CTA cluster
      // would address CTA 0 of a larger one).
      cutlass::arch::fence_view_async_shared();
      smem.pipeline_q.empty_barrier_[read_q.index()].arrive();
    }
    ++read_q;
  }
#endif
}

}  // namespace flashcore::sm90
